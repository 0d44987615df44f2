// `psrun bench train [--batch-size B] [--threads T] [--precision f32|bf16] [--steps N]`.
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `bench train` on `app` (reusing a `bench` subcommand if one exists, e.g. the one
// `bench ps` adds); prints one JSON line; sets exit_code (0 ok, 1 failure, 2 bad option).
void add_bench_train_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
