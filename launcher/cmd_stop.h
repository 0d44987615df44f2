// `psrun stop --model-dir D`: asks every standby psd of D (ps-<i>.endpoint files) to save its
// shard and exit, and waits until each one has.
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `stop`; its callback sets exit_code: 0 all stopped, 1 a psd did not stop,
// 2 nothing to stop / bad key file.
void add_stop_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
