// psd's exception boundary per message and the bound on the first HELLO's size (issue 39): a
// message whose handling throws is answered with ERROR and psd goes on serving; a HELLO declaring
// a model the host cannot hold is refused before anything is allocated.
#include "psd/torn_guard.h"
#include "test/psd/hostile_fixture.h"

using namespace psrun;
using namespace psrun::test;

namespace {

// `count` dense tensors of rows x cols floats.
std::vector<TensorSpec> dense_tensors(int count, std::uint32_t rows, std::uint32_t cols) {
    std::vector<TensorSpec> out;
    for (int i = 0; i < count; ++i) {
        std::string name = "t";
        name.append(std::to_string(i));  // not "t" + ...: GCC 12's -Wrestrict false positive
        out.push_back(TensorSpec{name, {rows, cols}});
    }
    return out;
}

// A normal HELLO is answered with WELCOME.
void expect_welcome(RawClient& raw, std::uint64_t token) {
    auto reply = raw.exchange(hello(token), 5000);
    REQUIRE(reply);
    auto h = wire::decode_header((*reply)[0]);
    REQUIRE(h);
    CHECK(h->type == wire::MessageType::kWelcome);
}

}  // namespace

TEST_CASE("psd refuses a HELLO whose model this host cannot hold, before allocating it", "[psd][process][hostile]") {
    // 16 tensors of 2^32 floats: 256 GiB. Before the bound, psd died of std::bad_alloc (or worse,
    // the OOM killer); the address-space limit keeps a psd without the bound from touching memory.
    TcpPsd s("info", "curve", 4L << 20);
    zmq::context_t context(1);
    RawClient raw(context, s.endpoint, &s.keys);
    auto reply = raw.exchange(hello(s.keys.token, dense_tensors(16, 65536, 65536)), 10000);
    REQUIRE(reply);
    const auto e = error_of(*reply);
    CHECK(e.code == ErrorCode::kInvalidArgument);
    CHECK_THAT(e.reason, Catch::Contains("68719476736 floats of parameters") &&
                             Catch::Contains("but this host lets it use") && Catch::Contains("more psd shards"));
    CHECK(s.psd->running());
    expect_welcome(raw, s.keys.token);  // the refusal left no model behind: the small one is served
    s.serve_good_client();
    CHECK(s.psd->wait(10) == 0);
    const std::string log = s.psd->output();
    INFO(log);
    CHECK_THAT(log, Catch::Contains("refused a HELLO whose model does not fit"));
}

TEST_CASE("a message whose handler throws is answered with ERROR and psd goes on serving", "[psd][process][hostile]") {
    // Under a 1 GiB address space, a HELLO of 1 GiB of parameters passes the host's bound (real
    // memory) but its buffer cannot be allocated: std::bad_alloc in the handler. Before the
    // boundary it ended psd (exit 1) with whatever parameters the shard held.
    TcpPsd s("info", "curve", 1L << 20);
    zmq::context_t context(1);
    RawClient raw(context, s.endpoint, &s.keys);
    auto reply = raw.exchange(hello(s.keys.token, dense_tensors(1, 16384, 16384)), 10000);
    REQUIRE(reply);
    const auto e = error_of(*reply);
    CHECK(e.code == ErrorCode::kUnsupported);
    CHECK_THAT(e.reason, Catch::Contains("could not handle this request") && Catch::Contains("bad_alloc"));
    CHECK(s.psd->running());
    expect_welcome(raw, s.keys.token);  // the next normal request is served
    s.serve_good_client();
    CHECK(s.psd->wait(10) == 0);
    const std::string log = s.psd->output();
    INFO(log);
    CHECK_THAT(log, Catch::Contains("refused a message whose handling threw"));
    CHECK(stat_of(log, "handler_exceptions") == 1);
}

TEST_CASE("TornGuard: a write that throws leaves its mark, one that returns clears it", "[psd]") {
    bool torn = false;
    {
        const psd::TornGuard g(torn);
        CHECK(torn);
    }
    CHECK_FALSE(torn);
    try {
        const psd::TornGuard outer(torn);
        { const psd::TornGuard inner(torn); }  // a nested write that returns keeps the outer mark
        CHECK(torn);
        throw std::bad_alloc();
    } catch (const std::bad_alloc&) {
    }
    CHECK(torn);
    torn = false;
    {  // an exception thrown and caught inside the write does not leave it
        const psd::TornGuard g(torn);
        try {
            throw std::runtime_error("caught inside");
        } catch (const std::exception&) {
        }
    }
    CHECK_FALSE(torn);
}
