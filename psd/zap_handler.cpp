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
    const std::string parts[] = {"1.0", req.size() > 1 ? std::string(view(req[1])) : std::string(),
                                 ok ? "200" : "400", ok ? "OK" : "unknown client key", ok ? "worker" : "", ""};
    for (std::size_t k = 0; k < 6; ++k)
        socket_.send(zmq::buffer(parts[k]), k + 1 < 6 ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

}  // namespace psrun::psd
