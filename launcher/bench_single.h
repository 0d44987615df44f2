// The single-process run that `psrun bench cluster` compares a local cluster against.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace psrun::launcher {

struct SingleRunOptions {
    std::string data_dir;  // empty: psrun data fetch's default
    std::string dataset = "mnist";
    std::string precision = "f32";
    int batch_size = 100;
    int steps = 300;        // warm-up included
    int warmup_steps = 60;  // not timed
    int threads = 2;        // compute threads
};

// Trains `steps` steps of the Trainer (update included) in a forked child and returns
// {"images_per_sec", "measured_steps", "measured_seconds"} of the steps after the warm-up. The
// child's OpenMP threads die with it, so the calling process stays single-threaded, as a later
// Supervisor::run requires (a thread started here would not have SIGCHLD blocked and would swallow
// it). Throws std::runtime_error if the run fails or the child dies.
nlohmann::json run_single_in_child(const SingleRunOptions& o);

}  // namespace psrun::launcher
