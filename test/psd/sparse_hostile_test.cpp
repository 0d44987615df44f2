// Sparse row frames against the real psd binary on tcp with --auth mac: raw clients holding the
// job's key send sealed PUSH_PULLs whose row frames are wrong in one way each (an id beyond the
// table, ids out of order, values of the wrong size, a NaN, pulls in a PUSH); psd answers each
// with a sealed ERROR naming the problem, applies nothing, and keeps serving: a good raw push and
// the job's PsClient then see the same rows, and psd exits 0.
#include <cmath>
#include <limits>

#include "test/psd/hostile_fixture.h"

using namespace psrun;
using namespace psrun::test;
using wire::FrameDesc;
using wire::RowPart;

namespace sparse_hostile_test {

namespace {

constexpr std::uint32_t kRows = 64, kWidth = 4;

std::vector<TensorSpec> sparse_model() {
    std::vector<TensorSpec> t = {{"w", {6}}, {"emb", {kRows, kWidth}}};
    t[1].kind = TensorKind::kRows;
    t[1].row_init = RowInit{RowInitKind::kUniform, 0.5f, 11};
    return t;
}

template <class T>
std::string bytes_of(const std::vector<T>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// A PUSH_PULL (or `type`) from worker 0 with the dense gradient (6 zeros) and `rows` frames.
Frames message(std::uint64_t token, const std::vector<std::pair<std::uint32_t, std::string>>& rows,
               wire::MessageType type = wire::MessageType::kPushPull) {
    wire::Header h;
    h.type = type;
    h.role = wire::Role::kChief;
    h.token = token;
    Frames frames{""};
    if (type != wire::MessageType::kPull) {
        h.frames.push_back(FrameDesc{0, 24});
        frames.push_back(bytes_of(std::vector<float>(6, 0.0f)));
    }
    for (const auto& [id, payload] : rows) {
        h.frames.push_back(FrameDesc{id, static_cast<std::uint32_t>(payload.size())});
        frames.push_back(payload);
    }
    frames[0] = wire::encode_header(h);
    return frames;
}

Frames sealed(Frames frames, MessageSealer& sealer) {
    auto h = wire::decode_header(frames[0]);
    REQUIRE(h);
    h->flags |= wire::kFlagMac;
    frames[0] = wire::encode_header(*h);
    std::vector<ByteRange> ranges;
    for (const auto& f : frames) ranges.push_back(ByteRange{f.data(), f.size()});
    frames.push_back(sealer.seal(0, ranges));
    return frames;
}

// The reply's frames without its trailer, after checking the trailer.
Frames opened(const Frames& reply, MessageSealer& sealer) {
    REQUIRE(reply.size() >= 2);
    std::vector<ByteRange> ranges;
    for (std::size_t i = 0; i + 1 < reply.size(); ++i) ranges.push_back(ByteRange{reply[i].data(), reply[i].size()});
    REQUIRE(sealer.open(0, ranges, reply.back()));
    return Frames(reply.begin(), reply.end() - 1);
}

const std::uint32_t kIds = wire::row_frame_id(RowPart::kGradIds, 1);
const std::uint32_t kValues = wire::row_frame_id(RowPart::kGradValues, 1);
const std::uint32_t kPull = wire::row_frame_id(RowPart::kPullIds, 1);

}  // namespace

TEST_CASE("psd refuses bad row frames with a sealed ERROR each, applies nothing, and keeps serving",
          "[psd][process][hostile][sparse]") {
    TcpPsd s("info", "mac");
    PsClientOptions o;
    o.endpoints = {s.endpoint};
    o.role = wire::Role::kChief;
    o.keys = s.keys;
    o.auth = AuthMode::kMac;
    o.tensors = sparse_model();
    o.connect_timeout = o.reply_timeout = std::chrono::milliseconds(5000);
    PsClient chief(o);
    REQUIRE(chief.hello());
    wire::InitConfig init;
    init.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 1.0f};
    REQUIRE(chief.init(init, std::vector<float>(6, 0.0f)));
    auto row3 = [&] {
        const std::vector<std::uint32_t> ids{3};
        const RowRequest request{1, ids};
        PulledRows rows;
        REQUIRE(chief.exchange(Exchange{.pulls = {&request, 1}, .rows = &rows}));
        return std::vector<float>(rows.rows(0).begin(), rows.rows(0).end());
    };
    const auto start = row3();

    zmq::context_t context(1);
    RawClient raw(context, s.endpoint, nullptr);
    MessageSealer sealer(s.keys);
    const std::string ones = bytes_of(std::vector<float>(kWidth, 1.0f));
    auto refused = [&](const Frames& frames, const std::string& words, ErrorCode code = ErrorCode::kProtocol) {
        auto reply = raw.exchange(sealed(frames, sealer), 5000);
        REQUIRE(reply);
        const Frames r = opened(*reply, sealer);
        REQUIRE(r.size() == 2);
        auto h = wire::decode_header(r[0]);
        REQUIRE(h);
        CHECK(h->type == wire::MessageType::kError);
        auto e = wire::decode_error(r[1]);
        REQUIRE(e);
        CHECK(e->code == code);
        CHECK_THAT(e->reason, Catch::Contains(words));
    };
    refused(message(s.keys.token, {{kIds, bytes_of(std::vector<std::uint32_t>{kRows})}, {kValues, ones}}),
            "row id 64 of 'emb' is not below its 64 rows");
    refused(message(s.keys.token, {{kIds, bytes_of(std::vector<std::uint32_t>{5, 3})}, {kValues, ones + ones}}),
            "not strictly ascending");
    refused(message(s.keys.token, {{kIds, bytes_of(std::vector<std::uint32_t>{3})}, {kValues, ones + "xx"}}),
            "take exactly 16");
    refused(message(s.keys.token, {{kIds, bytes_of(std::vector<std::uint32_t>{3})}}), "not followed by their values");
    refused(message(s.keys.token, {{kPull, bytes_of(std::vector<std::uint32_t>{3})}}, wire::MessageType::kPush),
            "pulled in a PUSH");
    refused(message(s.keys.token,
                    {{kIds, bytes_of(std::vector<std::uint32_t>{3})},
                     {kValues, bytes_of(std::vector<float>{1, std::numeric_limits<float>::quiet_NaN(), 1, 1})}}),
            "contain NaN or Inf", ErrorCode::kRejected);
    CHECK(row3() == start);  // nothing was applied

    // A good raw push of row 3 with a pull of it: PARAMS with the dense slice and the row.
    auto reply = raw.exchange(sealed(message(s.keys.token, {{kIds, bytes_of(std::vector<std::uint32_t>{3})},
                                                            {kValues, ones},
                                                            {kPull, bytes_of(std::vector<std::uint32_t>{3})}}),
                                     sealer),
                              5000);
    REQUIRE(reply);
    const Frames r = opened(*reply, sealer);
    REQUIRE(r.size() == 3);
    auto h = wire::decode_header(r[0]);
    REQUIRE(h);
    CHECK(h->type == wire::MessageType::kParams);
    REQUIRE(h->frames.size() == 2);
    CHECK(h->frames[1].id == wire::row_frame_id(RowPart::kValues, 1));
    REQUIRE(r[2].size() == kWidth * sizeof(float));
    std::vector<float> got(kWidth);
    std::memcpy(got.data(), r[2].data(), r[2].size());
    for (std::size_t c = 0; c < kWidth; ++c) CHECK(got[c] == start[c] - 1.0f);
    CHECK(row3() == got);
    REQUIRE(chief.done());
    CHECK(s.psd->wait(10) == 0);
    const std::string log = s.psd->output();
    INFO(log);
    CHECK(stat_of(log, "nonfinite") == 1);
    CHECK(stat_of(log, "rows_pushed") == 1);
}

}  // namespace sparse_hostile_test
