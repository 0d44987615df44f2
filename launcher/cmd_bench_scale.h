// `psrun bench scale [OPTIONS]`: the scaling sweep on an emulated multi-node cluster
// (bench/scale.py; docs/scaling.md): W workers x K psd shards over shaped links, JSON lines
// against the analytic model, curves with --plot. psrun execs `python3 scale.py --psrun <this
// psrun> OPTIONS`, so every option, --help included, is the script's. Needs root (namespaces, tc).
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// The script: $PSRUN_BENCH_DIR/scale.py when that variable is set, else bench/scale.py of the
// source tree this psrun was built from; nullopt when the file is not there.
std::optional<std::string> find_scale_script();

// Registers `bench scale` under the `bench` subcommand. Its callback execs the script and
// returns only when it cannot (exit_code 2, the reason on stderr).
void add_bench_scale_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
