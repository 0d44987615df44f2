#include "psd/worker_table.h"

#include <algorithm>

namespace psrun::psd {

WorkerTable::WorkerTable(std::uint32_t num_workers, std::uint32_t max_workers)
    : workers_(std::max(num_workers, max_workers)), expected_(num_workers) {}

void WorkerTable::hello(std::uint32_t index, Clock::time_point now) {
    workers_[index] = Worker{true, false, false, now};
}

void WorkerTable::join(std::uint32_t index, Clock::time_point now) {
    auto& w = workers_[index];
    if (w.attached && w.joined && !w.dead && !w.done) {
        w.last_seen = now;
        return;
    }
    w = Worker{true, false, false, now};
    w.joined = true;
    w.joining = true;
}

std::uint32_t WorkerTable::quorum_running() const {
    std::uint32_t n = 0;
    for (std::uint32_t i = 0; i < workers_.size(); ++i) {
        const auto& w = workers_[i];
        n += in_run(i) && !w.joining && !w.dead && !w.done;
    }
    return n;
}

std::uint32_t WorkerTable::quorum_joined() const {
    std::uint32_t n = 0;
    for (std::uint32_t i = expected_; i < workers_.size(); ++i) n += workers_[i].attached && !workers_[i].joining;
    return n;
}

void WorkerTable::seen(std::uint32_t index, Clock::time_point now) {
    auto& w = workers_[index];
    w.last_seen = now;
    if (!w.attached) w.attached = true;  // e.g. after a standby reset, a worker that kept going
    w.dead = false;
}

bool WorkerTable::revive(std::uint32_t index, Clock::time_point now) {
    const bool was_dead = workers_[index].dead;
    seen(index, now);
    return was_dead;
}

void WorkerTable::done(std::uint32_t index) { workers_[index].done = true; }

std::vector<std::uint32_t> WorkerTable::expire(Clock::time_point now, Clock::duration timeout, Clock::time_point start,
                                               Clock::duration attach_timeout, Clock::time_point resumed) {
    std::vector<std::uint32_t> out;
    const bool attach_expired = now - std::max(start, resumed) > attach_timeout;
    for (std::uint32_t i = 0; i < workers_.size(); ++i) {
        auto& w = workers_[i];
        const bool silent = w.attached && now - std::max(w.last_seen, resumed) > timeout;
        const bool never_came = !w.attached && attach_expired && i < expected_;  // joinable slots are not awaited
        if (!w.done && !w.dead && (silent || never_came)) {
            w.dead = true;
            w.dead_at = now;
            out.push_back(i);
        }
    }
    return out;
}

bool WorkerTable::run_finished(bool standby) const {
    bool any = false;
    for (std::uint32_t i = 0; i < workers_.size(); ++i) {
        const auto& w = workers_[i];
        if ((standby || i >= expected_) && !w.attached) continue;
        if (!(w.done || w.dead)) return false;
        any = true;
    }
    return any;
}

std::vector<std::uint32_t> WorkerTable::dead() const {
    std::vector<std::uint32_t> out;
    for (std::uint32_t i = 0; i < workers_.size(); ++i)
        if (workers_[i].dead) out.push_back(i);
    return out;
}

std::vector<std::uint32_t> WorkerTable::returnable(Clock::time_point now, Clock::duration grace,
                                                   Clock::time_point resumed) const {
    std::vector<std::uint32_t> out;
    for (std::uint32_t i = 0; i < workers_.size(); ++i) {
        const auto& w = workers_[i];
        if (w.dead && w.attached && now - std::max(w.dead_at, resumed) <= grace) out.push_back(i);
    }
    return out;
}

std::vector<std::uint32_t> WorkerTable::missing() const {
    std::vector<std::uint32_t> out;
    for (std::uint32_t i = 0; i < workers_.size(); ++i)
        if (workers_[i].dead && !workers_[i].attached) out.push_back(i);
    return out;
}

std::vector<std::uint32_t> WorkerTable::never_attached() const {
    std::vector<std::uint32_t> out;
    for (std::uint32_t i = 0; i < expected_; ++i)
        if (!workers_[i].attached) out.push_back(i);
    return out;
}

std::uint32_t WorkerTable::count_attached() const {
    std::uint32_t n = 0;
    for (const auto& w : workers_) n += w.attached;
    return n;
}

std::uint32_t WorkerTable::count_done() const {
    std::uint32_t n = 0;
    for (const auto& w : workers_) n += w.done;
    return n;
}

std::uint32_t WorkerTable::count_live() const {
    std::uint32_t n = 0;
    for (const auto& w : workers_) n += w.attached && !w.done && !w.dead;
    return n;
}

void WorkerTable::reset() {
    for (auto& w : workers_) w = Worker{};
}

std::string WorkerTable::list(const std::vector<std::uint32_t>& ids) {
    std::string s;
    for (auto i : ids) s += (s.empty() ? "" : ", ") + std::to_string(i);
    return s.empty() ? "none" : s;
}

}  // namespace psrun::psd
