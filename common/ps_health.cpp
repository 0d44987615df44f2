#include "common/ps_health.h"

#include <zmq_addon.hpp>

#include <atomic>
#include <cstring>
#include <iterator>

namespace psrun {

namespace {

constexpr int kEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED;

std::string monitor_address() {
    static std::atomic<unsigned> counter{0};
    return "inproc://psrun-link-monitor-" + std::to_string(counter.fetch_add(1));
}

}  // namespace

LinkMonitor::LinkMonitor(zmq::context_t& context, std::vector<zmq::socket_t>& sockets,
                         const std::vector<std::string>& endpoints)
    : sockets_(sockets), endpoints_(endpoints), links_(sockets.size()) {
    for (std::size_t i = 0; i < sockets_.size(); ++i) {
        const std::string address = monitor_address();
        if (zmq_socket_monitor(sockets_[i].handle(), address.c_str(), kEvents) != 0) throw zmq::error_t();
        links_[i].monitor = zmq::socket_t(context, zmq::socket_type::pair);
        links_[i].monitor.set(zmq::sockopt::linger, 0);
        links_[i].monitor.connect(address);
    }
}

LinkMonitor::~LinkMonitor() {
    for (std::size_t i = 0; i < sockets_.size() && i < links_.size(); ++i)
        if (sockets_[i].handle() != nullptr) zmq_socket_monitor(sockets_[i].handle(), nullptr, 0);
}

void LinkMonitor::update() {
    for (std::uint32_t i = 0; i < links_.size(); ++i) {
        while (true) {
            std::vector<zmq::message_t> parts;
            if (!zmq::recv_multipart(links_[i].monitor, std::back_inserter(parts), zmq::recv_flags::dontwait)) break;
            if (parts.empty() || parts[0].size() < 6) continue;
            std::uint16_t event = 0;
            std::memcpy(&event, parts[0].data(), sizeof event);  // libzmq writes host order
            handle_event(i, event);
        }
    }
}

void LinkMonitor::handle_event(std::uint32_t shard, std::uint16_t event) {
    auto& link = links_[shard];
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        link.up = true;
    } else if (event == ZMQ_EVENT_DISCONNECTED && link.up) {
        link.up = false;
        if (!link.lost) link.lost_at = Clock::now();
        link.lost = true;
    }
}

void LinkMonitor::append_poll_items(std::vector<zmq::pollitem_t>& items) {
    for (auto& link : links_) items.push_back({link.monitor.handle(), 0, ZMQ_POLLIN, 0});
}

std::optional<std::uint32_t> LinkMonitor::first_lost(const std::vector<std::uint32_t>& shards) const {
    for (auto i : shards)
        if (links_[i].lost) return i;
    return std::nullopt;
}

std::string LinkMonitor::describe_loss(std::uint32_t shard) const {
    return "lost the connection to ps " + std::to_string(shard) + " (" + endpoints_[shard] +
           "): that psd died or stopped answering heartbeats; the request in flight is lost";
}

}  // namespace psrun
