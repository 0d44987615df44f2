#include "common/thread_team.h"

#include <algorithm>
#include <atomic>

#include "common/finite.h"

namespace psrun {

namespace {
// Below this many floats a pass is cheaper than waking the helpers (a wake-up costs ~10-50 us).
constexpr std::size_t kParallelMinFloats = 1 << 16;
}  // namespace

ThreadTeam::ThreadTeam(int threads) {
    for (int part = 1; part < std::max(1, threads); ++part) helpers_.emplace_back([this, part] { helper_loop(part); });
}

ThreadTeam::~ThreadTeam() {
    {
        std::lock_guard lock(mutex_);
        quit_ = true;
    }
    start_.notify_all();
    for (auto& t : helpers_) t.join();
}

void ThreadTeam::run(const std::function<void(int)>& fn) {
    if (helpers_.empty()) return fn(0);
    {
        std::lock_guard lock(mutex_);
        job_ = &fn;
        running_ = static_cast<int>(helpers_.size());
        ++generation_;
    }
    start_.notify_all();
    fn(0);
    std::unique_lock lock(mutex_);
    finished_.wait(lock, [this] { return running_ == 0; });
    job_ = nullptr;
}

void ThreadTeam::helper_loop(int part) {
    std::uint64_t seen = 0;
    for (;;) {
        const std::function<void(int)>* job;
        {
            std::unique_lock lock(mutex_);
            start_.wait(lock, [&] { return quit_ || generation_ != seen; });
            if (quit_) return;
            seen = generation_;
            job = job_;
        }
        (*job)(part);
        std::lock_guard lock(mutex_);
        if (--running_ == 0) finished_.notify_one();
    }
}

std::pair<std::size_t, std::size_t> part_range(std::size_t n, int part, int parts) {
    auto edge = [&](int p) {
        if (p >= parts) return n;
        return std::min(n, (n * static_cast<std::size_t>(p) / static_cast<std::size_t>(parts)) / 16 * 16);
    };
    return {edge(part), edge(part + 1)};
}

bool all_finite(const std::vector<std::span<const float>>& spans, ThreadTeam* team) {
    std::size_t total = 0;
    for (const auto& s : spans) total += s.size();
    const int parts = (team && total >= kParallelMinFloats) ? team->size() : 1;
    auto scan = [&](int part) {
        for (const auto& s : spans) {
            const auto [begin, end] = part_range(s.size(), part, parts);
            if (!all_finite(s.data() + begin, end - begin)) return false;
        }
        return true;
    };
    if (parts == 1) return scan(0);
    std::atomic<bool> ok{true};
    team->run([&](int part) {
        if (!scan(part)) ok.store(false, std::memory_order_relaxed);
    });
    return ok.load();
}

}  // namespace psrun
