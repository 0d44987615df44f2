// `psrun bench data [--shape 3x64x64] [--images 512] [--seconds 2] [--formats ...] [--image F]`:
// decoded images per second per core for each data format, one JSON line each
// (workerd/data/data_bench.h, docs/benchmarks.md).
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `bench data` on `app` (reusing the `bench` subcommand); sets exit_code (0 ok, 1
// failure, 2 bad option).
void add_bench_data_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
