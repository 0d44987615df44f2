// Cluster maps from TensorFlow-style sources: the TF_CONFIG JSON and the TF 1.x flags
// --ps_hosts/--worker_hosts/--job_name/--task_index.
//
// Mapping to psrun's roles: a TF "chief" is a worker that is also the chief; when TF_CONFIG
// names one it becomes worker 0 and TF worker i becomes worker i+1. Without a named chief,
// worker 0 is the chief. Ranks (table order) are: ps..., workers..., evaluators....
#pragma once

#include <optional>
#include <string>

#include "common/cluster_map.h"
#include "common/result.h"

namespace psrun::launcher {

struct TfFlags {
    std::string ps_hosts;      // "a:p,b:p" (may be empty: no ps)
    std::string worker_hosts;  // "a:p,b:p"
    std::string job_name;      // "ps" or "worker"
    std::optional<int> task_index;

    // True when any of the four flags was given.
    bool any() const { return !ps_hosts.empty() || !worker_hosts.empty() || !job_name.empty() || task_index; }
};

// Errors (kInvalidArgument) name the flag.
[[nodiscard]] Result<ClusterMap> map_from_tf_flags(const TfFlags& flags);

// Parses TF_CONFIG: {"cluster": {"chief": [..], "ps": [..], "worker": [..], "evaluator": [..]},
// "task": {"type": "ps"|"worker"|"chief"|"evaluator", "index": N}}. Every field is checked;
// errors (kInvalidArgument) start with "TF_CONFIG" and name the field.
[[nodiscard]] Result<ClusterMap> map_from_tf_config(const std::string& text);

// Checks "host:port" (non-empty host without ':' or '/', port 1..65535). `what` names the source.
[[nodiscard]] Result<void> check_host_port(const std::string& address, const std::string& what);

}  // namespace psrun::launcher
