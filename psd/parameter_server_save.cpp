// SAVE: the shard's part of a coordinated checkpoint (common/checkpointer.h), written by a forked
// child from a copy-on-write snapshot so that the poll loop keeps applying the other workers'
// gradients meanwhile (psd/forked_task.h, docs/protocol.md "Checkpoints").
#include <spdlog/spdlog.h>

#include <filesystem>

#include "common/row_delta.h"
#include "common/zmq_util.h"
#include "psd/data_chunks_file.h"
#include "psd/parameter_server.h"
#include "psd/shard_checkpoint.h"
#include "psd/thread_task.h"

namespace psrun::psd {

using wire::Header;
using wire::MessageType;

void ParameterServer::on_save(const std::string& routing, const Header& h, Parts& parts) {
    if (h.role != wire::Role::kChief)
        return reply_error(routing, ErrorCode::kUnauthorized, "only the chief sends SAVE");
    if (h.frames.size() != 1 || h.frames[0].id != wire::kBodyFrame)
        return reply_error(routing, ErrorCode::kProtocol, "SAVE carries exactly one body frame");
    auto dir = wire::decode_save(view(parts[2]));
    if (!dir) return reply_error(routing, ErrorCode::kProtocol, dir.error().message);
    if (!shard_->initialized())
        return reply_error(routing, ErrorCode::kProtocol, "SAVE before INIT: this psd holds no parameters");
    const bool background = (h.flags & wire::kFlagBackground) != 0;
    if (saving_) {
        if (saving_->dir == *dir) {  // the chief asks again (it polls, or it reconnected)
            if (background) return reply(routing, MessageType::kAck, wire::kFlagBackground);  // still writing
            saving_->waiter.routing = routing;  // it waits now: the one answer goes to it
            saving_->background = false;
            return;
        }
        if (!saving_->background)  // its waiter is still owed the answer
            return reply_error(routing, ErrorCode::kUnsupported,
                               fmt::format("the checkpoint at step {} is still being written to {} by {}: save "
                                           "again once it is done",
                                           saving_->chief_step, saving_->dir, saving_->writer->describe()));
        // Nobody waits for that one: the chief moved on (its final or preemption checkpoint).
        spdlog::warn("the checkpoint at step {} being written to {} is abandoned: the chief saves step {} instead",
                     saving_->chief_step, saving_->dir, h.step);
        settle_dirty(*saving_, false);
        saving_.reset();  // kills the writer
    }
    if (saved_ && saved_->dir == *dir) {  // a background save's outcome, asked for
        const Result<void> written = std::move(saved_->written);
        saved_.reset();
        if (!written) return reply_error(routing, written.error().code, written.error().message);
        return reply(routing, MessageType::kAck, shard_->finished() ? wire::kFlagFinished : 0);
    }
    saved_.reset();  // an outcome the chief never asked for: it moved on
    SaveJob job{Pending{routing, MessageType::kSave, h.index},
                *dir,
                h.step,
                shard_->step(),
                Clock::now(),
                {},
                nullptr,
                background,
                false,
                {},
                shard_->rows().dirty_epoch()};
    // A differential write, or a whole one: then the next differential ones' base. Either lists
    // the blocks of rows it holds (common/row_delta.h): those changed since the base, or those
    // holding a created row.
    std::optional<RowBlocks> delta = plan_differential(*dir, h.step);
    job.differential = delta.has_value();
    if (!delta) {
        job.taken = shard_->rows().take_dirty();
        delta = plan_whole();
    }
    const RowBlocks* rows_delta = delta ? &*delta : nullptr;
    using Writer = ServerOptions::CheckpointWriter;
    const Writer writer = options_.checkpoint_writer;
    const bool has_rows = shard_->rows().size() > 0;
    if (writer == Writer::kThread || (writer == Writer::kAuto && has_rows)) {
        const ThreadedSave started = start_threaded_save(job, rows_delta);
        if (started == ThreadedSave::kAnswered) return;
        if (started == ThreadedSave::kStarted) {
            saving_ = std::move(job);
            if (background) reply(routing, MessageType::kAck, wire::kFlagBackground);
            return;
        }
    }
    if (writer != Writer::kLoop) {  // a forked writer (also where a thread could not be)
        // The child sees the shard as it is now; it has no thread team (only this thread is forked).
        collapser_.stop();  // the child shares the pages as they are; no lock is held at the fork
        auto forked =
            ForkedTask::start([this, d = *dir, delta] { return write_checkpoint(d, delta ? &*delta : nullptr); });
        if (forked) {
            job.writer = std::move(*forked);
            saving_ = std::move(job);
            if (background) reply(routing, MessageType::kAck, wire::kFlagBackground);
            return;
        }
        spdlog::warn("checkpoint at step {}: {}; writing it here, the workers wait meanwhile", h.step,
                     forked.error().message);
    }
    job.background = false;  // written now: the reply below is the outcome
    complete_save(job, write_checkpoint(*dir, rows_delta));
}

std::optional<RowBlocks> ParameterServer::plan_differential(const std::string& dir, std::uint64_t step) const {
    const RowStore& rows = shard_->rows();
    if (options_.checkpoint_full_every <= 1 || !last_full_ || rows.averaging() ||
        rows.dirty_epoch() != last_full_->epoch || step <= last_full_->step ||
        differential_since_full_ + 1 >= options_.checkpoint_full_every)
        return std::nullopt;
    bool vocabulary = false;  // a table it would write less of
    for (std::size_t t = 0; t < rows.size(); ++t)
        vocabulary = vocabulary || (!rows.table(t).keyed && rows.local_rows(t) > 0);
    if (!vocabulary) return std::nullopt;
    // Its base must be committed (the chief renamed it: every shard wrote it) and still there.
    std::error_code ec;
    if (!std::filesystem::exists(row_delta_base_dir(dir, last_full_->step) + "/manifest.json", ec)) return std::nullopt;
    RowBlocks delta{last_full_->step, {}};
    for (std::size_t t = 0; t < rows.size(); ++t) delta.blocks.push_back(rows.dirty(t));
    return delta;
}

std::optional<RowBlocks> ParameterServer::plan_whole() const {
    const RowStore& rows = shard_->rows();
    if (rows.averaging()) return std::nullopt;  // every row's average moves: written plainly
    RowBlocks plan;
    for (std::size_t t = 0; t < rows.size(); ++t)
        plan.blocks.push_back(rows.table(t).keyed ? RowStore::BlockSet{} : rows.created_blocks(t));
    return plan;
}

void ParameterServer::settle_dirty(const SaveJob& job, bool ok) {
    if (job.differential) {
        if (ok) ++differential_since_full_;
        return;
    }
    if (!ok) return shard_->rows().merge_dirty(job.taken);         // changed since the base that still is
    last_full_ = FullCheckpoint{job.chief_step, job.dirty_epoch};  // a base only for the rows it was taken of
    differential_since_full_ = 0;
}

ParameterServer::ThreadedSave ParameterServer::start_threaded_save(SaveJob& job, const RowBlocks* delta) {
    RowStore& rows = shard_->rows();
    // Taken now, in this loop: the dense slices copied, psd 0's data position encoded; the rows
    // from here on through the snapshot.
    auto image = ShardCheckpointImage::take(*shard_, tensors_, options_.index, job.dir, delta);
    if (!image) {  // refused (NaN or Inf): answered as a write would be
        complete_save(job, tl::unexpected(image.error()));
        return ThreadedSave::kAnswered;
    }
    std::optional<std::string> chunks;
    if (chunks_) chunks = encode_data_chunks(chunks_->state());
    rows.begin_snapshot(delta ? &delta->blocks : nullptr);
    job.snapshot = SaveJob::SnapshotEnd(&rows);
    auto task = ThreadTask::start([image = std::shared_ptr<ShardCheckpointImage>(std::move(*image)),
                                   chunks = std::move(chunks), dir = job.dir](std::stop_token stop) -> Result<void> {
        PSRUN_TRY(image->write(stop));
        if (chunks) return write_file_atomically(dir + "/" + kDataChunksFile, *chunks);
        return {};
    });
    if (!task) {
        spdlog::warn("checkpoint at step {}: {}; a forked writer writes it", job.chief_step, task.error().message);
        job.snapshot.reset();
        return ThreadedSave::kNotStarted;
    }
    job.writer = std::move(*task);
    return ThreadedSave::kStarted;
}

void ParameterServer::settle_threaded_save() {
    if (saving_ && saving_->snapshot.rows) finish_save();  // waits for the thread
}

Result<void> ParameterServer::write_checkpoint(const std::string& dir, const RowBlocks* blocks) {
    // Rows are read, never created (RowStore::read()), so that a forked writer copies no page of
    // the tables.
    shard_->rows().catch_up_keyed();
    if (auto saved = save_shard_checkpoint(*shard_, tensors_, options_.index, dir, blocks); !saved) return saved;
    return save_chunks(dir);
}

void ParameterServer::finish_save() {
    SaveJob job = std::move(*saving_);
    saving_.reset();
    const auto written = job.writer->finish();
    if (job.snapshot.rows) {
        spdlog::debug("checkpoint at step {}: the rows' snapshot kept {} MB of copies", job.chief_step,
                      job.snapshot.rows->snapshot_bytes() >> 20);
        job.snapshot.reset();
    } else {
        collapser_.start();  // the tables' pages this loop wrote meanwhile were split: huge again
    }
    complete_save(job, written);
}

void ParameterServer::complete_save(const SaveJob& job, const Result<void>& written) {
    settle_dirty(job, written.has_value());
    if (!written) {
        spdlog::error("checkpoint at step {} failed: {}", job.chief_step, written.error().message);
    } else {
        ++counters_.checkpoints;
        drain_.saved(job.shard_step);
        spdlog::info(
            "checkpoint: shard at step {} (chief's step {}) written to {} in {} ms{}{}", job.shard_step, job.chief_step,
            job.dir, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - job.started).count(),
            job.writer ? fmt::format(" by {} while serving", job.writer->describe()) : "",
            job.differential
                ? fmt::format(" (the sparse tables' rows changed since step {})", last_full_ ? last_full_->step : 0)
                : "");
    }
    if (job.background) {  // the chief learns it from its next SAVE of this dir
        saved_ = SaveOutcome{job.dir, written};
        return;
    }
    if (!written) return reply_error(job.waiter.routing, written.error().code, written.error().message);
    reply(job.waiter.routing, MessageType::kAck, shard_->finished() ? wire::kFlagFinished : 0);
}

}  // namespace psrun::psd
