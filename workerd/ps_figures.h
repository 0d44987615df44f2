// What summary.json reports from psd (docs/running.md "summary.json"): read by the chief from the
// shards' STATS just before its final evaluation and DONE, while every psd still answers.
//   "elastic"       psd 0's data_chunks, workers_dropped, min_workers, workers_joined and
//                   max_workers (--data-chunks, --min-workers, --max-workers)
//   "staleness"     the gradients' staleness and --max-staleness's held replies (async runs):
//                   each figure the largest over the shards (gradient_mean their mean), and each
//                   shard's own under "shards" (a worker stopped between its pushes to two
//                   shards is held back by one of them only)
//   "keyed_tables"  per table keyed by raw ids (--raw-ids): rows, capacity, admitted, refused,
//                   refused_full, evicted_full, evicted_idle and gradients_dropped summed over the
//                   shards, and the same per shard under "shards" (index = psd index)
// Keys that do not apply are left out. A psd that does not answer STATS is skipped with a warning:
// the figures are reports, never a reason to fail the run.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace psrun {
class PsClient;
}

namespace psrun::worker {

// An object of summary.json keys (possibly empty). `shards` is the number of psd; blocks on
// STATS round trips (the client's own timeouts bound them).
nlohmann::json read_ps_figures(PsClient& client, std::uint32_t shards);

// Sums the per-shard keyed_tables objects of STATS replies (index = shard; null for a shard that
// did not answer) into the "keyed_tables" form above; empty when no shard has a keyed table.
nlohmann::json sum_keyed_tables(const std::vector<nlohmann::json>& per_shard);

// Combines the per-shard staleness objects of STATS replies (index = shard; null for a shard
// that did not answer or reports none) into the "staleness" form above; null when none has one.
nlohmann::json combine_staleness(const std::vector<nlohmann::json>& per_shard);

}  // namespace psrun::worker
