// Which job key file psd and workerd get as --key-file, and making sure it exists.
// The file holds the job token and the CURVE key pairs (common/job_keys.h); every task of a job
// must read the same file, so it lives on a filesystem all nodes share (the model dir, or
// $HOME/.psrun/), like TensorFlow's checkpoint dir.
#pragma once

#include <chrono>
#include <string>

#include "common/cluster_map.h"
#include "common/result.h"
#include "launcher/daemon_command.h"
#include "launcher/env_map.h"

namespace psrun::launcher {

// A name for the job that every task of it computes alike: SLURM_JOB_ID inside Slurm, else a
// hash of the map's ps and worker addresses (TF_CONFIG / TF-style flags).
std::string job_name_for(const ClusterMap& map, const EnvMap& env);

// For `psrun run`: returns the key file to pass (options.key_file when given; "" with
// --no-auth). The chief creates the file if missing; every other task waits up to `timeout`
// for it. Errors name the path and what to do (exit 2 upstream).
[[nodiscard]] Result<std::string> prepare_job_key(const DaemonOptions& options, const ClusterMap& map,
                                                  const EnvMap& env, std::chrono::milliseconds timeout);

// For `psrun local`: creates (or reuses) the key file at `path` as its only user.
[[nodiscard]] Result<std::string> prepare_local_job_key(const std::string& path);

}  // namespace psrun::launcher
