// Elastic data and membership of ParameterServer (issue 38, docs/reliability.md "Elastic
// membership"): CHUNK requests served from psd/data_chunks.h (psd 0 only), the chunks of a worker
// declared dead or done re-queued, and --min-workers: dead workers dropped instead of failing
// the run.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/zmq_util.h"
#include "psd/data_chunks_file.h"
#include "psd/parameter_server.h"

namespace psrun::psd {

using wire::Header;
using wire::MessageType;

namespace {

// What a restored dispenser came from, for the log: a checkpoint dir, or the standby shard file.
std::string source_name(const std::string& where) {
    return (where.ends_with(".shard") ? "shard file " : "checkpoint ") + where;
}

}  // namespace

void ParameterServer::on_chunk(const std::string& routing, const Header& h, Parts& parts) {
    if (options_.index != 0)
        return reply_error(routing, ErrorCode::kInvalidArgument,
                           "CHUNK goes to psd 0, which hands out the data chunks");
    if (h.frames.size() != 1 || h.frames[0].id != wire::kBodyFrame)
        return reply_error(routing, ErrorCode::kProtocol, "CHUNK carries exactly one body frame");
    auto request = wire::decode_chunk_request(view(parts[2]));
    if (!request) return reply_error(routing, ErrorCode::kProtocol, request.error().message);
    const ChunkPlan plan{request->examples, request->chunks, request->seed};
    if (chunks_ && !chunks_restored_from_.empty() && !(chunks_->plan() == plan)) {  // resumed with other data
        const auto& p = chunks_->plan();
        spdlog::warn(
            "data chunks: {} holds the data position of {} examples in {} chunks (seed {}), this "
            "run reads {} in {} (seed {}): the data starts again at epoch 0",
            source_name(chunks_restored_from_), p.examples, p.chunks, p.seed, plan.examples, plan.chunks, plan.seed);
        chunks_.reset();
    }
    if (!chunks_) {
        if (auto ok = DataChunks::check(plan); !ok)
            return reply_error(routing, ErrorCode::kInvalidArgument, ok.error().message);
        chunks_ = std::make_unique<DataChunks>(plan);
        spdlog::info("data chunks: {} examples in {} chunks per epoch (seed {}), handed out by this psd", plan.examples,
                     plan.chunks, plan.seed);
        if (!chunks_missing_in_.empty())
            spdlog::warn(
                "data chunks: {} holds no data position (written without --data-chunks, or by a "
                "psrun from before it was kept): the data starts at epoch 0",
                source_name(chunks_missing_in_));
    } else if (!(chunks_->plan() == plan)) {
        const auto& p = chunks_->plan();
        return reply_error(routing, ErrorCode::kInvalidArgument,
                           fmt::format("worker {} reads {} examples in {} chunks (seed {}), the run's other workers {} "
                                       "in {} (seed {}): start every worker with the same data, --data-chunks and "
                                       "--seed",
                                       h.index, plan.examples, plan.chunks, plan.seed, p.examples, p.chunks, p.seed));
    }
    chunks_restored_from_.clear();
    chunks_missing_in_.clear();
    for (const wire::ChunkRef& r : request->done) {
        const std::uint64_t complete_before = chunks_->epochs_complete();
        if (!chunks_->complete(h.index, ChunkId{r.epoch, r.chunk}))
            spdlog::debug("worker {}: chunk {} of epoch {} reported done, but it does not hold it (ignored)", h.index,
                          r.chunk, r.epoch);
        else if (chunks_->epochs_complete() > complete_before)
            spdlog::info("data chunks: epoch {} complete ({} epochs so far)", r.epoch, chunks_->epochs_complete());
    }
    wire::ChunkGrant grant;
    if (request->want) {
        const ChunkLease lease = chunks_->lease(h.index);
        grant = wire::ChunkGrant{true, wire::ChunkRef{lease.id.epoch, lease.id.chunk}, lease.first, lease.count};
    }
    const std::string body = wire::encode_chunk_grant(grant);
    reply(routing, MessageType::kChunk, 0, &body);
}

Result<void> ParameterServer::save_chunks(const std::string& dir) const {
    if (!chunks_) return {};
    return save_data_chunks(*chunks_, dir);
}

Result<std::optional<DataChunks>> ParameterServer::read_chunks(const std::string& dir) const {
    if (options_.index != 0) return std::optional<DataChunks>();
    return load_data_chunks(dir);
}

void ParameterServer::commit_chunk_restore(std::optional<DataChunks> restored, const std::string& dir) {
    if (options_.index != 0) return;
    chunks_restored_from_.clear();
    chunks_missing_in_.clear();
    if (!restored) {
        if (chunks_)
            spdlog::warn(
                "data chunks: {} holds no data position: the chunks leased so far are forgotten "
                "and the data starts again at epoch 0",
                source_name(dir));
        chunks_.reset();
        chunks_missing_in_ = dir;
        return;
    }
    // Leases are not in a checkpoint: every chunk not done then, leased or not, is queued again.
    const auto epochs = restored->epochs();
    const auto open = std::find_if(epochs.begin(), epochs.end(), [](const EpochCount& e) { return !e.complete; });
    chunks_ = std::make_unique<DataChunks>(std::move(*restored));
    chunks_restored_from_ = dir;
    if (open == epochs.end())
        spdlog::info("data chunks: restored from {}: {} complete epochs, the next lease opens epoch {}", dir,
                     chunks_->epochs_complete(), chunks_->epochs_complete());
    else
        spdlog::info(
            "data chunks: restored from {}: {} complete epochs, epoch {} goes on with {} of {} chunks done "
            "({} examples); the chunks not done are leased again",
            dir, chunks_->epochs_complete(), open->epoch, open->chunks_done, chunks_->plan().chunks, open->examples);
}

void ParameterServer::on_workers_dead(const std::vector<std::uint32_t>& dead) {
    for (auto i : dead) {
        if (chunks_)
            if (const auto n = chunks_->release(i))
                spdlog::warn("worker {}: its {} data chunk{} went back to the queue", i, n, n == 1 ? "" : "s");
        if (options_.min_workers == 0) continue;
        const double after = std::chrono::duration<double>(Clock::now() - started_).count();
        dropped_.push_back(Dropped{i, after, shard_ ? shard_->step() : 0});
        spdlog::warn(
            "elastic: worker {} dropped at global step {}, {:.1f} s into the run (--min-workers {}: the others "
            "go on)",
            i, dropped_.back().step, after, options_.min_workers);
    }
    if (options_.min_workers == 0 || faults_.aborted()) return;
    const bool chief_lost = chief_ && workers_.is_dead(*chief_);
    const std::uint32_t left = workers_.count_live() + workers_.count_done();
    if (!chief_lost && left >= options_.min_workers) return;
    const std::string reason =
        chief_lost ? fmt::format(
                         "the chief (worker {}) was lost: an elastic run needs it (it checkpoints); resume from "
                         "the last checkpoint",
                         *chief_)
                   : fmt::format(
                         "{} worker{} left, fewer than --min-workers {} (dropped: {}): resume from the last "
                         "checkpoint with more workers",
                         left, left == 1 ? "" : "s", options_.min_workers, WorkerTable::list(workers_.dead()));
    spdlog::error("elastic: run stopped: {}", reason);
    faults_.abort("run stopped: " + reason, kExitFailure);
}

bool ParameterServer::finish_elastic(const std::vector<std::uint32_t>& dead) {
    if (options_.min_workers == 0) return false;
    const std::uint32_t done = workers_.count_done();
    if (done < options_.min_workers || (chief_ && workers_.is_dead(*chief_))) return false;
    spdlog::info("elastic: the run is over with {} worker{} (--min-workers {}); dropped: worker {}", done,
                 done == 1 ? "" : "s", options_.min_workers, WorkerTable::list(dead));
    finish(kExitOk);
    return true;
}

void ParameterServer::on_worker_back(std::uint32_t index) {
    std::erase_if(dropped_, [index](const Dropped& d) { return d.worker == index; });
}

nlohmann::json ParameterServer::elastic_json() const {
    nlohmann::json j = nlohmann::json::object();
    if (options_.min_workers > 0) {
        j["min_workers"] = options_.min_workers;
        nlohmann::json dropped = nlohmann::json::array();
        for (const Dropped& d : dropped_)
            dropped.push_back({{"worker", d.worker}, {"after_s", d.after_s}, {"global_step", d.step}});
        j["workers_dropped"] = dropped;
    }
    if (options_.max_workers > options_.num_workers) {  // psrun join: room for workers that join
        j["max_workers"] = options_.max_workers;
        nlohmann::json joined = nlohmann::json::array();
        for (const Dropped& d : joined_)
            joined.push_back({{"worker", d.worker}, {"after_s", d.after_s}, {"global_step", d.step}});
        j["workers_joined"] = joined;
    }
    if (chunks_) {
        nlohmann::json c;
        c["examples"] = chunks_->plan().examples;
        c["chunks"] = chunks_->plan().chunks;
        c["epochs_complete"] = chunks_->epochs_complete();
        c["epochs_inexact"] = chunks_->epochs_inexact();
        c["stale_reports"] = chunks_->stale_reports();
        c["leased"] = chunks_->leased_total();
        nlohmann::json epochs = nlohmann::json::array();
        for (const EpochCount& e : chunks_->epochs())
            epochs.push_back({{"epoch", e.epoch},
                              {"examples", e.examples},
                              {"chunks_done", e.chunks_done},
                              {"complete", e.complete}});
        c["epochs"] = epochs;
        j["data_chunks"] = c;
    }
    return j;
}

}  // namespace psrun::psd
