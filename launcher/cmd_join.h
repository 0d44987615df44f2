// `psrun join [options] -- TRAINING`: one worker joins a running job (issue 38, docs/reliability.md
// "Workers that join"). The job must have been started with room (psrun local/run --max-workers M,
// psd --max-workers). Where psd is, first that applies: --ps EPS (also --ps_hosts, TF's flag), the
// cluster.ps list of TF_CONFIG (both with --key-file F or --no-auth, as the job's daemons got them,
// and --run-id R when the training options hold --model-dir), or the join file of the model dir
// (--model-dir among the training options, written by psrun local/run: launcher/join_file.h). psrun then execs `workerd
// --join` (same PID, exit code the worker's): psd 0 hands out the index, the worker takes the current parameters and
// leases data chunks (--data-chunks C among the training options is required: exit 2 naming it). Never a chief.
#pragma once

#include <CLI/CLI.hpp>

#include "launcher/command_context.h"

namespace psrun::launcher {

void add_join_command(CLI::App& app, CommandContext& ctx);

}  // namespace psrun::launcher
