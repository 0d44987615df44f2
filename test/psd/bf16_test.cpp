// --wire-precision bf16 against real psd servers over tcp (real ZeroMQ, test/psd/ps_fixture.h):
// parameters come back as the bf16 rounding of psd's f32 master weights, updates below bf16
// resolution still accumulate on psd, sync replies share one bf16 copy per step, and a bf16
// gradient frame of the wrong size is refused with an ERROR naming it while psd keeps serving.
#include <catch2/catch.hpp>

#include <future>
#include <zmq_addon.hpp>

#include "common/wire_precision.h"
#include "common/zmq_util.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::sgd;
using psrun::test::small_model;

namespace {

float round_bf16(float x) { return wire::to_f32(wire::to_bf16(x)); }

PsClientOptions bf16_options(const Cluster& cluster, std::uint32_t index) {
    auto o = cluster.client_options(index, small_model());
    o.wire_bf16 = true;
    return o;
}

}  // namespace

TEST_CASE("bf16 exchange: params are psd's f32 weights rounded to bf16; tiny updates accumulate in f32",
          "[psd][bf16]") {
    Cluster cluster(2, base_options(2), "tcp");
    PsClient chief(bf16_options(cluster, 0));
    PsClient f32_worker(cluster.client_options(1, small_model()));  // reads psd's master weights exactly
    REQUIRE(chief.hello());
    REQUIRE(f32_worker.hello());
    const std::size_t n = chief.layout().total;
    auto params = ramp(n, 1.0f, 1.0f);       // in [1, 2): bf16 steps of 2^-7 there
    REQUIRE(chief.init(sgd(1.0f), params));  // INIT is always f32

    std::vector<float> got(n);
    REQUIRE(chief.pull(got));
    std::size_t rounded = 0;
    for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(got[i] == round_bf16(params[i]));
        rounded += got[i] != params[i];
    }
    CHECK(rounded > n / 2);  // the ramp is mostly not representable in bf16: the check can fail

    // 40 steps of 1e-4 (bf16-rounded by the client, applied in f32 on psd): each step is far below
    // bf16's resolution at 1.0 (2^-7 = 0.0078), so bf16 master weights would never move.
    const std::vector<float> grad(n, 1e-4f);
    std::vector<float> expected = params;
    ParamFrames frames;
    for (std::uint64_t s = 0; s < 40; ++s) {
        auto info = chief.push_pull_frames(grad, s, frames);
        REQUIRE(info);
        CHECK(info->step == s + 1);
        for (auto& e : expected) e -= 1.0f * round_bf16(1e-4f);
    }
    frames.copy_to(got, chief.layout());
    std::vector<float> master(n);
    REQUIRE(f32_worker.pull(master));
    for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(master[i] == expected[i]);         // f32 master weights, exactly as SGD in f32
        REQUIRE(got[i] == round_bf16(master[i]));  // what the bf16 client sees
    }
    CHECK(master[0] < params[0] - 0.003f);  // moved by 40 x 1e-4
    for (std::uint32_t shard : {0u, 1u}) {
        auto stats = chief.stats(shard);
        REQUIRE(stats);
        CHECK((*stats)["applied"] == 40);
        CHECK((*stats)["bf16_param_conversions"].get<int>() >= 41);
    }
}

TEST_CASE("bf16 exchange in sync mode: both workers get the same step, converted once per step", "[psd][bf16]") {
    auto o = base_options(2);
    o.sync = true;
    o.replicas_to_aggregate = 2;
    Cluster cluster(1, o, "tcp");
    PsClient chief(bf16_options(cluster, 0));
    PsClient worker(bf16_options(cluster, 1));
    REQUIRE(chief.hello());
    REQUIRE(worker.hello());
    const std::size_t n = chief.layout().total;
    auto params = ramp(n, 1.0f), ga = ramp(n, 0.4f), gb = ramp(n, -0.2f, 1.0f);
    REQUIRE(chief.init(sgd(0.5f), params));
    std::vector<float> out_a(n), out_b(n);
    const int steps = 3;
    for (int s = 0; s < steps; ++s) {
        auto first = std::async(std::launch::async, [&] { return chief.push_pull(ga, s, out_a); });
        auto second = worker.push_pull(gb, s, out_b);
        REQUIRE(second);
        REQUIRE(first.get());
        CHECK(out_a == out_b);
    }
    float want0 = params[5];
    for (int s = 0; s < steps; ++s) want0 -= 0.5f * ((round_bf16(ga[5]) + round_bf16(gb[5])) * 0.5f);
    CHECK(out_a[5] == round_bf16(want0));
    auto stats = chief.stats(0);
    REQUIRE(stats);
    CHECK((*stats)["applied"] == steps);
    CHECK((*stats)["step"] == steps);
    CHECK((*stats)["bf16_param_conversions"] == steps);
    CHECK((*stats)["bf16_param_reuses"] == steps);
}

TEST_CASE("a bf16 gradient frame of the wrong size is refused with an ERROR naming it; psd goes on", "[psd][bf16]") {
    Cluster cluster(1, base_options(2), "tcp");
    PsClient chief(bf16_options(cluster, 0));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    auto params = ramp(n, 1.0f);
    REQUIRE(chief.init(sgd(0.1f), params));
    const auto& layout = chief.layout();
    const auto ids = layout.slices_of(0);
    REQUIRE(ids.size() >= 2);

    zmq::context_t context(1);
    zmq::socket_t raw(context, zmq::socket_type::dealer);
    raw.set(zmq::sockopt::linger, 0);
    raw.connect(cluster.endpoints()[0]);
    // A PUSH_PULL from worker 1 flagged bf16 whose second slice frame has `bytes_of(k)` bytes; the
    // header describes the frames as sent, so only the bf16 size rule can refuse it.
    auto send_push = [&](std::size_t wrong, std::size_t wrong_bytes) {
        wire::Header h;
        h.type = wire::MessageType::kPushPull;
        h.role = wire::Role::kWorker;
        h.index = 1;
        h.flags = wire::kFlagBf16;
        std::vector<std::string> frames;
        for (std::size_t k = 0; k < ids.size(); ++k) {
            const std::size_t bytes = k == wrong ? wrong_bytes : layout.slices[ids[k]].length * 2;
            frames.emplace_back(bytes, '\0');
            h.frames.push_back(wire::FrameDesc{ids[k], static_cast<std::uint32_t>(bytes)});
        }
        raw.send(zmq::buffer(wire::encode_header(h)), zmq::send_flags::sndmore);
        for (std::size_t k = 0; k < frames.size(); ++k)
            raw.send(zmq::buffer(frames[k]), k + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
        std::vector<zmq::pollitem_t> items = {{raw.handle(), 0, ZMQ_POLLIN, 0}};
        REQUIRE(zmq::poll(items, std::chrono::milliseconds(5000)) == 1);
        std::vector<zmq::message_t> parts;
        REQUIRE(zmq::recv_multipart(raw, std::back_inserter(parts)));
        REQUIRE(parts.size() == 2);
        auto header = wire::decode_header(view(parts[0]));
        REQUIRE(header);
        REQUIRE(header->type == wire::MessageType::kError);
        auto error = wire::decode_error(view(parts[1]));
        REQUIRE(error);
        CHECK(error->code == ErrorCode::kProtocol);
        return error->reason;
    };
    const std::size_t length = layout.slices[ids[1]].length;
    const std::string as_f32 = send_push(1, length * 4);  // an f32 frame under the bf16 flag
    CHECK_THAT(as_f32, Catch::Contains("bf16 gradient frame 1 (slice " + std::to_string(ids[1]) + ") has " +
                                       std::to_string(length * 4) + " bytes"));
    CHECK_THAT(as_f32, Catch::Contains("exactly " + std::to_string(length * 2) + " bytes in bf16"));
    const std::string short_frame = send_push(1, length * 2 - 1);
    CHECK_THAT(short_frame, Catch::Contains("has " + std::to_string(length * 2 - 1) + " bytes"));

    // psd still serves, its weights untouched by the refused pushes.
    std::vector<float> out(n);
    REQUIRE(chief.pull(out));
    for (std::size_t i = 0; i < n; ++i) REQUIRE(out[i] == round_bf16(params[i]));
    REQUIRE(chief.push_pull(std::vector<float>(n, 0.5f), 0, out));
    for (std::size_t i = 0; i < n; ++i) REQUIRE(out[i] == round_bf16(params[i] - 0.1f * 0.5f));
    auto stats = chief.stats(0);
    REQUIRE(stats);
    CHECK((*stats)["applied"] == 1);
    CHECK((*stats)["errors"] == 2);
}
