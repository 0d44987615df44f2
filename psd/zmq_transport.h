// The daemon's transport (psd/transport.h): one ZeroMQ ROUTER socket, bound at construction, with
// CURVE (a ZAP handler that admits the job's client key) or per-message MACs (--auth mac,
// common/message_auth.h) on tcp, an owner-only socket file on ipc. Owns the ZeroMQ context.
//
// Destruction terminates the context: zmq_ctx_term returns once the I/O thread released every
// zero-copy message, so destroy the transport before the buffers such messages point into.
#pragma once

#include <memory>
#include <string>

#include "common/message_auth.h"
#include "common/thread_team.h"
#include "psd/server_options.h"
#include "psd/transport.h"
#include "psd/zap_handler.h"

namespace psrun::psd {

class ZmqTransport : public Transport {
  public:
    // Binds options.endpoints[options.index] (throws UsageError for a bad endpoint,
    // std::runtime_error naming it when it cannot be bound). `team` (not owned, may be null)
    // splits MAC checks and must outlive the transport.
    ZmqTransport(const ServerOptions& options, ThreadTeam* team);
    ~ZmqTransport() override;

    const std::string& endpoint() const { return endpoint_; }  // as bound (tcp port resolved)

    std::string security() const override;
    [[nodiscard]] std::optional<AuthRefusal> authenticate(const std::string& routing, const wire::Header& h,
                                                          Parts& parts) override;
    void send(const std::string& routing, wire::Header& h, std::vector<zmq::message_t>& payloads) override;
    std::vector<zmq::pollitem_t> poll_items() override;
    void serve_events(std::span<const zmq::pollitem_t> items) override;
    bool receive(Parts& parts) override;
    void prune() override;
    std::uint64_t denied() const override;
    void linger() override;

  private:
    bool has_keys_ = false;
    zmq::context_t context_;
    std::unique_ptr<ZapHandler> zap_;
    std::unique_ptr<MessageVerifier> verifier_;  // --auth mac on tcp
    zmq::socket_t socket_;
    std::string endpoint_;
};

}  // namespace psrun::psd
