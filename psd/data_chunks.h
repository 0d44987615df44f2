// Elastic data (issue 38, docs/reliability.md "Elastic membership"): the training set handed out
// in chunks, so that each epoch visits every example once whatever the membership does. An epoch
// is C chunks over N examples (chunk c holds examples [c*N/C, (c+1)*N/C)); its chunks are leased
// in an order shuffled from (seed, epoch). A worker leases one chunk at a time and reports it done
// once it has trained on all its examples; a chunk whose worker is declared dead (or that is
// restored from a checkpoint while leased) goes back to the front of the queue. When the queue
// is empty the next epoch opens, so a worker never waits (the last chunks of epoch e may still be
// in flight while epoch e+1 starts). An epoch's count is the examples of its chunks reported
// done by the worker holding them: a report for a chunk not leased to the reporter is ignored,
// so no chunk counts twice. (A worker that dies half-way through a chunk trained on part of it:
// those examples are seen again by the chunk's next holder; the count stays exact.)
// Pure bookkeeping, no I/O: owned by psd shard 0's loop thread (not thread-safe).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "common/result.h"

namespace psrun::psd {

struct ChunkPlan {
    std::uint64_t examples = 0;  // N: 1..kMaxExamples
    std::uint32_t chunks = 0;    // C: 1..min(N, kMaxChunks)
    std::uint64_t seed = 0;      // the run's --seed: the order chunks are leased in
    bool operator==(const ChunkPlan&) const = default;
};

struct ChunkId {
    std::uint64_t epoch = 0;
    std::uint32_t chunk = 0;
    bool operator==(const ChunkId&) const = default;
    auto operator<=>(const ChunkId&) const = default;
};

struct ChunkLease {
    ChunkId id;
    std::uint64_t first = 0;  // index of the chunk's first example
    std::uint32_t count = 0;  // examples in the chunk (>= 1)
};

struct EpochCount {
    std::uint64_t epoch = 0;
    std::uint64_t examples = 0;  // examples of the chunks reported done
    std::uint32_t chunks_done = 0;
    bool complete = false;  // every chunk done: examples == N
    bool operator==(const EpochCount&) const = default;
};

class DataChunks {
  public:
    static constexpr std::uint64_t kMaxExamples = 1ull << 40;
    static constexpr std::uint32_t kMaxChunks = 1u << 20;
    static constexpr std::size_t kKeptEpochs = 64;  // complete epochs whose counts epochs() still lists

    // kInvalidArgument naming the bad field.
    [[nodiscard]] static Result<void> check(const ChunkPlan& plan);
    // REQUIRES: check(plan) passed.
    explicit DataChunks(ChunkPlan plan);

    const ChunkPlan& plan() const { return plan_; }
    ChunkLease lease(std::uint32_t worker);
    // `worker` trained on every example of `id`: true when it held that lease (counted once).
    bool complete(std::uint32_t worker, ChunkId id);
    // `worker` is gone: the chunks it holds go back to the front of the queue (returns how many).
    std::size_t release(std::uint32_t worker);
    std::vector<ChunkId> held_by(std::uint32_t worker) const;

    // Epochs opened so far, oldest first (the complete ones beyond kKeptEpochs dropped).
    std::vector<EpochCount> epochs() const;
    std::uint64_t epochs_complete() const { return epochs_complete_; }
    // Complete epochs whose count was not exactly N (0 unless something was lost or doubled).
    std::uint64_t epochs_inexact() const { return epochs_inexact_; }
    std::uint64_t stale_reports() const { return stale_reports_; }  // complete() calls that returned false
    std::uint64_t leased_total() const { return leased_total_; }

    // The state a checkpoint keeps (psd/data_chunks_file.h stores it with psd 0's shard): the plan,
    // the counters, the kept complete epochs and the done chunks of each open epoch. Leases are not
    // kept: their holders belong to the run that wrote it. restore() checks every field against
    // the others (kInvalidArgument naming the field) and queues every chunk not done again, oldest
    // epoch first, each epoch in its own order: a leased chunk not reported done is leased again.
    struct OpenState {
        std::uint64_t epoch = 0;
        std::vector<std::uint32_t> done;  // chunks done, ascending, fewer than the plan's chunks
        bool operator==(const OpenState&) const = default;
    };
    struct State {
        ChunkPlan plan;
        std::uint64_t next_epoch = 0, epochs_complete = 0, epochs_inexact = 0, stale_reports = 0, leased_total = 0;
        std::vector<EpochCount> closed;  // complete epochs in the order they completed, at most kKeptEpochs
        std::vector<OpenState> open;     // ascending epochs
        bool operator==(const State&) const = default;
    };
    State state() const;
    [[nodiscard]] static Result<DataChunks> restore(const State& state);

  private:
    struct OpenEpoch {
        std::vector<bool> done;
        std::uint64_t examples = 0;
        std::uint32_t chunks_done = 0;
    };
    ChunkLease describe(ChunkId id) const;
    void open_next_epoch();
    std::vector<std::uint32_t> order(std::uint64_t epoch) const;  // the epoch's lease order
    void close_epoch(std::uint64_t epoch);

    ChunkPlan plan_;
    std::uint64_t next_epoch_ = 0;             // epochs opened so far
    std::deque<ChunkId> queue_;                // not leased, not done
    std::map<ChunkId, std::uint32_t> leased_;  // chunk -> holder
    std::map<std::uint64_t, OpenEpoch> open_;  // epochs with chunks not done
    std::deque<EpochCount> closed_;            // the last kKeptEpochs complete epochs
    std::uint64_t epochs_complete_ = 0, epochs_inexact_ = 0, stale_reports_ = 0, leased_total_ = 0;
};

}  // namespace psrun::psd
