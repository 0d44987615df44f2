#include "common/ps_health.h"

#include <zmq_addon.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>

#include "common/pause_detector.h"
#include "common/zmq_util.h"

#include <spdlog/spdlog.h>

namespace psrun {

namespace {

constexpr int kEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED;

std::string monitor_address() {
    static std::atomic<unsigned> counter{0};
    return "inproc://psrun-link-monitor-" + std::to_string(counter.fetch_add(1));
}

zmq::socket_t monitor_socket(zmq::context_t& context, zmq::socket_t& socket) {
    const std::string address = monitor_address();
    if (zmq_socket_monitor(socket.handle(), address.c_str(), kEvents) != 0) throw zmq::error_t();
    zmq::socket_t monitor(context, zmq::socket_type::pair);
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect(address);
    return monitor;
}

}  // namespace

LinkMonitor::LinkMonitor(zmq::context_t& context, std::vector<zmq::socket_t>& sockets,
                         const std::vector<std::string>& names, const std::vector<std::string>& endpoints,
                         const std::optional<JobKeys>& keys, std::chrono::milliseconds heartbeat)
    : context_(context),
      sockets_(sockets),
      names_(names),
      endpoints_(endpoints),
      keys_(keys),
      probes_(sockets.size()),
      links_(sockets.size()),
      heartbeat_(heartbeat) {
    for (std::uint32_t i = 0; i < sockets_.size(); ++i) watch(i);
}

LinkMonitor::~LinkMonitor() {
    for (std::uint32_t i = 0; i < sockets_.size() && i < links_.size(); ++i) stop_monitors(i);
    probes_.clear();
}

// Stops the monitors of the shard's data socket and probe and closes the probe. A monitor must
// be stopped before its reading PAIR is closed: libzmq sends each event with a blocking send,
// so an event with no reader left (the DISCONNECTED of a probe being closed, say) would block
// the context's I/O thread for good, and with it every later connection of this client
// (libzmq issue 3575).
void LinkMonitor::stop_monitors(std::uint32_t shard) {
    if (sockets_[shard].handle() != nullptr) zmq_socket_monitor(sockets_[shard].handle(), nullptr, 0);
    if (probes_[shard].handle() != nullptr) {
        zmq_socket_monitor(probes_[shard].handle(), nullptr, 0);
        probes_[shard].close();
    }
}

void LinkMonitor::watch(std::uint32_t shard) {
    links_[shard] = Link{};
    links_[shard].monitor = monitor_socket(context_, sockets_[shard]);
    const int hb = static_cast<int>(heartbeat_.count());
    if (hb <= 0) return;
    zmq::socket_t probe(context_, zmq::socket_type::dealer);
    probe.set(zmq::sockopt::linger, 0);
    if (keys_ && uses_curve(endpoints_[shard])) make_curve_client(probe, *keys_);
    probe.set(zmq::sockopt::heartbeat_ivl, std::max(100, hb / 4));
    probe.set(zmq::sockopt::heartbeat_timeout, hb);
    probe.set(zmq::sockopt::heartbeat_ttl, std::max(hb, 1000));
    // A connect attempt to a host that does not answer (its link is down) is abandoned after 1 s and
    // retried, instead of waiting out the kernel's SYN back-off: the probe sees a returning psd at once.
    probe.set(zmq::sockopt::connect_timeout, 1000);
    links_[shard].probe_monitor = monitor_socket(context_, probe);
    probe.connect(endpoints_[shard]);
    probes_[shard] = std::move(probe);
}

void LinkMonitor::unwatch(std::uint32_t shard) {
    stop_monitors(shard);
    links_[shard] = Link{};
}

LinkMonitor::Clock::time_point LinkMonitor::silent_since(std::uint32_t shard) const {
    const auto& link = links_[shard];
    return link.by_heartbeat ? link.lost_at - heartbeat_ : link.lost_at;
}

void LinkMonitor::update() {
    for (std::uint32_t i = 0; i < links_.size(); ++i) {
        auto& link = links_[i];
        drain(i, link.monitor, link.up, false);
        if (link.probe_monitor.handle() != nullptr) drain(i, link.probe_monitor, link.probe_up, true);
        if (link.excused_until && !link.lost && Clock::now() > *link.excused_until) {
            spdlog::error(
                "ps {} ({}) did not answer a heartbeat within --heartbeat-timeout {:.1f} s after this process "
                "resumed from its own stop",
                i, names_[i], heartbeat_.count() / 1000.0);
            link.excused_until.reset();
            link.lost = true;
            link.by_heartbeat = true;
            link.lost_at = Clock::now();
        }
    }
    last_update_ = Clock::now();
}

void LinkMonitor::settle(std::uint32_t shard) {
    auto& link = links_[shard];
    while (link.lost && link.by_heartbeat && link.up) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(link.lost_at + kCloseSkew - Clock::now());
        if (left.count() <= 0) return;
        std::vector<zmq::pollitem_t> items{{link.monitor.handle(), 0, ZMQ_POLLIN, 0}};
        zmq::poll(items, left);
        drain(shard, link.monitor, link.up, false);
    }
}

bool LinkMonitor::excuse(std::uint32_t shard) {
    // A loss seen now happened after the previous update(); one caused by our own stop happens
    // within a heartbeat timeout of the stop's end (ZeroMQ's overdue timers fire at once on resume).
    const auto stop = PauseDetector::process().last_stop();
    if (!stop || stop->ended + heartbeat_ < last_update_) return false;
    const auto now = Clock::now();
    links_[shard].excused_until = now + heartbeat_;
    spdlog::warn(
        "ps {} ({}) missed heartbeats while this process was itself stopped for {:.1f} s (resumed {:.1f} s "
        "ago): not counted as its silence; it has a fresh --heartbeat-timeout of {:.1f} s to answer",
        shard, names_[shard], stop->seconds(), std::chrono::duration<double>(now - stop->ended).count(),
        heartbeat_.count() / 1000.0);
    return true;
}

void LinkMonitor::drain(std::uint32_t shard, zmq::socket_t& monitor, bool& up, bool probe) {
    auto& link = links_[shard];
    while (true) {
        std::vector<zmq::message_t> parts;
        if (!zmq::recv_multipart(monitor, std::back_inserter(parts), zmq::recv_flags::dontwait)) return;
        if (parts.empty() || parts[0].size() < 6) continue;
        std::uint16_t event = 0;
        std::memcpy(&event, parts[0].data(), sizeof event);  // libzmq writes host order
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            up = true;
            if (probe && link.excused_until && !link.lost) {
                spdlog::info("ps {} ({}) answers heartbeats again", shard, names_[shard]);
                link.excused_until.reset();
            }
        } else if (event == ZMQ_EVENT_DISCONNECTED && up) {
            up = false;
            if (probe && !link.lost && (link.excused_until || excuse(shard))) continue;
            if (!link.lost) {
                link.lost_at = Clock::now();
                link.by_heartbeat = probe && link.up;  // the data connection still stands: heartbeats were missed
            } else if (!probe && link.by_heartbeat && Clock::now() - link.lost_at <= kCloseSkew) {
                link.by_heartbeat = false;  // both dropped together: the psd closed them (settle())
            }
            link.lost = true;
        }
    }
}

void LinkMonitor::append_poll_items(std::vector<zmq::pollitem_t>& items) {
    for (auto& link : links_) {
        items.push_back({link.monitor.handle(), 0, ZMQ_POLLIN, 0});
        if (link.probe_monitor.handle() != nullptr) items.push_back({link.probe_monitor.handle(), 0, ZMQ_POLLIN, 0});
    }
}

std::optional<std::uint32_t> LinkMonitor::first_lost(const std::vector<std::uint32_t>& shards) const {
    for (auto i : shards)
        if (links_[i].lost) return i;
    return std::nullopt;
}

std::string LinkMonitor::describe_loss(std::uint32_t shard) const {
    return "lost the connection to ps " + std::to_string(shard) + " (" + names_[shard] +
           "): that psd died or stopped answering heartbeats; the request in flight is lost";
}

}  // namespace psrun
