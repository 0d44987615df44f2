// --auth mac against the real psd binary on tcp: a client without the job's key, one without a
// MAC at all, an altered message and a replayed one are each refused with ERROR, counted and
// logged, and psd goes on serving the job's own clients (a full push/pull through PsClient), then
// exits 0. Raw DEALER sockets play the hostile clients; MessageSealer seals what they send.
#include "common/wire_precision.h"
#include "test/psd/hostile_fixture.h"

using namespace psrun;
using namespace psrun::test;

namespace {

// `frames` with the MAC flag set in its header and a trailer sealed by `sealer` for ps 0.
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

}  // namespace

TEST_CASE("psd --auth mac refuses strangers, altered and replayed messages, logs them and keeps serving",
          "[psd][process][hostile][auth]") {
    TcpPsd s("info", "mac");
    REQUIRE(s.psd->wait_for_output("workers, MAC)", 5));
    zmq::context_t context(1);

    // No MAC at all, with the right token.
    RawClient plain(context, s.endpoint, nullptr);
    auto reply = plain.exchange(hello(s.keys.token), 5000);
    REQUIRE(reply);
    CHECK(error_of(*reply).code == ErrorCode::kUnauthorized);
    CHECK_THAT(error_of(*reply).reason, Catch::Contains("runs --auth mac"));

    // Another job's key file, even with this job's token.
    JobKeys stranger_keys = *generate_job_keys();
    stranger_keys.token = s.keys.token;
    MessageSealer stranger(stranger_keys);
    reply = plain.exchange(sealed(hello(s.keys.token), stranger), 5000);
    REQUIRE(reply);
    CHECK_THAT(error_of(*reply).reason, Catch::Contains("MAC does not verify"));

    // The job's key, but a byte of the body changed after sealing.
    MessageSealer insider(s.keys);
    Frames altered = sealed(hello(s.keys.token), insider);
    altered[1][altered[1].size() / 2] ^= 0x01;
    reply = plain.exchange(altered, 5000);
    REQUIRE(reply);
    CHECK_THAT(error_of(*reply).reason, Catch::Contains("MAC does not verify"));

    // A genuine HELLO is answered with a sealed WELCOME; sent again (from another connection) it is a replay.
    const Frames genuine = sealed(hello(s.keys.token), insider);
    reply = plain.exchange(genuine, 5000);
    REQUIRE(reply);
    REQUIRE(reply->size() == 3);  // header, WELCOME body, trailer
    auto welcome = wire::decode_header((*reply)[0]);
    REQUIRE(welcome);
    CHECK(welcome->type == wire::MessageType::kWelcome);
    CHECK((welcome->flags & wire::kFlagMac) != 0);
    CHECK(insider.open(
        0, {{ByteRange{(*reply)[0].data(), (*reply)[0].size()}, ByteRange{(*reply)[1].data(), (*reply)[1].size()}}},
        (*reply)[2]));
    RawClient recorder(context, s.endpoint, nullptr);
    reply = recorder.exchange(genuine, 5000);
    REQUIRE(reply);
    CHECK_THAT(error_of(*reply).reason, Catch::Contains("replayed"));

    // A CURVE client cannot even connect to a MAC psd's plain socket: its handshake fails.
    RawClient curve(context, s.endpoint, &s.keys);
    CHECK_FALSE(curve.exchange(hello(s.keys.token), 1000));
    CHECK(s.psd->running());

    // The job's own client: init, a push and a pull, all sealed both ways, in bf16 (the MAC covers
    // the frames as sent, whatever their width).
    PsClientOptions o;
    o.endpoints = {s.endpoint};
    o.role = wire::Role::kChief;
    o.keys = s.keys;
    o.auth = AuthMode::kMac;
    o.tensors = test::small_model();
    o.wire_bf16 = true;
    o.connect_timeout = o.reply_timeout = std::chrono::milliseconds(5000);
    {
        PsClient chief(o);
        REQUIRE(chief.hello());
        const std::size_t n = chief.layout().total;
        wire::InitConfig init;
        init.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 0.5f};
        REQUIRE(chief.init(init, ramp(n, 1.0f)));
        std::vector<float> params(n), grads(n, 2.0f);
        auto step = chief.push_pull(grads, 0, params);
        REQUIRE(step);
        CHECK(step->step == 1);
        const auto expected = ramp(n, 1.0f);
        for (std::size_t i = 0; i < n; ++i) REQUIRE(params[i] == wire::to_f32(wire::to_bf16(expected[i] - 1.0f)));
        REQUIRE(chief.done());
    }
    CHECK(s.psd->wait(10) == 0);
    const std::string log = s.psd->output();
    INFO(log);
    CHECK(stat_of(log, "unauthorized") == 4);
    CHECK_THAT(log, Catch::Contains("refused a message without a MAC (--auth mac)") &&
                        Catch::Contains("refused a message whose MAC does not verify") &&
                        Catch::Contains("refused a replayed message"));
}

TEST_CASE("a PsClient with another job's key file is told why it was refused", "[psd][process][auth]") {
    TcpPsd s("info", "mac");
    PsClientOptions o;
    o.endpoints = {s.endpoint};
    o.role = wire::Role::kChief;
    o.keys = *generate_job_keys();
    o.auth = AuthMode::kMac;
    o.tensors = test::small_model();
    o.connect_timeout = std::chrono::milliseconds(5000);
    PsClient intruder(o);
    auto refused = intruder.hello();
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::kUnauthorized);
    CHECK_THAT(refused.error().message, Catch::Contains("(unsealed reply)") && Catch::Contains("MAC does not verify"));

    auto curve = o;  // the job's keys, but CURVE against a MAC psd: no handshake, a timeout
    curve.keys = s.keys;
    curve.auth = AuthMode::kCurve;
    curve.connect_timeout = std::chrono::milliseconds(700);
    PsClient mismatched(curve);
    CHECK_FALSE(mismatched.hello());
    s.serve_good_client();
    CHECK(s.psd->wait(10) == 0);
}
