// Liveness of the connections from one PsClient to its psd shards, from ZeroMQ socket monitors.
//
// A shard is "up" once a ZMTP handshake with its psd succeeded, and "lost" when that connection
// then drops: the psd process died (the kernel closes its socket: seen at once on ipc and tcp),
// or it stopped answering ZMTP heartbeats for the heartbeat timeout (hung process, dead host).
// A request in flight to a lost shard is gone for good (the psd that held it is gone), so the
// client fails it at once instead of waiting for the reply timeout. A shard that comes back on
// the same endpoint is "up" again, but the requests lost with the old connection stay lost.
//
// Not thread-safe: the PsClient's thread drives it. Owns one inproc PAIR socket per shard,
// which must be destroyed before the context (PsClient declares it after its sockets).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

namespace psrun {

class LinkMonitor {
public:
    using Clock = std::chrono::steady_clock;

    // Starts monitoring `sockets` (one per shard; endpoints[i] names shard i in messages).
    LinkMonitor(zmq::context_t& context, std::vector<zmq::socket_t>& sockets,
                const std::vector<std::string>& endpoints);
    ~LinkMonitor();
    LinkMonitor(const LinkMonitor&) = delete;
    LinkMonitor& operator=(const LinkMonitor&) = delete;

    // Reads every pending monitor event without blocking.
    void update();
    // One POLLIN item per monitor socket, for callers that must wake up on a connection change.
    void append_poll_items(std::vector<zmq::pollitem_t>& items);

    bool up(std::uint32_t shard) const { return links_[shard].up; }
    // True once the shard's connection was up and then dropped (stays true: see above).
    bool lost(std::uint32_t shard) const { return links_[shard].lost; }
    // The first lost shard among `shards`, if any.
    std::optional<std::uint32_t> first_lost(const std::vector<std::uint32_t>& shards) const;
    // When the shard's connection dropped (valid when lost()).
    Clock::time_point lost_at(std::uint32_t shard) const { return links_[shard].lost_at; }
    // "ps 1 (ipc:///tmp/x/ps-1) closed the connection: ..." for error messages.
    std::string describe_loss(std::uint32_t shard) const;

private:
    struct Link {
        zmq::socket_t monitor;  // PAIR connected to the socket's monitor endpoint
        bool up = false;
        bool lost = false;
        Clock::time_point lost_at{};
    };
    void handle_event(std::uint32_t shard, std::uint16_t event);

    std::vector<zmq::socket_t>& sockets_;
    std::vector<std::string> endpoints_;
    std::vector<Link> links_;
};

}  // namespace psrun
