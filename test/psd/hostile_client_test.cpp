// Hostile clients against the real psd binary on tcp with the job's CURVE keys: a raw ZeroMQ
// client speaking protocol version 2, malformed frames, clients without the job's client key
// and without CURVE at all. Each is refused (ERROR reply or no connection), counted, logged,
// and psd goes on serving a well-behaved client, then exits 0.
#include "test/psd/hostile_fixture.h"

using namespace psrun;
using namespace psrun::test;

TEST_CASE("psd answers a wrong protocol version and malformed frames with ERROR and keeps serving",
          "[psd][process][hostile]") {
    TcpPsd s("info");  // the refusals must show at the default log level
    zmq::context_t context(1);
    RawClient raw(context, s.endpoint, &s.keys);

    Frames v2 = hello(s.keys.token);
    v2[0] = with_version(v2[0], wire::kVersion + 1);
    auto reply = raw.exchange(v2, 5000);
    REQUIRE(reply);
    const auto version_error = error_of(*reply);
    CHECK(version_error.code == ErrorCode::kProtocol);
    const std::string theirs = "protocol version " + std::to_string(wire::kVersion + 1);
    const std::string ours = "this build speaks " + std::to_string(wire::kVersion);
    CHECK_THAT(version_error.reason, Catch::Contains(theirs) && Catch::Contains(ours));

    // Garbage: a short header, a bad magic, a header announcing a frame that is not there.
    for (const Frames& junk : {Frames{"abc"}, Frames{std::string(48, 'x')}, Frames{hello(s.keys.token)[0]}}) {
        auto r = raw.exchange(junk, 5000);
        REQUIRE(r);
        CHECK(error_of(*r).code == ErrorCode::kProtocol);
    }
    CHECK(s.psd->running());

    s.serve_good_client();  // the raw client's errors left psd serving
    CHECK(s.psd->wait(10) == 0);
    const std::string log = s.psd->output();
    INFO(log);
    CHECK_THAT(log, Catch::Contains("refused a malformed message (" + theirs + ", " + ours));
    CHECK(stat_of(log, "malformed") == 4);
}

TEST_CASE("psd on tcp refuses clients without the job's CURVE key, logs them and keeps serving",
          "[psd][process][hostile][auth]") {
    TcpPsd s("info");
    zmq::context_t context(1);

    auto other = generate_job_keys();
    REQUIRE(other);
    JobKeys stranger = *other;
    stranger.server_public = s.keys.server_public;  // knows the server's public key, not the job's client key
    stranger.token = s.keys.token;                  // and even the token
    RawClient wrong_key(context, s.endpoint, &stranger);
    CHECK_FALSE(wrong_key.exchange(hello(s.keys.token), 1000));
    REQUIRE(s.psd->wait_for_output("refused a connection from 127.0.0.1", 10));

    RawClient plain(context, s.endpoint, nullptr);  // no CURVE at all
    CHECK_FALSE(plain.exchange(hello(s.keys.token), 1000));
    // libzmq ends that handshake before ZAP is asked: psd's handshake monitor logs it.
    CHECK(s.psd->wait_for_output("refused a connection on tcp://", 10));
    CHECK(s.psd->running());

    s.serve_good_client();
    CHECK(s.psd->wait(10) == 0);
    const std::string log = s.psd->output();
    INFO(log);
    CHECK(stat_of(log, "auth_denied") >= 2);  // the wrong key (ZAP) and the plain client (handshake)
    CHECK(stat_of(log, "messages") == 2);     // only the good client's HELLO and DONE got through
}

TEST_CASE("psd refuses an INIT whose learning-rate schedule is hostile and keeps serving", "[psd][process][hostile]") {
    TcpPsd s("info");
    zmq::context_t context(1);
    RawClient raw(context, s.endpoint, &s.keys);
    auto welcome = raw.exchange(hello(s.keys.token), 5000);
    REQUIRE(welcome);
    REQUIRE(wire::decode_header((*welcome)[0])->type == wire::MessageType::kWelcome);

    wire::InitConfig init;
    init.optimizer.schedule = *parse_lr_schedule("piecewise:boundaries=10,20;values=1e-3,5e-4,1e-4");
    for (std::uint32_t count : {0xFFFFFFFFu, 65u}) {  // absurd piecewise counts: refused before any allocation
        std::string body = wire::encode_init(init);
        std::memcpy(body.data() + 1 + 7 * 4 + 3 * 8 + 1 + 8 + 4, &count, 4);
        wire::Header h;
        h.type = wire::MessageType::kInit;
        h.role = wire::Role::kChief;
        h.token = s.keys.token;
        h.frames = {wire::FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())}};
        auto reply = raw.exchange({wire::encode_header(h), body}, 5000);
        REQUIRE(reply);
        const auto e = error_of(*reply);
        CHECK(e.code == ErrorCode::kProtocol);
        CHECK_THAT(e.reason, Catch::Contains("learning-rate schedule: piecewise boundary count"));
    }
    CHECK(s.psd->running());
    s.serve_good_client();
    CHECK(s.psd->wait(10) == 0);
}
