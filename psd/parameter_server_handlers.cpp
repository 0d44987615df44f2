// Message handlers of ParameterServer (the loop, lifecycle and replies are in parameter_server.cpp).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/shared_dir_check.h"
#include "common/zmq_util.h"
#include "psd/memory_budget.h"
#include "psd/parameter_server.h"
#include "psd/shard_checkpoint.h"

namespace psrun::psd {

using wire::Header;
using wire::MessageType;

void ParameterServer::on_hello(const std::string& routing, const Header& h, Parts& parts) {
    spdlog::debug("HELLO from {} {}", h.role == wire::Role::kTool ? "tool" : "worker", h.index);
    if (h.frames.size() != 1 || h.frames[0].id != wire::kBodyFrame)
        return reply_error(routing, ErrorCode::kProtocol, "HELLO carries exactly one body frame");
    auto hello = wire::decode_hello(view(parts[2]));
    if (!hello) return reply_error(routing, ErrorCode::kProtocol, hello.error().message);
    const auto* tensors = &hello->tensors;
    const std::string sender = h.role == wire::Role::kTool ? "a tool" : "worker " + std::to_string(h.index);
    if (const std::string reason = model_mismatch(hello->model, sender); !reason.empty()) {
        log_refusal(reason);
        return reply_error(routing, ErrorCode::kInvalidArgument, reason);
    }
    if (!shard_) {
        auto layout = compute_layout(*tensors, static_cast<std::uint32_t>(options_.endpoints.size()));
        if (!layout) return reply_error(routing, ErrorCode::kInvalidArgument, layout.error().message);
        // The list is the sender's word: refuse a shard this host cannot hold before allocating it.
        if (auto fits = check_shard_memory(*layout, options_.index, host_memory_bytes()); !fits) {
            log_refusal("a HELLO whose model does not fit: " + fits.error().message);
            return reply_error(routing, fits.error().code, fits.error().message);
        }
        tensors_ = *tensors;
        model_ = hello->model;
        shard_ = std::make_unique<ShardState>(*layout, options_.index, tensors_);
        if (options_.sync) sync_ = make_sync();
        std::size_t spread = 0, here = 0;  // sparse tables: spread over the shards, placed whole on this one
        for (const auto& t : layout->tables) {
            spread += !t.whole();
            here += t.whole() && t.home == options_.index;
        }
        spdlog::info("model '{}' has {} tensors, {} floats; this shard holds {} floats in {} slices{}", model_.name,
                     tensors_.size(), layout->total, shard_->size(), shard_->slice_ids().size(),
                     layout->tables.empty()
                         ? std::string()
                         : fmt::format(", and rows of {} sparse tables ({} spread, {} placed whole here, {} elsewhere)",
                                       layout->tables.size(), spread, here, layout->tables.size() - spread - here));
        if (options_.standby && std::filesystem::exists(shard_path())) {
            std::optional<DataChunks> chunks;  // psd 0's data dispenser, if the file holds it
            auto loaded = shard_->load(shard_path(), &chunks);
            if (loaded) {
                spdlog::info("restored shard at step {} from {}", shard_->step(), shard_path());
                awaiting_run_init_ = true;
                commit_chunk_restore(std::move(chunks), shard_path());
            } else spdlog::warn("ignoring {}", loaded.error().message);
        }
    } else if (*tensors != tensors_) {
        return reply_error(routing, ErrorCode::kInvalidArgument,
                           "this psd serves a different model (tensor list differs): restart psd for a new model");
    }
    if (model_.hash.empty() && !hello->model.hash.empty()) model_ = hello->model;  // a tool came first
    if (h.role == wire::Role::kWorker || h.role == wire::Role::kChief) {
        // A worker declared dead that says HELLO again reconnected (its network blinked, or it was stopped):
        // it rejoins as if it had sent any other message.
        if (h.flags & wire::kFlagJoin) {
            on_join_hello(h.index);  // a worker that joined the running job (psd/parameter_server_join.cpp)
        } else {
            if (workers_.is_dead(h.index) && workers_.revive(h.index, Clock::now()))
                on_worker_rejoined(routing, h.index);
            workers_.hello(h.index, Clock::now());
        }
        if (h.role == wire::Role::kChief) chief_ = h.index;
    }
    // The chief learns that psd holds parameters (it then sends INIT "restored"); the other workers only once
    // this run's INIT is in (awaiting_run_init_).
    const bool initialized = h.role == wire::Role::kChief ? shard_->initialized() : ready_for_workers();
    std::uint32_t flags = (options_.sync ? wire::kFlagSync : 0) | (initialized ? wire::kFlagInitialized : 0);
    const std::string body = wire::encode_welcome(wire::Welcome{options_.index, shard_->layout(), instance_});
    reply(routing, MessageType::kWelcome, flags, &body);
}

void ParameterServer::on_init(const std::string& routing, const Header& h, Parts& parts) {
    settle_threaded_save();  // INIT replaces what a writer thread reads
    if (h.role != wire::Role::kChief)
        return reply_error(routing, ErrorCode::kUnauthorized, "only the chief sends INIT");
    if (h.frames.empty() || h.frames[0].id != wire::kBodyFrame)
        return reply_error(routing, ErrorCode::kProtocol, "INIT starts with its body frame");
    auto config = wire::decode_init(view(parts[2]));
    if (!config) return reply_error(routing, ErrorCode::kProtocol, config.error().message);
    if (h.flags & wire::kFlagRestored) {
        if (!shard_->initialized())
            return reply_error(routing, ErrorCode::kNotFound, "INIT says restored, but this psd holds no parameters");
        shard_->restore(*config);
        spdlog::info("INIT (restored): keeping parameters at step {}, last step {}, learning rate {} ({})",
                     shard_->step(), config->last_step, config->optimizer.learning_rate,
                     config->optimizer.effective_schedule().to_string());
    } else {
        auto spans = decode_slices(h, parts, 1, PayloadForm::kF32, nullptr);  // INIT sends f32 frames
        if (!spans) return reply_error(routing, spans.error().code, spans.error().message);
        shard_->init(*config, *spans);
        if (sync_) sync_ = make_sync();  // a new run starts: forget any partial step of the previous one
        shard_->set_dry_run(h.flags & wire::kFlagDryRun);
        spdlog::info("INIT: {} from step {}, last step {}, learning rate {} ({}){}", to_string(config->optimizer.kind),
                     config->start_step, config->last_step, config->optimizer.learning_rate,
                     config->optimizer.effective_schedule().to_string(),
                     shard_->dry_run() ? " (dry run: gradients are checked, not applied)" : "");
    }
    awaiting_run_init_ = false;
    reply(routing, MessageType::kAck, 0);
    release_pending(init_waiters_, shard_->finished() ? wire::kFlagFinished : 0);
}

Result<void> ParameterServer::check_finite(const std::vector<std::span<const float>>& spans) {
    if (all_finite(spans, team_.get())) return {};
    ++counters_.nonfinite;
    std::size_t k = 0;
    while (k + 1 < spans.size() && wire::all_finite(spans[k].data(), spans[k].size())) ++k;
    return make_error(ErrorCode::kInvalidArgument, "slice " + std::to_string(shard_->slice_ids()[k]) +
                                                       " contains NaN or Inf: rejected, weights untouched");
}

void ParameterServer::on_push(const std::string& routing, const Header& h, Parts& parts) {
    if (!shard_->initialized())
        return reply_error(routing, ErrorCode::kProtocol, "PUSH before the chief's INIT: PULL first to wait for it");
    const bool want_params = h.type == MessageType::kPushPull;
    const auto rejected_before = counters_.nonfinite;
    const std::size_t dense_end = wire::dense_frame_count(h);
    auto rows = decode_rows(h, parts, dense_end);  // checked before the dense part: a drain reply needs the pulls
    if (!rows && counters_.nonfinite != rejected_before) return reject_bad_gradient(routing, h, rows.error());
    if (!rows) return reply_error(routing, rows.error().code, rows.error().message);
    if (drain_.active() && sync_) {  // preemption, sync: no new step; the flag tells the worker to stop
        if (want_params)
            return reply_params(routing, wire::kFlagDraining | (h.flags & wire::kFlagBf16), false, rows->pulls);
        return reply(routing, MessageType::kAck, wire::kFlagDraining);
    }
    ShmSegment* segment = attachment(routing);
    const bool shm_push = h.flags & wire::kFlagShm;
    if (shm_push && !segment)
        return reply_error(routing, ErrorCode::kProtocol, "shared-memory PUSH without an accepted ATTACH");
    auto grads = decode_slices(h, parts, 0, payload_form(h.flags), segment);
    if (!grads && counters_.nonfinite != rejected_before) return reject_bad_gradient(routing, h, grads.error());
    if (!grads) return reply_error(routing, grads.error().code, grads.error().message);
    // Async while draining: the push is applied like any other (every shard applies the same pushes,
    // whenever its own signal came) and the flag tells the worker to stop (psd/drain.h).
    auto answer = [&](std::uint32_t flags, bool written = false) {
        if (shard_->finished()) flags |= wire::kFlagFinished;
        if (drain_.active()) flags |= wire::kFlagDraining;
        if (want_params) reply_params(routing, flags | (h.flags & wire::kFlagBf16), written, rows->pulls);
        else reply(routing, MessageType::kAck, flags);
    };
    if (shard_->finished()) return answer(0);  // last_step reached: never overshoot
    if (!sync_) {
        if (workers_.is_joining(h.index)) activate_joiner(h.index);
        const bool mirror = want_params && segment;  // write the reply's parameters during the update
        const std::uint64_t staleness = shard_->step() > h.step ? shard_->step() - h.step : 0;
        shard_->apply(*grads, team_.get(), mirror ? segment->params() : std::span<float>{}, rows->grads);
        ++counters_.applied;
        counters_.staleness_sum += staleness;
        counters_.staleness_max = std::max(counters_.staleness_max, staleness);
        for (const auto& g : rows->grads) counters_.rows_pushed += g.size();
        return answer_bounded(routing, h, *rows, [&] { answer(0, mirror); });
    }
    if (workers_.is_joining(h.index)) activate_joiner(h.index);  // sync steps count it from now
    if (h.step > shard_->step())
        return reply_error(routing, ErrorCode::kProtocol,
                           "gradient tagged with future step " + std::to_string(h.step) + " (current " +
                               std::to_string(shard_->step()) + ")");
    const bool stale = h.step < shard_->step();  // computed on parameters older than the current step
    if (options_.async_tables && !(!stale && sync_->contributed(h.index))) {  // not a reconnect's repeat
        shard_->apply_rows(rows->grads);  // --async-tables: a stale push's rows count too
        for (const auto& g : rows->grads) counters_.rows_pushed += g.size();
        rows->grads = {};
    }
    if (stale) {
        ++counters_.stale;
        return answer(wire::kFlagStale);
    }
    if (sync_->contributed(h.index)) {
        // Its gradient for this step came on another connection, which this worker gave up (its network blinked,
        // common/ps_client_reconnect.cpp): that one counts, this one is dropped, and the reply waits for the step.
        const bool reconnected = std::any_of(step_waiters_.begin(), step_waiters_.end(), [&](const Pending& p) {
            return p.worker == h.index && p.routing != routing;
        });
        if (!reconnected)
            return reply_error(
                routing, ErrorCode::kProtocol,
                "worker " + std::to_string(h.index) + " already pushed for step " + std::to_string(h.step));
        step_waiters_.push_back(Pending{routing, h.type, h.index, h.flags & wire::kFlagBf16, copy_pulls(*rows)});
        return;
    }
    step_waiters_.push_back(Pending{routing, h.type, h.index, h.flags & wire::kFlagBf16, copy_pulls(*rows)});
    std::vector<std::size_t> offsets;
    for (std::size_t k = 0; k < grads->size(); ++k) offsets.push_back(shard_->local_offset(k));
    update_sync_replicas();
    for (const auto& g : rows->grads) counters_.rows_pushed += g.size();
    if (sync_->add(h.index, *grads, offsets, rows->grads)) complete_sync_step();
}

void ParameterServer::on_pull(const std::string& routing, const Header& h, Parts& parts) {
    if (wire::dense_frame_count(h) != 0)
        return reply_error(routing, ErrorCode::kProtocol, "PULL carries no slice frames");
    auto rows = decode_rows(h, parts, 0);
    if (!rows) return reply_error(routing, rows.error().code, rows.error().message);
    // Sync: a worker whose gradient for the current step is in (it lost its connection while its PUSH_PULL
    // waited, and PULLs after reconnecting) waits for that step, as the PUSH_PULL would have.
    const bool is_worker = h.role == wire::Role::kWorker || h.role == wire::Role::kChief;
    if (sync_ && is_worker && shard_->initialized() && !shard_->finished() && sync_->contributed(h.index)) {
        step_waiters_.push_back(Pending{routing, h.type, h.index, h.flags & wire::kFlagBf16, copy_pulls(*rows)});
        return;
    }
    // A worker of a new standby run waits for that run's INIT (awaiting_run_init_); others need parameters.
    if (shard_->initialized() && !(awaiting_run_init_ && h.role == wire::Role::kWorker))
        return reply_params(routing,
                            (shard_->finished() ? wire::kFlagFinished : 0) |
                                (drain_.active() ? wire::kFlagDraining : 0) | (h.flags & wire::kFlagBf16),
                            false, rows->pulls);
    if (init_waiters_.empty()) first_init_wait_ = Clock::now();
    init_waiters_.push_back(Pending{routing, h.type, h.index, h.flags & wire::kFlagBf16, copy_pulls(*rows)});
}

std::unique_ptr<SyncAggregator> ParameterServer::make_sync() const {
    std::vector<std::uint32_t> widths;
    std::vector<bool> keyed;
    for (const auto& t : shard_->layout().tables) {
        widths.push_back(t.width);
        keyed.push_back(t.keyed);
    }
    return std::make_unique<SyncAggregator>(shard_->size(), workers_.size(), options_.replicas_to_aggregate,
                                            options_.straggler_every, std::move(widths), keyed);
}

void ParameterServer::on_done(const std::string& routing, const Header& h) {
    if (!workers_.is_done(h.index))
        spdlog::info("worker {} is done ({} of {} workers)", h.index, workers_.count_done() + 1, members());
    workers_.done(h.index);
    if (chunks_) chunks_->release(h.index);  // a chunk it did not finish goes to another worker
    if (h.flags & wire::kFlagDraining) {
        spdlog::info("worker {} stopped early (preempted) at global step {}", h.index, shard_->step());
        drain_.worker_preempted();
    }
    attached_.erase(routing);  // the client unmaps its segment after DONE
    reply(routing, MessageType::kAck, shard_->finished() ? wire::kFlagFinished : 0);
    release_drain_waiters(false);
    check_run_finished();
}

void ParameterServer::on_dircheck(const std::string& routing, const Header& h, Parts& parts) {
    if (h.role != wire::Role::kChief)
        return reply_error(routing, ErrorCode::kUnauthorized, "only the chief sends DIRCHECK");
    if (h.frames.size() != 1 || h.frames[0].id != wire::kBodyFrame)
        return reply_error(routing, ErrorCode::kProtocol, "DIRCHECK carries exactly one body frame");
    auto request = wire::decode_dircheck(view(parts[2]));
    if (!request) return reply_error(routing, ErrorCode::kProtocol, request.error().message);
    auto ok = answer_dir_check(options_.model_dir, request->dir, request->nonce, options_.index);
    if (!ok) {
        // Stop the whole job before step 1: every worker is told, then psd exits 2.
        spdlog::error("{}", ok.error().message);
        reply_error(routing, ErrorCode::kInvalidArgument, ok.error().message);
        faults_.abort("run stopped before step 1: " + ok.error().message, kExitUsage);
        faults_.told(h.index);
        for (const auto& p : init_waiters_) reply_aborted(p.routing, p.worker);  // non-chief workers waiting for INIT
        init_waiters_.clear();
        return;
    }
    spdlog::info("model dir {}: the chief's proof file is here, and this psd's is written", request->dir);
    reply(routing, MessageType::kAck, 0);
}

void ParameterServer::on_restore(const std::string& routing, const Header& h, Parts& parts) {
    settle_threaded_save();  // RESTORE replaces what a writer thread reads
    if (h.role != wire::Role::kChief)
        return reply_error(routing, ErrorCode::kUnauthorized, "only the chief sends RESTORE");
    if (h.frames.size() != 1 || h.frames[0].id != wire::kBodyFrame)
        return reply_error(routing, ErrorCode::kProtocol, "RESTORE carries exactly one body frame");
    auto request = wire::decode_restore(view(parts[2]));
    if (!request) return reply_error(routing, ErrorCode::kProtocol, request.error().message);
    auto chunks = read_chunks(request->dir);  // psd 0's data position, checked before anything changes
    if (!chunks) {
        spdlog::error("restore from {} failed: {}", request->dir, chunks.error().message);
        return reply_error(routing, chunks.error().code, chunks.error().message);
    }
    auto loaded = load_shard_checkpoint(*shard_, tensors_, request->init, request->dir);
    if (!loaded) {
        spdlog::error("restore from {} failed: {}", request->dir, loaded.error().message);
        return reply_error(routing, loaded.error().code, loaded.error().message);
    }
    commit_chunk_restore(std::move(*chunks), request->dir);
    if (sync_) sync_ = make_sync();  // a new run starts: forget any partial step
    spdlog::info("RESTORE: {} at step {} from {}, last step {}, learning rate {} ({})",
                 to_string(request->init.optimizer.kind), shard_->step(), request->dir, request->init.last_step,
                 request->init.optimizer.learning_rate, request->init.optimizer.effective_schedule().to_string());
    reply(routing, MessageType::kAck, 0);
    release_pending(init_waiters_, shard_->finished() ? wire::kFlagFinished : 0);
}

}  // namespace psrun::psd
