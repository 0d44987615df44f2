// Helpers of the fault-injection tests (issue 6): daemon command lines with small timeouts,
// elapsed-time measurement, and the JSON lines that report the measured figures.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "test/psd/child_process.h"

namespace psrun::test {

inline std::filesystem::path daemon_exe(const char* rel) { return build_dir() / rel; }

inline std::string ipc_endpoint(const std::filesystem::path& dir, int shard) {
    return "ipc://" + (dir / ("ps-" + std::to_string(shard))).string();
}

inline std::string ipc_list(const std::filesystem::path& dir, int shards) {
    std::string list;
    for (int i = 0; i < shards; ++i) {
        if (i > 0) list += ',';
        list += ipc_endpoint(dir, i);
    }
    return list;
}

inline std::vector<std::string> psd_args(int index, const std::string& ps, int workers,
                                         std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"--index",       std::to_string(index),   "--ps",     ps,
                                  "--num-workers", std::to_string(workers), "--no-auth"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

// A worker training small batches on one thread, logging every 10 global steps.
inline std::vector<std::string> worker_args(int index, const std::string& ps, int workers, int steps,
                                            std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"--index",
                                  std::to_string(index),
                                  "--ps",
                                  ps,
                                  "--num-workers",
                                  std::to_string(workers),
                                  "--no-auth",
                                  "--connect-timeout",
                                  "5",
                                  "--barrier-timeout",
                                  "60",
                                  "--batch-size",
                                  "20",
                                  "--steps",
                                  std::to_string(steps),
                                  "--threads",
                                  "1",
                                  "--log-every",
                                  "10"};
    if (index == 0) a.push_back("--chief");
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

// Waits until the progress lines ("step N/LAST") show a global step >= min_step.
inline bool wait_for_step(const ChildProcess& child, long min_step, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    const std::regex progress(R"(step (\d+)/\d+)");
    while (std::chrono::steady_clock::now() < deadline) {
        const std::string out = child.output();
        for (std::sregex_iterator it(out.begin(), out.end(), progress), end; it != end; ++it)
            if (std::stol((*it)[1]) >= min_step) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

// Waits until `text` occurs at least `count` times in the output.
inline bool wait_for_count(const ChildProcess& child, const std::string& text, int count, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
        const std::string out = child.output();
        int n = 0;
        for (auto pos = out.find(text); pos != std::string::npos; pos = out.find(text, pos + 1)) ++n;
        if (n >= count) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

using FaultClock = std::chrono::steady_clock;

inline double seconds_since(FaultClock::time_point t0) {
    return std::chrono::duration<double>(FaultClock::now() - t0).count();
}

// One JSON line per measured figure, collected by the lead for docs/reliability.md.
inline void report_figure(const std::string& fault, const std::string& name, double value) {
    std::printf("{\"fault\": \"%s\", \"%s\": %.3f}\n", fault.c_str(), name.c_str(), value);
    std::fflush(stdout);
}

}  // namespace psrun::test
