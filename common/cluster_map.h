// The cluster map: which task is a parameter server, a worker or an evaluator, and where each
// one listens. The launcher builds it (from Slurm, TF_CONFIG, TF flags or `psrun local`) and
// derives every daemon flag from it, so psd and workerd never see SLURM_* or TF_CONFIG.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace psrun {

enum class Role { kPs, kWorker, kEvaluator };

// "ps", "worker", "evaluator".
const char* role_name(Role role);

// One task of the map. For a Slurm step, slots are enumerated node by node in nodelist order
// and by local id within a node; `rank` is that enumeration index (equal to SLURM_PROCID under
// block distribution, see docs/architecture.md). For TF sources, node is the endpoint's host and
// local_id is -1.
struct TaskSlot {
    int rank = 0;
    std::string node;
    int local_id = -1;
    Role role = Role::kWorker;
    int role_index = 0;   // index within its role's list
    bool chief = false;   // only for a worker
    std::string address;  // "host:port" or "ipc:///path"
};

// The calling task's place in the map.
struct SelfInfo {
    int rank = 0;
    Role role = Role::kWorker;
    int index = 0;
    std::string node;
    std::optional<int> procid;  // SLURM_PROCID when the map comes from a Slurm step
};

// Invariants (checked by validate()): worker is non-empty, chief_index indexes worker, every
// slot's role_index indexes its role's list and its address equals that entry.
struct ClusterMap {
    std::vector<std::string> ps;         // "host:port" or "ipc:///path", in ps index order
    std::vector<std::string> worker;     // training workers, in worker index order (chief included)
    std::vector<std::string> evaluator;  // may hold "" for an evaluator without an endpoint
    int chief_index = 0;                 // index into worker
    std::vector<TaskSlot> slots;         // every task, in rank order (for the table)
    std::optional<SelfInfo> self;        // absent for `psrun local` (psrun is no task)
    std::string source;                  // "flags", "TF_CONFIG", "slurm", "local"
    std::optional<int> threads;          // oneDNN/OpenMP threads per daemon, when known

    const std::string& chief() const { return worker.at(static_cast<size_t>(chief_index)); }

    // {"ps": [...], "worker": [...], "chief": "...", "self": {"rank", "role", "index", "node",
    // then "chief", "address", "procid"}, then "evaluator", "source", "threads"}. Key order is kept.
    nlohmann::ordered_json to_json() const;

    // Human-readable table: rank, node, local id, role, role index, chief?, address.
    std::string to_table() const;

    // Empty string when consistent, else what is wrong.
    std::string validate() const;
};

// A ZeroMQ endpoint for an address of the map: "host:port" -> "tcp://host:port"; an address that
// already has a scheme is returned unchanged.
std::string to_endpoint(const std::string& address);

}  // namespace psrun
