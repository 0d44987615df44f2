// What ParameterServer's request handling needs of the wire beneath it (issues 36, 39): where
// replies go, how a request's authenticity is checked, and, for the daemon's loop, what to poll.
// The server's logic (psd/parameter_server*.cpp) never touches a socket: ZmqTransport
// (psd/zmq_transport.h) is the daemon's ROUTER socket with CURVE or per-message MACs; a test hands
// the server a transport that records replies (test/psd/shard_service_test.cpp) and feeds it
// requests through ParameterServer::handle().
//
// Threads: every method is called on the server's one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "common/wire.h"

namespace psrun::psd {

using Parts = std::vector<zmq::message_t>;  // one message: routing id, header, payload frames

// Why the transport refused a request: `what` for psd's log ("a message without a MAC"), `reason`
// for the sender (the ERROR kUnauthorized reply's text, saying what to do).
struct AuthRefusal {
    std::string what;
    std::string reason;
};

class Transport {
  public:
    virtual ~Transport() = default;

    // How requests are authenticated, for the log ("CURVE", "MAC", ...).
    virtual std::string security() const = 0;
    // Checks the request `parts` (routing, header, frames[, MAC trailer]) whose decoded header is `h`
    // and strips what only the transport reads (the MAC trailer); nullopt when it may be served,
    // else why not (the server counts it, logs it and answers ERROR kUnauthorized).
    [[nodiscard]] virtual std::optional<AuthRefusal> authenticate(const std::string& routing, const wire::Header& h,
                                                                  Parts& parts) = 0;
    // Sends header `h` and `payloads` to `routing` (sealing them when the transport authenticates
    // that peer's requests: it may set flags in `h`). `payloads` are consumed.
    virtual void send(const std::string& routing, wire::Header& h, std::vector<zmq::message_t>& payloads) = 0;

    // The daemon's loop (ParameterServer::run()): poll items of the transport (the first one is
    // where requests arrive); after zmq::poll, serve_events() handles what is the transport's own
    // (handshakes), and receive() takes the next request without blocking (false: none).
    virtual std::vector<zmq::pollitem_t> poll_items() = 0;
    virtual void serve_events(std::span<const zmq::pollitem_t> items) = 0;
    virtual bool receive(Parts& parts) = 0;
    // Housekeeping after each round of the loop (forgetting quiet MAC sessions).
    virtual void prune() {}
    // Connections refused before any request reached the server (CURVE handshakes), for STATS.
    virtual std::uint64_t denied() const { return 0; }
    // The run is over: replies still queued get a bounded time to leave.
    virtual void linger() {}
};

}  // namespace psrun::psd
