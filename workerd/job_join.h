// `workerd --join` (issue 38, psrun join; docs/reliability.md "Workers that join"): a worker that
// joins a running job takes its index from psd 0 (JOIN, docs/protocol.md "Joining") instead of
// --index, then says HELLO there with the JOIN flag like any worker. Training-thread only.
#pragma once

#include "common/ps_client.h"
#include "common/result.h"
#include "workerd/distributed.h"

namespace psrun::worker {

// A joiner's options that cannot work: a chief, no --data-chunks. Throws UsageError naming them.
void check_join_options(const ClusterOptions& cluster);

// Asks psd 0 for a worker slot with the model and data plan of `worker`'s client options, on a
// tool's short-lived client (no slot yet: role tool, index 0).
[[nodiscard]] Result<wire::JoinGrant> join_running_job(const PsClientOptions& worker, std::uint32_t data_chunks);

// JOIN, then the grant's slot becomes this worker's: cluster.index/num_workers, the client's index
// and its JOIN flag, the log prefix. Errors as join_running_job's (kInvalidArgument: psd refused:
// no room, another model, no --max-workers).
[[nodiscard]] Result<void> take_join_slot(ClusterOptions& cluster, PsClientOptions& client);

}  // namespace psrun::worker
