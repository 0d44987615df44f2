// Liveness and completion of the workers of one training run, as seen by one psd.
// A worker is "attached" after HELLO, "done" after DONE, "dead" when silent longer than the
// worker timeout. Loop-thread only.
// Slots: indices below `num_workers` are the map's workers, expected from the start; slots from
// num_workers to `max_workers` are joinable (psrun join): nobody waits for them and they are never
// missed until a worker joins there. A joined worker (join()) is "joining" until activate() (its
// first gradient): sync steps count it from then (quorum_running(), quorum_joined()).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace psrun::psd {

using Clock = std::chrono::steady_clock;

class WorkerTable {
  public:
    // REQUIRES: max_workers == 0 (as many as num_workers) or max_workers >= num_workers.
    explicit WorkerTable(std::uint32_t num_workers, std::uint32_t max_workers = 0);

    std::uint32_t size() const { return static_cast<std::uint32_t>(workers_.size()); }  // max_workers
    std::uint32_t expected() const { return expected_; }                                // num_workers
    // A slot of the run: one of the map's, or a joinable one a worker attached to.
    bool in_run(std::uint32_t index) const { return index < expected_ || workers_[index].attached; }
    void hello(std::uint32_t index, Clock::time_point now);
    // A worker that joined the running job says HELLO with JOIN: it takes the slot afresh (a slot
    // dropped for good is reused) and is joining until activate(). A worker already joined there
    // and live that says HELLO again (it reconnected) is only seen.
    void join(std::uint32_t index, Clock::time_point now);
    void activate(std::uint32_t index) { workers_[index].joining = false; }
    bool is_joining(std::uint32_t index) const { return workers_[index].joining; }
    bool is_joined(std::uint32_t index) const { return workers_[index].joined; }
    // Sync quorum: workers of the run not joining, neither dead nor done; and of those counted
    // ever, the joined ones at slots beyond the map (each raises --replicas-to-aggregate by one).
    std::uint32_t quorum_running() const;
    std::uint32_t quorum_joined() const;
    void seen(std::uint32_t index, Clock::time_point now);
    void done(std::uint32_t index);
    bool is_done(std::uint32_t index) const { return workers_[index].done; }
    bool is_dead(std::uint32_t index) const { return workers_[index].dead; }
    bool is_attached(std::uint32_t index) const { return workers_[index].attached; }

    // Attached, unfinished workers silent for longer than `timeout` become dead; so do workers
    // that never attached when `start` is more than `attach_timeout` ago (a worker that crashed
    // before HELLO must not keep psd alive). No silence counts from before `resumed` (the end of
    // this psd's own last stop, common/pause_detector.h): every worker gets a fresh timeout then.
    // Returns the newly dead.
    std::vector<std::uint32_t> expire(Clock::time_point now, Clock::duration timeout, Clock::time_point start,
                                      Clock::duration attach_timeout, Clock::time_point resumed = {});
    // The worker spoke again after it was declared dead: it is live again (returns true), and
    // dead_since() says when it was declared dead.
    bool revive(std::uint32_t index, Clock::time_point now);
    Clock::time_point dead_since(std::uint32_t index) const { return workers_[index].dead_at; }
    // Every worker of the map is done or dead (standby: every attached one, at least one).
    bool run_finished(bool standby) const;
    std::vector<std::uint32_t> dead() const;
    // Dead workers that may still come back: declared dead no more than `grace` ago, not
    // counting the time before `resumed` (this psd's own stop).
    std::vector<std::uint32_t> returnable(Clock::time_point now, Clock::duration grace,
                                          Clock::time_point resumed = {}) const;
    std::vector<std::uint32_t> never_attached() const;  // of the map's slots
    std::vector<std::uint32_t> missing() const;         // dead without ever saying HELLO
    std::uint32_t count_attached() const;
    std::uint32_t count_done() const;
    std::uint32_t count_live() const;  // attached, not done, not dead
    void reset();                      // standby: forget the finished run

    static std::string list(const std::vector<std::uint32_t>& ids);  // "1, 3"

  private:
    struct Worker {
        bool attached = false;
        bool done = false;
        bool dead = false;
        Clock::time_point last_seen{};
        bool joined = false;   // took its slot with JOIN (psrun join)
        bool joining = false;  // joined, no gradient yet: not in the sync quorum
        Clock::time_point dead_at{};
    };
    std::vector<Worker> workers_;
    std::uint32_t expected_ = 0;
};

}  // namespace psrun::psd
