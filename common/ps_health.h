// Liveness of the connections from one PsClient to its psd shards, from ZeroMQ socket monitors.
//
// A shard is "up" once a ZMTP handshake with its psd succeeded, and "lost" when a connection to
// it then drops: the psd process died (the kernel closes its socket: seen at once on ipc and tcp,
// on the data socket), or it stopped answering ZMTP heartbeats for the heartbeat timeout (hung or
// stopped process, dead host). Heartbeats run on a separate idle "probe" DEALER per shard: on the
// data socket a PING would queue behind a 13 MB gradient that a hung psd never reads, and the
// heartbeat timer only starts once the PING is written. The probe never sends a message, so psd's
// application never sees it.
// A request in flight to a lost shard is gone for good (the psd that held it is gone), so the
// client fails it at once instead of waiting for the reply timeout. A shard that comes back on
// the same endpoint is "up" again, but the requests lost with the old connection stay lost.
//
// A probe that loses its psd's heartbeats right after this process was itself stopped
// (common/pause_detector.h: SIGSTOP, Slurm suspend) is not lost yet: our own stop made the
// heartbeats late, so the psd gets a fresh heartbeat timeout, counted from the moment the loss is
// seen, to answer a new handshake of the probe (which ZeroMQ reconnects by itself); only then
// is the shard lost. A psd that stopped answering while this process ran is lost as before.
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

#include "common/job_keys.h"

namespace psrun {

// How long a peer that went silent may take to come back before the job gives up on it, by
// default (`--reconnect-wait`): a worker waits this long for a lost psd to answer again, psd
// this long for a worker it declared dead. 180 s outlasts a switch port flap, a spanning-tree
// reconvergence (30-50 s) and the reboot of a typical top-of-rack switch (1-3 min), and stays
// below Slurm's default SlurmdTimeout (300 s), after which Slurm itself takes a silent node down
// and ends the job (docs/reliability.md "A network that blinks").
inline constexpr std::chrono::seconds kDefaultReconnectWait{180};

class LinkMonitor {
  public:
    using Clock = std::chrono::steady_clock;

    // Starts monitoring `sockets` (one per shard, not yet connected; names[i] names shard i in
    // messages) and connects a probe to endpoints[i] (normalised) when heartbeat > 0, with CURVE
    // when `keys` are given and the endpoint is tcp.
    LinkMonitor(zmq::context_t& context, std::vector<zmq::socket_t>& sockets, const std::vector<std::string>& names,
                const std::vector<std::string>& endpoints, const std::optional<JobKeys>& keys,
                std::chrono::milliseconds heartbeat);
    ~LinkMonitor();
    LinkMonitor(const LinkMonitor&) = delete;
    LinkMonitor& operator=(const LinkMonitor&) = delete;

    // Reconnecting a shard (common/ps_client_reconnect.cpp): unwatch() stops monitoring its
    // socket and closes its probe, before the caller closes that socket; watch() monitors the
    // new socket in sockets[shard] (not yet connected) and connects a new probe: the shard is
    // then neither up nor lost.
    void unwatch(std::uint32_t shard);
    void watch(std::uint32_t shard);

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
    // Since when the shard was silent (valid when lost()): lost_at, less the heartbeat timeout
    // when the loss was missed heartbeats rather than a closed connection.
    Clock::time_point silent_since(std::uint32_t shard) const;
    bool lost_heartbeats(std::uint32_t shard) const { return links_[shard].by_heartbeat; }
    // A psd that died closes its data socket and its probe at once, but the two monitors report
    // it in either order: a probe's loss read first looks like missed heartbeats. settle() waits
    // up to kCloseSkew after such a loss for the data connection's own DISCONNECTED, which
    // makes it a closed connection; a real heartbeat loss leaves the data connection up.
    void settle(std::uint32_t shard);
    static constexpr std::chrono::milliseconds kCloseSkew{250};
    std::chrono::milliseconds heartbeat() const { return heartbeat_; }
    // "ps 1 (ipc:///tmp/x/ps-1) closed the connection: ..." for error messages.
    std::string describe_loss(std::uint32_t shard) const;

  private:
    struct Link {
        zmq::socket_t monitor;        // PAIR connected to the data socket's monitor endpoint
        zmq::socket_t probe_monitor;  // same for the probe (unused without heartbeats)
        bool up = false;              // data connection handshaken
        bool probe_up = false;
        bool lost = false;
        bool by_heartbeat = false;  // the probe missed heartbeats (the data connection may still be up)
        Clock::time_point lost_at{};
        std::optional<Clock::time_point> excused_until;  // probe down after our stop: answer by then
    };
    void drain(std::uint32_t shard, zmq::socket_t& monitor, bool& up, bool probe);
    void stop_monitors(std::uint32_t shard);
    // The probe's loss right after our own stop: give the psd a fresh heartbeat timeout.
    bool excuse(std::uint32_t shard);

    zmq::context_t& context_;
    std::vector<zmq::socket_t>& sockets_;
    std::vector<std::string> names_;
    std::vector<std::string> endpoints_;
    std::optional<JobKeys> keys_;
    std::vector<zmq::socket_t> probes_;  // one per shard (closed when heartbeat is 0)
    std::vector<Link> links_;
    std::chrono::milliseconds heartbeat_;
    Clock::time_point last_update_ = Clock::now();
};

}  // namespace psrun
