// ParameterServer's logic without sockets (issues 36, 39): requests are handed to handle() as the
// transport would receive them and the replies are read from a transport that records them. The
// same server runs behind the real ROUTER socket in server_test.cpp and the process tests.
#include <catch2/catch.hpp>

#include <cstring>

#include "common/tensor_layout.h"
#include "common/wire.h"
#include "common/zmq_util.h"
#include "psd/parameter_server.h"
#include "test/psd/ps_fixture.h"

namespace psrun {
namespace {

struct Sent {
    std::string routing;
    wire::Header header;
    std::vector<std::string> frames;
};

// Records every reply (after a round trip of its header through the wire encoding); refuses
// requests from routing ids listed in `refused`, as a transport whose check failed would.
class RecordingTransport : public psd::Transport {
  public:
    explicit RecordingTransport(std::vector<Sent>* sent) : sent_(sent) {}
    std::vector<std::string> refused;

    std::string security() const override { return "recorded (test)"; }
    std::optional<psd::AuthRefusal> authenticate(const std::string& routing, const wire::Header&,
                                                 psd::Parts&) override {
        if (std::find(refused.begin(), refused.end(), routing) == refused.end()) return std::nullopt;
        return psd::AuthRefusal{"a test refusal", "refused by the test's transport"};
    }
    void send(const std::string& routing, wire::Header& h, std::vector<zmq::message_t>& payloads) override {
        auto decoded = wire::decode_header(wire::encode_header(h));
        REQUIRE(decoded);
        Sent s{routing, *decoded, {}};
        for (const auto& p : payloads) s.frames.emplace_back(view(p));
        sent_->push_back(std::move(s));
    }
    std::vector<zmq::pollitem_t> poll_items() override { return {}; }
    void serve_events(std::span<const zmq::pollitem_t>) override {}
    bool receive(psd::Parts&) override { return false; }

  private:
    std::vector<Sent>* sent_;
};

const std::vector<TensorSpec> kTensors = {{"w", {40, 30}}, {"b", {30}}};

// A server for `num_workers` workers whose replies land in `sent`; `refused` routing ids fail
// the transport's check.
struct Service {
    std::vector<Sent> sent;
    RecordingTransport* transport = nullptr;
    std::unique_ptr<psd::ParameterServer> server;
    ShardLayout layout = *compute_layout(kTensors, 1);

    explicit Service(std::uint32_t num_workers, bool sync = false) {
        psd::ServerOptions o;
        o.index = 0;
        o.endpoints = {"inproc://unused"};  // never bound: the transport is the test's
        o.num_workers = num_workers;
        o.sync = sync;
        o.replicas_to_aggregate = num_workers;
        auto t = std::make_unique<RecordingTransport>(&sent);
        transport = t.get();
        server = std::make_unique<psd::ParameterServer>(o, std::move(t));
    }

    // Hands the server one request from worker `index` (routing id "w<index>").
    void request(std::uint32_t index, wire::MessageType type, const std::vector<std::string>& frames,
                 const std::vector<std::uint32_t>& ids, std::uint64_t step = 0, std::uint64_t token = 0) {
        wire::Header h;
        h.type = type;
        h.role = index == 0 ? wire::Role::kChief : wire::Role::kWorker;
        h.index = index;
        h.step = step;
        h.token = token;
        for (std::size_t k = 0; k < frames.size(); ++k)
            h.frames.push_back(wire::FrameDesc{ids[k], static_cast<std::uint32_t>(frames[k].size())});
        psd::Parts parts;
        const std::string routing = "w" + std::to_string(index);
        const std::string header = wire::encode_header(h);
        parts.emplace_back(routing.data(), routing.size());
        parts.emplace_back(header.data(), header.size());
        for (const auto& f : frames) parts.emplace_back(f.data(), f.size());
        server->handle(parts);
    }
    void hello(std::uint32_t index) {
        request(index, wire::MessageType::kHello, {wire::encode_hello(wire::Hello{{"svc", ""}, kTensors})},
                {wire::kBodyFrame});
    }
    // The dense buffer `values` as one f32 frame per slice, after `body` when given.
    void with_slices(const std::vector<float>& values, std::vector<std::string>& frames,
                     std::vector<std::uint32_t>& ids) const {
        for (auto id : layout.slices_of(0)) {
            const auto& sl = layout.slices[id];
            frames.emplace_back(reinterpret_cast<const char*>(values.data() + sl.flat_offset), sl.length * 4);
            ids.push_back(id);
        }
    }
    void init(const std::vector<float>& params, float learning_rate) {
        wire::InitConfig config;
        config.optimizer.kind = OptimizerKind::kSgd;
        config.optimizer.learning_rate = learning_rate;
        std::vector<std::string> frames{wire::encode_init(config)};
        std::vector<std::uint32_t> ids{wire::kBodyFrame};
        with_slices(params, frames, ids);
        request(0, wire::MessageType::kInit, frames, ids);
    }
    void push_pull(std::uint32_t index, const std::vector<float>& grads, std::uint64_t step) {
        std::vector<std::string> frames;
        std::vector<std::uint32_t> ids;
        with_slices(grads, frames, ids);
        request(index, wire::MessageType::kPushPull, frames, ids, step);
    }
    // The dense parameters a PARAMS reply carries, in flat order.
    std::vector<float> params_of(const Sent& reply) const {
        REQUIRE(reply.header.type == wire::MessageType::kParams);
        std::vector<float> out(layout.total);
        REQUIRE(reply.frames.size() == layout.slices_of(0).size());
        for (std::size_t k = 0; k < reply.frames.size(); ++k) {
            const auto& sl = layout.slices[reply.header.frames[k].id];
            REQUIRE(reply.frames[k].size() == sl.length * 4);
            std::memcpy(out.data() + sl.flat_offset, reply.frames[k].data(), sl.length * 4);
        }
        return out;
    }
};

std::vector<float> ramp(std::size_t n, float scale) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 17) - 1.0f;
    return v;
}

}  // namespace

TEST_CASE("the shard's logic serves HELLO, INIT and PUSH_PULL through a transport without sockets", "[psd][service]") {
    Service s(1);
    CHECK(s.server->endpoint().empty());
    s.hello(0);
    REQUIRE(s.sent.size() == 1);
    CHECK(s.sent[0].routing == "w0");
    CHECK(s.sent[0].header.type == wire::MessageType::kWelcome);

    const auto params = ramp(s.layout.total, 0.25f);
    s.init(params, 0.5f);
    REQUIRE(s.sent.size() == 2);
    CHECK(s.sent[1].header.type == wire::MessageType::kAck);

    const auto grads = ramp(s.layout.total, -0.125f);
    s.push_pull(0, grads, 0);
    REQUIRE(s.sent.size() == 3);
    CHECK(s.sent[2].header.step == 1);
    const auto updated = s.params_of(s.sent[2]);
    for (std::size_t i = 0; i < params.size(); ++i) REQUIRE(updated[i] == params[i] - 0.5f * grads[i]);

    s.request(0, wire::MessageType::kDone, {}, {});
    CHECK(s.sent.back().header.type == wire::MessageType::kAck);
    s.server->tick();
    REQUIRE(s.server->exit_code());
    CHECK(*s.server->exit_code() == 0);
}

TEST_CASE("a sync step holds the first worker's reply until the second worker's gradient arrives", "[psd][service]") {
    Service s(2, true);
    s.hello(0);
    s.hello(1);
    const auto params = ramp(s.layout.total, 1.0f);
    s.init(params, 1.0f);
    const std::size_t before = s.sent.size();
    const std::vector<float> g0(s.layout.total, 2.0f), g1(s.layout.total, 4.0f);
    s.push_pull(0, g0, 0);
    CHECK(s.sent.size() == before);  // held: no reply until the step is complete
    s.push_pull(1, g1, 0);
    REQUIRE(s.sent.size() == before + 2);
    std::vector<std::string> routings;
    for (std::size_t k = before; k < s.sent.size(); ++k) {
        routings.push_back(s.sent[k].routing);
        CHECK(s.sent[k].header.step == 1);
        const auto p = s.params_of(s.sent[k]);
        for (std::size_t i = 0; i < p.size(); ++i) REQUIRE(p[i] == params[i] - 3.0f);  // the mean gradient, 3
    }
    std::sort(routings.begin(), routings.end());
    CHECK(routings == std::vector<std::string>{"w0", "w1"});
}

TEST_CASE("requests the transport or the server refuses are answered with an ERROR naming why", "[psd][service]") {
    Service s(1);
    s.transport->refused = {"w0"};
    s.hello(0);
    REQUIRE(s.sent.size() == 1);
    REQUIRE(s.sent[0].header.type == wire::MessageType::kError);
    auto refused = wire::decode_error(s.sent[0].frames.at(0));
    REQUIRE(refused);
    CHECK(refused->code == ErrorCode::kUnauthorized);
    CHECK(refused->reason == "refused by the test's transport");

    s.transport->refused.clear();
    s.request(0, wire::MessageType::kHello, {wire::encode_hello(wire::Hello{{"svc", ""}, kTensors})},
              {wire::kBodyFrame}, 0, /*token=*/7);
    auto wrong_token = wire::decode_error(s.sent.back().frames.at(0));
    REQUIRE(wrong_token);
    CHECK(wrong_token->code == ErrorCode::kUnauthorized);
    CHECK_THAT(wrong_token->reason, Catch::Contains("token"));

    s.push_pull(0, std::vector<float>(s.layout.total, 1.0f), 0);  // no HELLO was accepted yet
    auto early = wire::decode_error(s.sent.back().frames.at(0));
    REQUIRE(early);
    CHECK_THAT(early->reason, Catch::Contains("HELLO first"));

    s.hello(0);
    CHECK(s.sent.back().header.type == wire::MessageType::kWelcome);
    s.init(ramp(s.layout.total, 1.0f), 0.1f);
    auto bad = ramp(s.layout.total, 1.0f);
    bad[5] = std::numeric_limits<float>::quiet_NaN();
    s.push_pull(0, bad, 0);
    auto nan = wire::decode_error(s.sent.back().frames.at(0));
    REQUIRE(nan);
    CHECK_THAT(nan->reason, Catch::Contains("NaN or Inf"));
}

}  // namespace psrun
