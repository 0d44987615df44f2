#include "psd/zmq_transport.h"

#include <sys/stat.h>
#include <zmq_addon.hpp>

#include <cerrno>
#include <cstring>
#include <iterator>

#include "common/zmq_util.h"

namespace psrun::psd {

ZmqTransport::ZmqTransport(const ServerOptions& options, ThreadTeam* team)
    : has_keys_(options.keys.has_value()), context_(1) {
    auto ep = bindable_endpoint(options.endpoints.at(options.index));
    if (!ep) throw UsageError(ep.error().message);
    socket_ = zmq::socket_t(context_, zmq::socket_type::router);
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::router_mandatory, false);
    const bool curve = options.keys && uses_curve(*ep) && options.auth == AuthMode::kCurve;
    if (options.keys && uses_curve(*ep) && options.auth == AuthMode::kMac)
        verifier_ = std::make_unique<MessageVerifier>(*options.keys, static_cast<std::uint16_t>(options.index),
                                                      options.auth_window, team);
    if (curve) {
        zap_ = std::make_unique<ZapHandler>(context_, options.keys->client_public);
        make_curve_server(socket_, *options.keys);
        zap_->watch_handshakes(context_, socket_, options.index);
    }
    const mode_t old_mask = ::umask(077);  // the ipc socket file is created owner-only
    try {
        socket_.bind(*ep);
    } catch (const zmq::error_t& e) {
        ::umask(old_mask);
        // Name the endpoint and where it came from: psrun derives --ps from the step's ports.
        throw std::runtime_error("cannot listen on " + *ep + " (entry " + std::to_string(options.index) + " of --ps, " +
                                 options.endpoints[options.index] + "): " + e.what() +
                                 (e.num() == EADDRINUSE ? "; another process holds that port: stop it, or give psd "
                                                          "another --ps endpoint (psrun: --port-base)"
                                                        : ""));
    } catch (...) {
        ::umask(old_mask);
        throw;
    }
    ::umask(old_mask);
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    if (ep->starts_with("ipc://") && ::chmod(ep->c_str() + 6, 0600) != 0)
        throw std::runtime_error("cannot make " + ep->substr(6) + " private (chmod 0600): " + std::strerror(errno));
}

ZmqTransport::~ZmqTransport() {
    socket_.close();
    zap_.reset();
    context_.close();
}

std::string ZmqTransport::security() const {
    return zap_ ? "CURVE" : verifier_ ? "MAC" : has_keys_ ? "owner-only ipc socket + job token" : "no auth";
}

std::optional<AuthRefusal> ZmqTransport::authenticate(const std::string& routing, const wire::Header& h, Parts& parts) {
    if (!verifier_) {
        if (!(h.flags & wire::kFlagMac)) return std::nullopt;
        return AuthRefusal{"a message with a MAC trailer", std::string("this psd does not use --auth mac (") +
                                                               (has_keys_ ? "CURVE or owner-only ipc" : "--no-auth") +
                                                               "): give every task the same --auth"};
    }
    if (!(h.flags & wire::kFlagMac) || parts.size() < 3) {
        verifier_->forget(routing);
        return AuthRefusal{"a message without a MAC (--auth mac)",
                           "this psd runs --auth mac: every message needs the job key's MAC"};
    }
    std::vector<ByteRange> frames;
    for (std::size_t i = 1; i + 1 < parts.size(); ++i) frames.push_back(ByteRange{parts[i].data(), parts[i].size()});
    auto ok = verifier_->verify(routing, frames, view(parts.back()));
    if (!ok) return AuthRefusal{ok.error().message, "message refused: " + ok.error().message};
    parts.pop_back();
    return std::nullopt;
}

void ZmqTransport::send(const std::string& routing, wire::Header& h, std::vector<zmq::message_t>& payloads) {
    const bool sealed = verifier_ && verifier_->can_seal(routing);
    if (sealed) h.flags |= wire::kFlagMac;
    const std::string bytes = wire::encode_header(h);
    std::optional<std::string> trailer;
    if (sealed) {
        std::vector<ByteRange> frames{ByteRange{bytes.data(), bytes.size()}};
        for (const auto& p : payloads) frames.push_back(ByteRange{p.data(), p.size()});
        trailer = verifier_->seal_reply(routing, frames);
    }
    const auto more = [](bool m) { return m ? zmq::send_flags::sndmore : zmq::send_flags::none; };
    socket_.send(zmq::buffer(routing), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(bytes), more(!payloads.empty() || trailer));
    for (std::size_t k = 0; k < payloads.size(); ++k)
        socket_.send(payloads[k], more(k + 1 < payloads.size() || trailer));
    if (trailer) socket_.send(zmq::buffer(*trailer), zmq::send_flags::none);
}

std::vector<zmq::pollitem_t> ZmqTransport::poll_items() {
    std::vector<zmq::pollitem_t> items = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
    if (zap_) {
        items.push_back({zap_->socket().handle(), 0, ZMQ_POLLIN, 0});
        items.push_back({zap_->handshake_events()->handle(), 0, ZMQ_POLLIN, 0});
    }
    return items;
}

void ZmqTransport::serve_events(std::span<const zmq::pollitem_t> items) {
    if (!zap_) return;
    if (items[1].revents & ZMQ_POLLIN) zap_->handle();
    if (items[2].revents & ZMQ_POLLIN) zap_->handle_handshake_event();
}

bool ZmqTransport::receive(Parts& parts) {
    return zmq::recv_multipart(socket_, std::back_inserter(parts), zmq::recv_flags::dontwait).has_value();
}

void ZmqTransport::prune() {
    if (verifier_) verifier_->prune();
}

std::uint64_t ZmqTransport::denied() const { return zap_ ? zap_->denied() : 0; }

void ZmqTransport::linger() {
    // The last replies (the ACK of the last worker's DONE) may still be queued: with linger 0 the
    // context would drop them, and that worker would see its psd vanish and exit 1 (seen in 3 of
    // 118 sync runs of bench/scale.py). Give them a bounded time to leave.
    socket_.set(zmq::sockopt::linger, 2000);
}

}  // namespace psrun::psd
