// `psrun bench cluster --ps K --workers W [--steps N] ...`: aggregate training throughput of a
// local cluster (K psd + W workerd as in `psrun local`, real MNIST, async) against a
// single-process run of the same trainer measured in the same call, as one JSON line.
//
// How it is measured (docs/benchmarks.md):
//  - cluster: the chief writes a metrics.jsonl record (global step, wall time) every
//    --log-every global steps. The global step counts every worker's applied gradient, so
//    images trained by all workers = global steps x batch size. images_per_sec is taken between
//    the first record at or after --warmup-steps (start barrier, INIT, oneDNN primitive creation
//    and first-touch faults are before it) and the last record before the last step (the final
//    checkpoint and evaluation are after it).
//  - single process: after the cluster has exited, psrun itself builds the same Trainer on the
//    same data with --threads T (default 2), runs --warmup-steps unmeasured steps, then times
//    N - warmup steps of compute_gradients + apply_gradients (what `workerd --standalone` does).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `bench cluster` (reusing a `bench` subcommand if one exists); prints one JSON line
// on stdout (daemon logs go to a log file named on failure); sets exit_code (0 ok, 1 a daemon
// failed or too little was measured, 2 bad option).
void add_bench_cluster_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
