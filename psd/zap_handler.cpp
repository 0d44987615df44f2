#include "psd/zap_handler.h"

#include <spdlog/spdlog.h>
#include <zmq_addon.hpp>

#include <cstring>
#include <iterator>
#include <vector>

#include "common/zmq_util.h"

namespace psrun::psd {

ZapHandler::ZapHandler(zmq::context_t& context, const std::string& client_public)
    : socket_(context, zmq::socket_type::rep) {
    socket_.set(zmq::sockopt::linger, 0);
    zmq_z85_decode(client_key_.data(), client_public.c_str());
    socket_.bind("inproc://zeromq.zap.01");
}

void ZapHandler::handle() {
    std::vector<zmq::message_t> req;
    if (!zmq::recv_multipart(socket_, std::back_inserter(req), zmq::recv_flags::dontwait)) return;
    // version, request id, domain, address, identity, mechanism, credentials...
    const bool well_formed = req.size() >= 6 && view(req[0]) == "1.0";
    bool ok = well_formed && view(req[2]) == kZapDomain && view(req[5]) == "CURVE" && req.size() == 7 &&
              req[6].size() == 32 && std::memcmp(req[6].data(), client_key_.data(), 32) == 0;
    if (!ok) {
        ++denied_;
        spdlog::warn("refused a connection from {}: it does not hold this job's key",
                     req.size() > 3 ? std::string(view(req[3])) : std::string("?"));
    }
    const std::string parts[] = {"1.0",
                                 req.size() > 1 ? std::string(view(req[1])) : std::string(),
                                 ok ? "200" : "400",
                                 ok ? "OK" : "unknown client key",
                                 ok ? "worker" : "",
                                 ""};
    for (std::size_t k = 0; k < 6; ++k)
        socket_.send(zmq::buffer(parts[k]), k + 1 < 6 ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

void ZapHandler::watch_handshakes(zmq::context_t& context, zmq::socket_t& server, std::uint32_t index) {
    const std::string endpoint = "inproc://psd-" + std::to_string(index) + "-handshakes";
    if (zmq_socket_monitor(server.handle(), endpoint.c_str(),
                           ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) != 0)
        throw zmq::error_t();
    monitor_ = zmq::socket_t(context, zmq::socket_type::pair);
    monitor_.set(zmq::sockopt::linger, 0);
    monitor_.connect(endpoint);
}

void ZapHandler::handle_handshake_event() {
    zmq::message_t event, address;  // event: u16 id + u32 value; then the endpoint it happened on
    if (!monitor_.recv(event, zmq::recv_flags::dontwait)) return;
    if (event.more()) (void)monitor_.recv(address, zmq::recv_flags::dontwait);
    ++failed_handshakes_;
    ++denied_;
    if (failed_handshakes_ <= 5 || failed_handshakes_ % 100 == 0)
        spdlog::warn(
            "refused a connection on {}: its handshake failed (a client without CURVE or without this "
            "job's key, or not a psrun client); {} so far",
            std::string(static_cast<const char*>(address.data()), address.size()), failed_handshakes_);
}

}  // namespace psrun::psd
