// Hostile clients against the real psd binary on tcp with the job's CURVE keys: a raw ZeroMQ
// client speaking protocol version 2, malformed frames, clients without the job's client key
// and without CURVE at all. Each is refused (ERROR reply or no connection), counted, logged,
// and psd goes on serving a well-behaved client, then exits 0.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>
#include <zmq_addon.hpp>

#include "common/job_keys.h"
#include "common/ps_client.h"
#include "common/wire.h"
#include "common/zmq_util.h"
#include "test/psd/child_process.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::ChildProcess;

namespace {

using Frames = std::vector<std::string>;

struct TcpPsd {
    std::string dir = test::make_temp_dir();
    std::string key = dir + "/job.key";
    JobKeys keys;
    std::optional<ChildProcess> psd;
    std::string endpoint;

    explicit TcpPsd(const std::string& log_level) {
        auto k = ensure_job_key_file(key, true, std::chrono::milliseconds(100));
        REQUIRE(k);
        keys = *k;
        psd.emplace(test::build_dir() / "psd" / "psd",
                    std::vector<std::string>{"--index", "0", "--ps", "tcp://127.0.0.1:*", "--num-workers", "1",
                                             "--key-file", key, "--log-level", log_level},
                    dir + "/psd.log");
        REQUIRE(psd->wait_for_output("serving on", 20));
        std::smatch m;
        const std::string out = psd->output();
        REQUIRE(std::regex_search(out, m, std::regex("serving on (tcp://127\\.0\\.0\\.1:[0-9]+)")));
        endpoint = m[1];
    }
    ~TcpPsd() { std::filesystem::remove_all(dir); }

    // A well-behaved chief: HELLO then DONE, which ends the run (one worker).
    void serve_good_client() const {
        PsClientOptions o;
        o.endpoints = {endpoint};
        o.index = 0;
        o.role = wire::Role::kChief;
        o.keys = keys;
        o.tensors = test::small_model();
        o.connect_timeout = std::chrono::milliseconds(5000);
        o.reply_timeout = std::chrono::milliseconds(5000);
        PsClient chief(o);
        REQUIRE(chief.hello());
        REQUIRE(chief.done());
    }
};

// One raw DEALER socket: CURVE with `keys` when given, plain otherwise.
class RawClient {
public:
    RawClient(zmq::context_t& context, const std::string& endpoint, const JobKeys* keys)
        : socket_(context, zmq::socket_type::dealer) {
        socket_.set(zmq::sockopt::linger, 0);
        if (keys) make_curve_client(socket_, *keys);
        socket_.connect(endpoint);
    }
    // Sends `frames`, returns the reply frames, or nullopt after `ms` without one.
    std::optional<Frames> exchange(const Frames& frames, int ms) {
        for (std::size_t i = 0; i < frames.size(); ++i)
            socket_.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore
                                                                       : zmq::send_flags::dontwait);
        std::vector<zmq::pollitem_t> items = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
        if (zmq::poll(items, std::chrono::milliseconds(ms)) == 0) return std::nullopt;
        std::vector<zmq::message_t> parts;
        if (!zmq::recv_multipart(socket_, std::back_inserter(parts))) return std::nullopt;
        Frames out;
        for (const auto& p : parts) out.emplace_back(view(p));
        return out;
    }

private:
    zmq::socket_t socket_;
};

// A HELLO message for the small model, from the chief, with the job's token.
Frames hello(std::uint64_t token) {
    const std::string body = wire::encode_hello(wire::Hello{{"small", ""}, test::small_model()});
    wire::Header h;
    h.type = wire::MessageType::kHello;
    h.role = wire::Role::kChief;
    h.token = token;
    h.frames = {wire::FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())}};
    return {wire::encode_header(h), body};
}

// The same header as another protocol version would write it, with a correct checksum.
std::string with_version(std::string header, std::uint16_t version) {
    std::memcpy(header.data() + 4, &version, 2);  // little-endian, as on x86-64
    auto crc_of = [](std::string_view b) {
        return static_cast<std::uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(b.data()), static_cast<uInt>(b.size())));
    };
    const std::uint32_t crc = crc_of(std::string_view(header).substr(0, 44)) ^ crc_of(std::string_view(header).substr(48));
    std::memcpy(header.data() + 44, &crc, 4);
    return header;
}

// The ERROR reply's body, after checking the reply is a well-formed ERROR.
wire::ErrorBody error_of(const Frames& reply) {
    REQUIRE(reply.size() == 2);
    auto h = wire::decode_header(reply[0]);
    REQUIRE(h);
    CHECK(h->type == wire::MessageType::kError);
    auto e = wire::decode_error(reply[1]);
    REQUIRE(e);
    return *e;
}

long stat_of(const std::string& log, const std::string& name) {
    std::smatch m;
    if (!std::regex_search(log, m, std::regex("\"" + name + "\":([0-9]+)"))) return -1;
    return std::stol(m[1]);
}

}  // namespace

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
    CHECK(stat_of(log, "messages") == 2);  // only the good client's HELLO and DONE got through
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
