#include "psd/parameter_server.h"

#include <spdlog/spdlog.h>
#include <sys/signalfd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>

#include "common/utf8.h"
#include "common/zmq_util.h"

namespace psrun::psd {

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

ParameterServer::ParameterServer(ServerOptions options, std::unique_ptr<Transport> transport)
    : options_(std::move(options)),
      transport_(std::move(transport)),
      workers_(options_.num_workers, options_.max_workers),
      faults_(std::max(options_.num_workers, options_.max_workers), options_.max_bad_grads),
      drain_(options_.signal_grace) {
    if (options_.index >= options_.endpoints.size())
        throw UsageError("--index " + std::to_string(options_.index) + " has no endpoint in --ps (" +
                         std::to_string(options_.endpoints.size()) + " given)");
    if (options_.num_workers == 0) throw UsageError("--num-workers must be at least 1");
    if (options_.max_workers == 0) options_.max_workers = options_.num_workers;
    if (options_.max_workers < options_.num_workers)
        throw UsageError(fmt::format("--max-workers {} is below --num-workers {}: give at least that many",
                                     options_.max_workers, options_.num_workers));
    join_slots_ =
        std::make_unique<JoinSlots>(options_.num_workers, options_.max_workers,
                                    std::max<Clock::duration>(options_.init_timeout, std::chrono::seconds(1)));
    if (options_.sync && (options_.replicas_to_aggregate == 0 ||
                          options_.replicas_to_aggregate + options_.backup_workers > options_.num_workers))
        throw UsageError("--sync needs 1 <= --replicas-to-aggregate and replicas + --backup-workers <= --num-workers");
    if (options_.async_tables && !options_.sync)
        throw UsageError(
            "--async-tables keeps the tables of a --sync run asynchronous: give --sync too (async "
            "runs apply every table's rows as they arrive already)");
    if (options_.standby && options_.model_dir.empty()) throw UsageError("--standby needs --model-dir");
    if (options_.keys) options_.token = options_.keys->token;
    std::random_device entropy;
    while (instance_ == 0) instance_ = (std::uint64_t{entropy()} << 32) | entropy();
    if (options_.threads > 1) team_ = std::make_unique<ThreadTeam>(options_.threads);
    if (options_.max_staleness && options_.sync)
        throw UsageError("--max-staleness bounds asynchronous training: --sync already waits for every step");
    if (options_.max_staleness)
        bound_ = std::make_unique<StalenessBound>(options_.max_workers, *options_.max_staleness);
}

ParameterServer::~ParameterServer() {
    // Terminate the transport before the parameter buffers die: zmq_ctx_term returns only once
    // the I/O thread has released every zero-copy message still pointing into them (linger 0; 2 s once run() returned).
    transport_.reset();
}

void ParameterServer::stop() {
    stop_requested_.store(true);
    wake_.notify();
}

std::string ParameterServer::shard_path() const {
    return options_.model_dir + "/ps-" + std::to_string(options_.index) + ".shard";
}

void ParameterServer::write_endpoint_file() {
    const std::string path = options_.model_dir + "/ps-" + std::to_string(options_.index) + ".endpoint";
    std::filesystem::create_directories(options_.model_dir);
    {
        std::ofstream out(path + ".tmp");
        out << endpoint_ << "\n";
    }
    std::filesystem::rename(path + ".tmp", path);
    spdlog::info("standby: endpoint {} written to {}", endpoint_, path);
}

int ParameterServer::run() {
    spdlog::info("serving on {} ({} mode{}, {} workers{}, {}), instance {:016x}", endpoint_,
                 options_.sync ? "sync" : "async",
                 options_.max_staleness
                     ? fmt::format(", at most {} gradients ahead of the slowest worker", *options_.max_staleness)
                     : "",
                 options_.num_workers,
                 join_slots_->enabled() ? fmt::format(" and up to {} that join (--max-workers {})",
                                                      options_.max_workers - options_.num_workers, options_.max_workers)
                                        : "",
                 transport_->security(), instance_);
    if (options_.standby) write_endpoint_file();
    std::vector<zmq::pollitem_t> items = transport_->poll_items();
    const std::size_t signal_item = items.size();
    items.push_back({nullptr, signals_.fd(), ZMQ_POLLIN, 0});
    items.push_back({nullptr, wake_.fd(), ZMQ_POLLIN, 0});
    while (!exit_code_) {
        const bool writing = saving_.has_value();  // a forked checkpoint writer: its pipe tells when it is done
        if (writing) items.push_back({nullptr, saving_->writer->fd(), ZMQ_POLLIN, 0});
        zmq::poll(items, std::chrono::milliseconds(200));
        if (writing) {
            const bool done = items.back().revents & (ZMQ_POLLIN | ZMQ_POLLERR);
            items.pop_back();
            if (done) finish_save();
        }
        transport_->serve_events(std::span<const zmq::pollitem_t>(items).first(signal_item));
        if (items[0].revents & ZMQ_POLLIN) {
            for (int n = 0; n < 64 && !exit_code_; ++n) {  // drain, but keep timers and signals fair
                Parts parts;
                if (!transport_->receive(parts)) break;
                handle(parts);
            }
        }
        if (items[signal_item].revents & ZMQ_POLLIN) {
            while (auto sig = signals_.read_signal()) {
                if (*sig == SIGTERM || *sig == SIGINT || *sig == SIGUSR1) {
                    on_signal(*sig);
                } else {
                    spdlog::info("ignoring signal {}", *sig);
                }
            }
        }
        if (items[signal_item + 1].revents & ZMQ_POLLIN) wake_.drain();
        tick();
    }
    if (saving_) {
        spdlog::warn(
            "the checkpoint at step {} being written to {} is abandoned (psd exits): the previous one stays "
            "the latest",
            saving_->chief_step, saving_->dir);
        saving_.reset();  // kills the writer; the chief writes no manifest for it
    }
    if (options_.standby)
        std::filesystem::remove(options_.model_dir + "/ps-" + std::to_string(options_.index) + ".endpoint");
    spdlog::info("exiting with code {} ({})", *exit_code_, stats_json());
    transport_->linger();  // the last replies (the ACK of the last DONE) may still be queued
    return *exit_code_;
}

void ParameterServer::handle(Parts& parts) {
    const std::uint64_t replies_before = replies_sent_;
    try {
        handle_message(parts);
    } catch (const std::exception& e) {
        if (!survive_exception(parts, replies_before, e.what())) throw;
    } catch (...) {
        if (!survive_exception(parts, replies_before, "an exception of unknown type")) throw;
    }
}

void ParameterServer::tick() {
    if (stop_requested_.load() && !exit_code_)
        finish(options_.standby || workers_.run_finished(false) ? kExitOk : kExitFailure);
    if (!exit_code_) check_timeouts();
    if (!exit_code_) release_bounded();  // after messages and timeouts: either may let a held reply go
    transport_->prune();
    if (!exit_code_) check_drain();
}

void ParameterServer::finish(int code) {
    settle_threaded_save();  // the final save below reads the rows as they are
    if (options_.standby && shard_ && shard_->initialized()) {
        shard_->rows().materialize(team_.get());
        auto saved = shard_->save(shard_path(), chunks_.get());  // psd 0: with its data dispenser
        if (!saved) {
            spdlog::error("{}", saved.error().message);
            code = kExitFailure;
        } else {
            spdlog::info("saved shard (step {}) to {}", shard_->step(), shard_path());
        }
    }
    exit_code_ = code;
}

void ParameterServer::handle_message(Parts& parts) {
    ++counters_.messages;
    if (parts.size() < 2) {
        ++counters_.malformed;
        return;  // no header: nothing to answer
    }
    const std::string routing(view(parts[0]));
    auto header = wire::decode_header(view(parts[1]));
    if (!header) {
        ++counters_.malformed;
        log_refusal("a malformed message (" + header.error().message + ")");
        return reply_error(routing, ErrorCode::kProtocol, header.error().message);
    }
    if (!authenticate(routing, *header, parts)) return;  // the MAC trailer is gone from `parts` after this
    std::vector<std::size_t> sizes;
    for (std::size_t i = 2; i < parts.size(); ++i) sizes.push_back(parts[i].size());
    if (auto ok = wire::check_frames(*header, sizes); !ok) {
        ++counters_.malformed;
        log_refusal("a malformed message (" + ok.error().message + ")");
        return reply_error(routing, ErrorCode::kProtocol, ok.error().message);
    }
    if (header->token != options_.token) {
        ++counters_.unauthorized;
        log_refusal("a message with another job's token");
        return reply_error(routing, ErrorCode::kUnauthorized, "wrong job token: use this job's key file");
    }
    const bool is_worker = header->role == wire::Role::kWorker || header->role == wire::Role::kChief;
    if (is_worker && header->index >= options_.max_workers) {
        ++counters_.malformed;
        return reply_error(routing, ErrorCode::kInvalidArgument,
                           "worker index " + std::to_string(header->index) + " is not below --num-workers " +
                               std::to_string(options_.num_workers) +
                               (join_slots_->enabled() ? " (--max-workers " + std::to_string(options_.max_workers) + ")"
                                                       : std::string()));
    }
    if (is_worker && header->type != MessageType::kHello && workers_.revive(header->index, Clock::now()))
        on_worker_rejoined(routing, header->index);
    dispatch(routing, *header, parts);
    // The worker waited for psd while it handled the request (a checkpoint write can take seconds on a busy
    // disk): that time is not its silence. (Not after DONE: a standby psd may have forgotten the run.)
    if (is_worker && header->type != MessageType::kDone && !workers_.is_dead(header->index))
        workers_.seen(header->index, Clock::now());
}

bool ParameterServer::authenticate(const std::string& routing, const Header& h, Parts& parts) {
    auto refusal = transport_->authenticate(routing, h, parts);
    if (!refusal) return true;
    ++counters_.unauthorized;
    log_refusal(refusal->what);
    reply_error(routing, ErrorCode::kUnauthorized, refusal->reason);
    return false;
}

void ParameterServer::log_refusal(const std::string& what) {
    // Hostile or confused clients must not flood the log: the first few, then one a minute.
    const auto now = Clock::now();
    if (refusals_logged_ >= 5 && now - last_refusal_log_ < std::chrono::minutes(1)) return;
    ++refusals_logged_;
    last_refusal_log_ = now;
    spdlog::warn("refused {}: answered with ERROR, still serving (malformed {}, unauthorized {} so far)", what,
                 counters_.malformed, counters_.unauthorized);
}

void ParameterServer::dispatch(const std::string& routing, const Header& h, Parts& parts) {
    const bool is_worker = h.role == wire::Role::kWorker || h.role == wire::Role::kChief;
    switch (h.type) {
        case MessageType::kHello: return on_hello(routing, h, parts);
        case MessageType::kJoin: return on_join(routing, h, parts);
        case MessageType::kStats: {
            const std::string body = stats_json();
            return reply(routing, MessageType::kStats, 0, &body);
        }
        case MessageType::kHeartbeat:
            if ((h.flags & wire::kFlagDraining) && h.role == wire::Role::kChief && shard_ && shard_->initialized()) {
                begin_drain(0);
                // Async: answer once the other workers stopped, so that the step in the reply (the one the
                // chief checkpoints) already holds their last pushes, on every shard alike.
                drain_waiters_.push_back(Pending{routing, h.type, h.index});
                return release_drain_waiters(false);
            }
            return reply(routing, MessageType::kAck, drain_.active() ? wire::kFlagDraining : 0);
        case MessageType::kStop:
            spdlog::info("STOP received from {} {}", is_worker ? "worker" : "tool", h.index);
            reply(routing, MessageType::kAck, 0);
            stop_requested_.store(true);
            return;
        default: break;
    }
    if (faults_.aborted()) return reply_aborted(routing, is_worker ? h.index : options_.max_workers);
    if (!shard_) return reply_error(routing, ErrorCode::kProtocol, "send HELLO first");
    if (!is_worker && h.type != MessageType::kPull)
        return reply_error(routing, ErrorCode::kUnauthorized,
                           "only workers may send " + std::string(to_string(h.type)));
    switch (h.type) {
        case MessageType::kInit: return on_init(routing, h, parts);
        case MessageType::kPull: return on_pull(routing, h, parts);
        case MessageType::kPush:
        case MessageType::kPushPull: return on_push(routing, h, parts);
        case MessageType::kDone: return on_done(routing, h);
        case MessageType::kSave: return on_save(routing, h, parts);
        case MessageType::kRestore: return on_restore(routing, h, parts);
        case MessageType::kDirCheck: return on_dircheck(routing, h, parts);
        case MessageType::kAttach: return on_attach(routing, h, parts);
        case MessageType::kChunk: return on_chunk(routing, h, parts);
        default:
            ++counters_.malformed;
            return reply_error(routing, ErrorCode::kProtocol,
                               "unexpected message type " + std::string(to_string(h.type)));
    }
}

}  // namespace psrun::psd
