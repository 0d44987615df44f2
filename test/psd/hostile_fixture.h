// Fixtures of the hostile-client tests: the real psd binary on tcp with a job key file, raw
// ZeroMQ DEALER clients that send whatever frames a test builds, and helpers to build and read
// those frames. Single-threaded use.
#pragma once

#include <zlib.h>
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>
#include <zmq_addon.hpp>

#include "common/job_keys.h"
#include "common/message_auth.h"
#include "common/ps_client.h"
#include "common/wire.h"
#include "common/zmq_util.h"
#include "test/psd/child_process.h"
#include "test/psd/ps_fixture.h"

namespace psrun::test {

using Frames = std::vector<std::string>;

struct TcpPsd {
    std::string dir = test::make_temp_dir();
    std::string key = dir + "/job.key";
    JobKeys keys;
    std::optional<ChildProcess> psd;
    std::string endpoint;
    std::string auth_mode;

    // auth: psd's --auth (curve or mac) with the job key file. address_space_kib: psd runs under
    // that RLIMIT_AS (ulimit -v), so that a large allocation fails with std::bad_alloc; 0: none.
    explicit TcpPsd(const std::string& log_level, const std::string& auth = "curve", long address_space_kib = 0)
        : auth_mode(auth) {
        auto k = ensure_job_key_file(key, true, std::chrono::milliseconds(100));
        REQUIRE(k);
        keys = *k;
        std::vector<std::string> args{"--index",       "0",  "--ps",        "tcp://127.0.0.1:*",
                                      "--num-workers", "1",  "--key-file",  key,
                                      "--auth",        auth, "--log-level", log_level};
        std::filesystem::path exe = test::build_dir() / "psd" / "psd";
        if (address_space_kib > 0) {
            args.insert(
                args.begin(),
                {"-c", "ulimit -v " + std::to_string(address_space_kib) + " && exec \"$0\" \"$@\"", exe.string()});
            exe = "/bin/sh";
        }
        psd.emplace(exe, args, dir + "/psd.log");
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
        o.auth = *parse_auth_mode(auth_mode);
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
            socket_.send(zmq::buffer(frames[i]),
                         i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::dontwait);
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

// A HELLO message for `tensors` (the small model by default), from the chief, with the job's token.
inline Frames hello(std::uint64_t token, const std::vector<TensorSpec>& tensors = test::small_model()) {
    const std::string body = wire::encode_hello(wire::Hello{{"small", ""}, tensors});
    wire::Header h;
    h.type = wire::MessageType::kHello;
    h.role = wire::Role::kChief;
    h.token = token;
    h.frames = {wire::FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())}};
    return {wire::encode_header(h), body};
}

// The same header as another protocol version would write it, with a correct checksum.
inline std::string with_version(std::string header, std::uint16_t version) {
    std::memcpy(header.data() + 4, &version, 2);  // little-endian, as on x86-64
    auto crc_of = [](std::string_view b) {
        return static_cast<std::uint32_t>(
            crc32(0L, reinterpret_cast<const Bytef*>(b.data()), static_cast<uInt>(b.size())));
    };
    const std::uint32_t crc =
        crc_of(std::string_view(header).substr(0, 44)) ^ crc_of(std::string_view(header).substr(48));
    std::memcpy(header.data() + 44, &crc, 4);
    return header;
}

// The ERROR reply's body, after checking the reply is a well-formed ERROR.
inline wire::ErrorBody error_of(const Frames& reply) {
    REQUIRE(reply.size() == 2);
    auto h = wire::decode_header(reply[0]);
    REQUIRE(h);
    CHECK(h->type == wire::MessageType::kError);
    auto e = wire::decode_error(reply[1]);
    REQUIRE(e);
    return *e;
}

inline long stat_of(const std::string& log, const std::string& name) {
    std::smatch m;
    if (!std::regex_search(log, m, std::regex("\"" + name + "\":([0-9]+)"))) return -1;
    return std::stol(m[1]);
}

}  // namespace psrun::test
