// SAVE: the shard's part of a coordinated checkpoint (common/checkpointer.h), written by a forked
// child from a copy-on-write snapshot so that the poll loop keeps applying the other workers'
// gradients meanwhile (psd/forked_task.h, docs/protocol.md "Checkpoints").
#include <spdlog/spdlog.h>

#include "common/zmq_util.h"
#include "psd/parameter_server.h"
#include "psd/shard_checkpoint.h"

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
                               fmt::format("the checkpoint at step {} is still being written to {} (pid {}): save "
                                           "again once it is done",
                                           saving_->chief_step, saving_->dir, saving_->writer->pid()));
        // Nobody waits for that one: the chief moved on (its final or preemption checkpoint).
        spdlog::warn("the checkpoint at step {} being written to {} is abandoned: the chief saves step {} instead",
                     saving_->chief_step, saving_->dir, h.step);
        saving_.reset();  // kills the writer
    }
    if (saved_ && saved_->dir == *dir) {  // a background save's outcome, asked for
        const Result<void> written = std::move(saved_->written);
        saved_.reset();
        if (!written) return reply_error(routing, written.error().code, written.error().message);
        return reply(routing, MessageType::kAck, shard_->finished() ? wire::kFlagFinished : 0);
    }
    saved_.reset();  // an outcome the chief never asked for: it moved on
    SaveJob job{
        Pending{routing, MessageType::kSave, h.index}, *dir, h.step, shard_->step(), Clock::now(), nullptr, background};
    if (options_.fork_checkpoints) {
        // The child sees the shard as it is now; it has no thread team (only this thread is forked).
        collapser_.stop();  // the child shares the pages as they are; no lock is held at the fork
        auto writer = ForkedTask::start([this, d = *dir] { return write_checkpoint(d); });
        if (writer) {
            job.writer = std::move(*writer);
            saving_ = std::move(job);
            if (background) reply(routing, MessageType::kAck, wire::kFlagBackground);
            return;
        }
        spdlog::warn("checkpoint at step {}: {}; writing it here, the workers wait meanwhile", h.step,
                     writer.error().message);
    }
    job.background = false;  // written now: the reply below is the outcome
    complete_save(job, write_checkpoint(*dir));
}

Result<void> ParameterServer::write_checkpoint(const std::string& dir) {
    // A checkpoint holds every row, untouched ones too: written as their initial values, not
    // created (RowStore::read()), so that a forked writer copies no page of the tables.
    shard_->rows().catch_up_keyed();
    if (auto saved = save_shard_checkpoint(*shard_, tensors_, options_.index, dir); !saved) return saved;
    return save_chunks(dir);
}

void ParameterServer::finish_save() {
    SaveJob job = std::move(*saving_);
    saving_.reset();
    const auto written = job.writer->finish();
    collapser_.start();  // the tables' pages this loop wrote meanwhile were split: huge again
    complete_save(job, written);
}

void ParameterServer::complete_save(const SaveJob& job, const Result<void>& written) {
    if (!written) {
        spdlog::error("checkpoint at step {} failed: {}", job.chief_step, written.error().message);
    } else {
        ++counters_.checkpoints;
        drain_.saved(job.shard_step);
        spdlog::info("checkpoint: shard at step {} (chief's step {}) written to {} in {} ms{}", job.shard_step,
                     job.chief_step, job.dir,
                     std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - job.started).count(),
                     job.writer ? fmt::format(" by a forked writer (pid {}) while serving", job.writer->pid()) : "");
    }
    if (job.background) {  // the chief learns it from its next SAVE of this dir
        saved_ = SaveOutcome{job.dir, written};
        return;
    }
    if (!written) return reply_error(job.waiter.routing, written.error().code, written.error().message);
    reply(job.waiter.routing, MessageType::kAck, shard_->finished() ? wire::kFlagFinished : 0);
}

}  // namespace psrun::psd
