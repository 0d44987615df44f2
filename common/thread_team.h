// A fixed team of threads that splits memory-bound passes over big buffers across cores: psd's
// finite check and optimizer update, and the MAC tags of big messages (common/message_auth.h) in
// psd and in its clients. With one psd and its workers on a node, the workers wait for the reply
// while psd runs these passes, so the cores are free.
//
// Contract: run() is called by one thread at a time (the server's poll loop); it runs fn(part)
// for every part in [0, size()), part 0 on the calling thread, and returns when all finished.
// Between calls the helper threads sleep on a condition variable (no spinning: the machine's
// cores belong to the workers' compute). fn must not throw.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace psrun {

class ThreadTeam {
  public:
    explicit ThreadTeam(int threads);  // threads >= 1: threads - 1 helper threads are started
    ~ThreadTeam();
    ThreadTeam(const ThreadTeam&) = delete;
    ThreadTeam& operator=(const ThreadTeam&) = delete;

    int size() const { return static_cast<int>(helpers_.size()) + 1; }
    void run(const std::function<void(int part)>& fn);

  private:
    void helper_loop(int part);

    std::vector<std::thread> helpers_;
    std::mutex mutex_;
    std::condition_variable start_;
    std::condition_variable finished_;
    const std::function<void(int)>* job_ = nullptr;
    std::uint64_t generation_ = 0;
    int running_ = 0;
    bool quit_ = false;
};

// [begin, end) of part `part` of `parts` over n elements, boundaries rounded to 16 floats (64 bytes)
// so that no two parts share a cache line.
std::pair<std::size_t, std::size_t> part_range(std::size_t n, int part, int parts);

// True when every float of every span is finite; the scan is split across the team (may be null).
bool all_finite(const std::vector<std::span<const float>>& spans, ThreadTeam* team);

}  // namespace psrun
