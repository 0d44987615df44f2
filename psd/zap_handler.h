// ZeroMQ ZAP (RFC 27) handler admitting only CURVE clients that present the job's client key.
// Its REP socket is polled by the server's loop thread (the ZAP exchange is asynchronous in
// libzmq, so no extra thread is needed). Must be constructed before the server socket binds.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <zmq.hpp>

namespace psrun::psd {

class ZapHandler {
  public:
    // client_public: the job's client public key, Z85 (40 chars).
    ZapHandler(zmq::context_t& context, const std::string& client_public);
    zmq::socket_t& socket() { return socket_; }
    void handle();  // answers one pending request (call when socket() is readable)
    std::uint64_t denied() const { return denied_; }

    // Also watch `server` (the CURVE ROUTER) for handshakes that fail before ZAP is asked: a client
    // that does not speak CURVE at all, or garbage. Call once, before the server binds.
    void watch_handshakes(zmq::context_t& context, zmq::socket_t& server, std::uint32_t index);
    // The monitor's PAIR socket (nullptr before watch_handshakes()); poll it with socket().
    zmq::socket_t* handshake_events() { return monitor_ ? &monitor_ : nullptr; }
    void handle_handshake_event();  // logs one failed handshake (rate-limited) and counts it

  private:
    zmq::socket_t socket_;
    zmq::socket_t monitor_;
    std::uint64_t failed_handshakes_ = 0;
    std::array<std::uint8_t, 32> client_key_{};
    std::uint64_t denied_ = 0;
};

}  // namespace psrun::psd
