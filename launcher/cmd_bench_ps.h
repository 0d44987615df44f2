// `psrun bench ps`: round-trip benchmark of real psd processes with the model's real tensors.
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `bench ps` under the `bench` subcommand (created if missing, shared with `bench
// train`). Its callback prints one JSON line and sets exit_code (0 ok, 1 failure).
void add_bench_ps_command(CLI::App& app, int& exit_code);

// The `bench` subcommand of `app`, created on first use.
CLI::App* bench_subcommand(CLI::App& app);

}  // namespace psrun::launcher
