// The parameter-server daemon's logic: one shard of the parameters, served to the workers through
// a Transport (psd/transport.h). The daemon's constructor binds a ZeroMQ ROUTER socket
// (psd/zmq_transport.h) and run() is a single poll loop over it, a signalfd and a wake-up
// eventfd; a test may give a transport of its own and drive the logic without sockets: handle()
// one request at a time, tick() for the timers. Every message is handled on one thread; stop()
// may be called from any thread.
//
// Exceptions (issue 39): handle() catches whatever the handling of one message throws
// (std::bad_alloc, an .at() out of range, a zmq::error_t). If the shard's parameters, slots, step
// or a sync step's sum were being written when it was thrown (ShardState::torn(),
// SyncAggregator::torn()), serving them on would hand out half-updated parameters: it logs it
// and rethrows, and psd exits 1 (the job resumes from its last checkpoint). Otherwise nothing was
// changed half-way: the sender gets an ERROR (kUnsupported, unless a reply already went to it),
// the warning is logged (rate-limited), counted in STATS as handler_exceptions, and psd goes on.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include "common/payload_codec.h"
#include "common/shm_segment.h"
#include "common/signals.h"
#include "common/thread_team.h"
#include "common/wire.h"
#include "psd/background_task.h"
#include "psd/bf16_params.h"
#include "psd/data_chunks.h"
#include "psd/drain.h"
#include "psd/fault_policy.h"
#include "psd/forked_task.h"
#include "psd/join_slots.h"
#include "psd/server_options.h"
#include "psd/shard_checkpoint_rows.h"
#include "psd/shard_state.h"
#include "psd/staleness_bound.h"
#include "psd/sync_aggregator.h"
#include "psd/transport.h"
#include "psd/worker_table.h"
#include "psd/zero_pages.h"

namespace psrun::psd {

class ParameterServer {
  public:
    // The daemon: binds the socket (ZmqTransport; throws UsageError for bad options or a bad
    // endpoint, std::runtime_error when it cannot be bound).
    explicit ParameterServer(ServerOptions options);
    // The same logic over `transport` (not bound to anything here: endpoint() is empty). Throws
    // UsageError for bad options.
    ParameterServer(ServerOptions options, std::unique_ptr<Transport> transport);
    ~ParameterServer();

    // Serves until the run is over; returns the process exit code: 0 when every worker sent
    // DONE (or standby was stopped and saved), 1 when a worker died or saving failed.
    int run();
    void stop();                                               // thread-safe, async-signal-safe
    const std::string& endpoint() const { return endpoint_; }  // as bound (tcp port resolved)

    // Without run(): one request as the transport received it (routing id, header, frames[, MAC]);
    // its replies go to the transport. Rethrows only what must end psd (see above).
    void handle(Parts& parts);
    // Without run(): what the loop does after each round of messages (a requested stop, worker
    // timeouts, held replies the staleness bound lets go, a drain's progress).
    void tick();
    // The run is over (DONE from every worker, STOP, an abort): the exit code run() returns.
    std::optional<int> exit_code() const { return exit_code_; }

  private:
    struct PendingPull {  // rows a held request pulls (copied: its frames are gone by the reply)
        std::uint32_t table = 0;
        std::vector<std::uint32_t> ids;
        std::vector<std::uint64_t> keys = {};  // a keyed table's
        bool lookup = false;                   // only read (wire::kFlagLookup)
    };
    struct Pending {  // a request whose reply waits (init barrier, sync step)
        std::string routing;
        wire::MessageType type;
        std::uint32_t worker;
        std::uint32_t reply_flags = 0;  // wire::kFlagBf16 when the held PARAMS reply goes out in bf16
        std::vector<PendingPull> pulls = {};
        Clock::time_point since = {};  // held by the staleness bound since then
    };
    struct Counters {
        std::uint64_t messages = 0, malformed = 0, unauthorized = 0, nonfinite = 0, stale = 0, applied = 0, errors = 0,
                      checkpoints = 0, rows_pushed = 0, rows_pulled = 0;
        // Async: each applied gradient's staleness (updates applied since the step it was computed at).
        std::uint64_t staleness_sum = 0, staleness_max = 0;
        // --max-staleness: replies held, their total and longest wait.
        std::uint64_t bound_held = 0;
        double bound_held_s = 0, bound_longest_s = 0;
    };
    void handle_message(Parts& parts);
    // run()'s boundary around handle_message(): false when the exception must end psd (see above);
    // else answers the sender (unless `replies_before` != replies_sent_) and returns true.
    bool survive_exception(const Parts& parts, std::uint64_t replies_before, const std::string& what);
    void dispatch(const std::string& routing, const wire::Header& h, Parts& parts);
    void on_hello(const std::string& routing, const wire::Header& h, Parts& parts);
    void on_init(const std::string& routing, const wire::Header& h, Parts& parts);
    void on_push(const std::string& routing, const wire::Header& h, Parts& parts);
    void on_pull(const std::string& routing, const wire::Header& h, Parts& parts);
    void on_done(const std::string& routing, const wire::Header& h);
    // SAVE (psd/parameter_server_save.cpp): the shard's checkpoint is written by a forked child
    // from a snapshot while this loop goes on serving (psd/forked_task.h); the chief's SAVE is
    // answered when the child is done (finish_save(), on its pipe), or at once under
    // kFlagBackground (ACK + kFlagBackground: still writing; the same SAVE again gets the outcome;
    // a SAVE of another dir abandons it: the writer is killed).
    // Without a child (fork failed, or ServerOptions::fork_checkpoints off), written here before
    // the reply, as before.
    void on_save(const std::string& routing, const wire::Header& h, Parts& parts);
    struct SaveJob {
        Pending waiter;                // the chief's SAVE
        std::string dir;               // where the shard file goes
        std::uint64_t chief_step = 0;  // the step the chief named
        std::uint64_t shard_step = 0;  // this shard's step in the snapshot
        Clock::time_point started;
        // A writer thread's snapshot of the rows (null for the other writers): ended when the job
        // is destroyed, after the writer (declared after it) is joined.
        struct SnapshotEnd {
            RowStore* rows = nullptr;
            SnapshotEnd() = default;
            explicit SnapshotEnd(RowStore* r) : rows(r) {}
            SnapshotEnd(SnapshotEnd&& o) noexcept : rows(std::exchange(o.rows, nullptr)) {}
            SnapshotEnd& operator=(SnapshotEnd&& o) noexcept {
                if (this != &o) {
                    reset();
                    rows = std::exchange(o.rows, nullptr);
                }
                return *this;
            }
            ~SnapshotEnd() { reset(); }
            void reset() {
                if (rows) rows->end_snapshot();
                rows = nullptr;
            }
        };
        SnapshotEnd snapshot;
        std::unique_ptr<BackgroundTask> writer;  // null: written in the loop
        bool background = false;                 // the chief is not waiting: keep the outcome for its next SAVE
        bool differential = false;               // the sparse tables' changed blocks only (RowBlocks)
        std::vector<RowStore::BlockSet> taken;   // a whole write: the dirty blocks it cleared
        std::uint64_t dirty_epoch = 0;  // RowStore::dirty_epoch() at the SAVE (a RESTORE may end a write later)
    };
    // The differential write a SAVE of `step` into `dir` can be (ServerOptions::checkpoint_full_every),
    // or nullopt: a whole one.
    std::optional<RowBlocks> plan_differential(const std::string& dir, std::uint64_t step) const;
    // A whole write's blocks: those of each vocabulary table holding a created row (none with --ema-decay).
    std::optional<RowBlocks> plan_whole() const;
    // After a write ended (`ok`: written): a whole one is the base of the next differential ones, or
    // gives the dirty blocks it took back.
    void settle_dirty(const SaveJob& job, bool ok);
    struct FullCheckpoint {
        std::uint64_t step = 0;   // the chief's
        std::uint64_t epoch = 0;  // RowStore::dirty_epoch() then
    };
    std::optional<FullCheckpoint> last_full_;  // the newest whole write that succeeded
    std::uint32_t differential_since_full_ = 0;
    struct SaveOutcome {  // a background SAVE's result, until the chief asks for it
        std::string dir;
        Result<void> written;
    };
    // Writes the shard file and psd 0's data position into `dir`: a vocabulary table's rows as
    // `blocks` lists them (RowBlocks: a differential write's changed blocks, a whole write's
    // created ones), or every row (null: read as materialize() would leave them, none created).
    [[nodiscard]] Result<void> write_checkpoint(const std::string& dir, const RowBlocks* blocks);
    void finish_save();  // the writer is done: its result answers the SAVE
    // A writer thread reads the shard's rows while this loop serves: what would change more than
    // rows (INIT, RESTORE, a final save) waits for it first (finish_save()).
    void settle_threaded_save();
    // The writer thread's work (ServerOptions::CheckpointWriter::kThread) started (`job` holds
    // it); answered now (the checkpoint was refused: NaN or Inf); or not started (logged): the
    // caller writes it otherwise.
    enum class ThreadedSave { kStarted, kAnswered, kNotStarted };
    ThreadedSave start_threaded_save(SaveJob& job, const RowBlocks* delta);
    void complete_save(const SaveJob& job, const Result<void>& written);
    void on_restore(const std::string& routing, const wire::Header& h, Parts& parts);
    void on_dircheck(const std::string& routing, const wire::Header& h, Parts& parts);
    // Elastic data and membership (psd/parameter_server_chunks.cpp, psd/data_chunks.h).
    void on_chunk(const std::string& routing, const wire::Header& h, Parts& parts);
    // psd 0's dispenser in a checkpoint (psd/data_chunks_file.h): written on SAVE when it hands out
    // chunks; read on RESTORE before the shard (an error names the file and changes nothing), and
    // installed by commit_chunk_restore() once the shard loaded (none in the checkpoint: the next
    // CHUNK starts the data at epoch 0, logged).
    [[nodiscard]] Result<void> save_chunks(const std::string& dir) const;
    [[nodiscard]] Result<std::optional<DataChunks>> read_chunks(const std::string& dir) const;
    void commit_chunk_restore(std::optional<DataChunks> restored, const std::string& dir);
    // Workers declared dead: their chunks go back to the queue; elastic: they are dropped, and the
    // run is aborted when the chief is among them or fewer than --min-workers are left.
    void on_workers_dead(const std::vector<std::uint32_t>& dead);
    // Elastic: the run is over with dead workers; exits 0 when enough finished (true), else false.
    bool finish_elastic(const std::vector<std::uint32_t>& dead);
    void on_worker_back(std::uint32_t index);  // a dropped worker spoke again: no longer dropped
    nlohmann::json elastic_json() const;
    // Workers that join the running job (psd/parameter_server_join.cpp, psd/join_slots.h): psd 0
    // answers JOIN with a slot; every psd takes a HELLO with the JOIN flag at that slot, and counts
    // the joiner in sync steps from its first gradient (activate_joiner()).
    void on_join(const std::string& routing, const wire::Header& h, Parts& parts);
    void on_join_hello(std::uint32_t index);
    void activate_joiner(std::uint32_t index);
    std::uint32_t members() const;  // workers of the run: the map's and those that joined
    // JOIN's and HELLO's model check: the refusal's text, or "" when `model` may train here.
    std::string model_mismatch(const wire::ModelId& model, const std::string& sender) const;
    // Shared memory (psd/parameter_server_shm.cpp).
    void on_attach(const std::string& routing, const wire::Header& h, Parts& parts);
    ShmSegment* attachment(const std::string& routing);  // null: this client uses payload frames
    // This shard's slices of the gradient region the SHM header names (not yet checked for NaN).
    [[nodiscard]] Result<std::vector<std::span<const float>>> shm_slices(const wire::Header& h, const ShmSegment& seg);
    // `written`: apply() already mirrored the new parameters into the segment.
    // `row_descs`/`row_frames`: the pulled rows' values frames, sent after the header.
    void reply_params_shm(const std::string& routing, std::uint32_t flags, ShmSegment& seg, bool written,
                          std::vector<wire::FrameDesc> row_descs = {}, std::vector<zmq::message_t> row_frames = {});
    // Counts and names the first slice holding NaN/Inf (the check is split across the team).
    [[nodiscard]] Result<void> check_finite(const std::vector<std::span<const float>>& spans);
    // Preemption (psd/parameter_server_drain.cpp, psd/drain.h).
    void on_signal(int sig);
    void begin_drain(int sig);
    void check_drain();
    void end_preempted_run();
    // Every attached worker but the chief is done or dead.
    bool others_stopped(std::uint32_t chief) const;
    // Answers the chief's held drain requests once the other workers stopped (or `timed_out`).
    void release_drain_waiters(bool timed_out);
    // Payloads (psd/parameter_server_payload.cpp, common/payload_codec.h): this shard's slices of
    // an INIT/PUSH/PUSH_PULL in `form`: frames parts[2 + first..] (checked against the slices),
    // or the sender's shared-memory region (`segment`, for kShm). Every float is checked finite.
    // The spans are valid while `parts` and payload_spare_ are untouched.
    [[nodiscard]] Result<std::vector<std::span<const float>>> decode_slices(const wire::Header& h, Parts& parts,
                                                                            std::size_t first, PayloadForm form,
                                                                            const ShmSegment* segment);
    // The transport's check of a request (--auth mac: its MAC, and the trailer is stripped from
    // `parts`); false when the message was refused (answered with ERROR, counted, logged).
    bool authenticate(const std::string& routing, const wire::Header& h, Parts& parts);
    // Sends routing, header and payloads through the transport (sealed when the request was).
    void send_reply(const std::string& routing, wire::Header& h, std::vector<zmq::message_t>& payloads);
    // `descs`/`frames`: payload frames sent after the body (shared-memory PARAMS' row values).
    void reply(const std::string& routing, wire::MessageType type, std::uint32_t flags,
               const std::string* body = nullptr, std::vector<wire::FrameDesc> descs = {},
               std::vector<zmq::message_t> frames = {});
    // Frames, or the client's shared-memory segment if it attached one (`written`: see reply_params_shm).
    // wire::kFlagBf16 in `flags`: the frames hold bf16 (a shared-memory reply stays f32 and drops it).
    // Then one values frame per pulled table (gathered rows, in the request's order).
    void reply_params(const std::string& routing, std::uint32_t flags, bool written = false,
                      std::span<const RowSlice> pulls = {});
    // The row frames after the dense slices of `h` (psd/row_frames.h), checked; row gradients also
    // checked finite (counted as nonfinite otherwise). Spans valid until the next call.
    [[nodiscard]] Result<RowFrames> decode_rows(const wire::Header& h, Parts& parts, std::size_t dense_end);
    static std::vector<PendingPull> copy_pulls(const RowFrames& rows);
    static std::vector<RowSlice> pull_slices(const std::vector<PendingPull>& pulls);
    std::unique_ptr<SyncAggregator> make_sync() const;  // a fresh aggregator for this shard
    void reply_error(const std::string& routing, ErrorCode code, const std::string& reason);
    void release_pending(std::vector<Pending>& pending, std::uint32_t flags);
    void log_refusal(const std::string& what);  // rate-limited warning for a refused message
    void check_timeouts();
    // A worker declared dead spoke again (issue 14): it is live again and its next reply carries REJOINED.
    void on_worker_rejoined(const std::string& routing, std::uint32_t index);
    std::uint32_t take_rejoined(const std::string& routing);  // kFlagRejoined once per rejoin, else 0
    // psd/parameter_server_faults.cpp
    void keep_waiters_alive(Clock::time_point now);
    void update_sync_replicas();
    void complete_sync_step();
    // --max-staleness (psd/parameter_server_bound.cpp): an applied async gradient of `worker` is
    // answered now by `answer`, or held in bound_waiters_ while the bound says it must wait;
    // release_bounded() answers the held ones the bound (or draining, the run's end) lets go.
    // Called after every message and timeout check, so that membership changes release too.
    void answer_bounded(const std::string& routing, const wire::Header& h, const RowFrames& rows,
                        const std::function<void()>& answer);
    void release_bounded();
    nlohmann::json staleness_json() const;
    void on_workers_lost();
    void reject_bad_gradient(const std::string& routing, const wire::Header& h, const Error& error);
    void reply_aborted(const std::string& routing, std::uint32_t worker);
    void check_abort(Clock::time_point now);
    // The run is otherwise over, but a worker declared dead may still come back within
    // --reconnect-wait: true (and logs it once) while psd should wait for it.
    bool waiting_for_return(Clock::time_point now);
    void check_run_finished();
    void finish(int code);
    std::string stats_json() const;
    nlohmann::json keyed_tables_json() const;  // per keyed table: rows, admissions, evictions (STATS)
    bool ready_for_workers() const { return shard_ && shard_->initialized() && !awaiting_run_init_; }
    std::string shard_path() const;
    void write_endpoint_file();

    ServerOptions options_;
    // Reset first in the destructor: a ZeroMQ transport's context holds zero-copy messages that
    // point into the shard's buffers until it is terminated.
    std::unique_ptr<Transport> transport_;
    std::string endpoint_;
    SignalFd signals_;
    WakeFd wake_;
    std::atomic<bool> stop_requested_{false};
    std::optional<int> exit_code_;
    std::vector<TensorSpec> tensors_;
    wire::ModelId model_;                   // from the first HELLO (the hash from the first that had one)
    std::unique_ptr<ThreadTeam> team_;      // splits the finite check and the update (options_.threads)
    std::uint64_t refusals_logged_ = 0;     // log_refusal(): warnings written
    std::uint64_t replies_sent_ = 0;        // by send_reply()
    std::uint64_t handler_exceptions_ = 0;  // messages whose handling threw (survive_exception())
    Clock::time_point last_refusal_log_{};
    std::unique_ptr<ShardState> shard_;
    std::unique_ptr<SyncAggregator> sync_;
    std::unique_ptr<StalenessBound> bound_;  // --max-staleness (async)
    std::vector<Pending> bound_waiters_;
    WorkerTable workers_;
    FaultPolicy faults_;
    std::vector<Pending> init_waiters_;
    Clock::time_point first_init_wait_{};
    // Standby: the parameters are kept from a finished run (or loaded from the shard file) and the next
    // run's chief has not sent its INIT yet. Until it does, the other workers of that run are told "not
    // initialized" (WELCOME, STATS) and their PULLs wait, so that they train to the new run's last step
    // rather than see the previous run's FINISHED and quit at once.
    bool awaiting_run_init_ = false;
    Clock::time_point started_ = Clock::now();
    std::vector<Pending> step_waiters_;
    std::optional<SaveJob> saving_;       // a checkpoint a forked writer is writing
    HugePageCollapser collapser_;         // after a forked writer: the tables' huge pages put back
    std::optional<SaveOutcome> saved_;    // the newest background SAVE's outcome, not yet asked for
    std::vector<Pending> drain_waiters_;  // the chief's drain HEARTBEATs, answered by release_drain_waiters()
    std::vector<float> payload_spare_;    // decode_slices(): bf16 expanded and misaligned f32 copied, at local offsets
    std::vector<std::uint32_t> row_id_spare_;   // decode_rows(): misaligned ids copied
    std::vector<std::uint64_t> row_key_spare_;  // decode_rows(): a keyed table's misaligned ids copied
    std::vector<float> row_value_spare_;        // decode_rows(): row gradients expanded or copied
    // Segments of clients whose ATTACH was accepted, by routing id; dropped at their DONE.
    std::unordered_map<std::string, ShmSegment> attached_;
    Bf16Params bf16_;  // --wire-precision bf16 clients: gradient expansion, bf16 parameter copies
    Counters counters_;
    Drain drain_;
    std::unordered_set<std::string> rejoined_;  // routing ids whose next reply carries kFlagRejoined
    // This process's identity in WELCOME (wire::Welcome::instance): random, never 0.
    std::uint64_t instance_ = 0;
    std::unique_ptr<DataChunks> chunks_;  // psd 0: from the first CHUNK (its plan), or a checkpoint
    std::string chunks_restored_from_;    // chunks_ came from this checkpoint; no CHUNK confirmed its plan yet
    std::string chunks_missing_in_;       // the restored checkpoint held no dispenser state (logged at the next CHUNK)
    struct Dropped {                      // elastic: a worker declared dead and not back
        std::uint32_t worker = 0;
        double after_s = 0;  // since psd started
        std::uint64_t step = 0;
    };
    std::vector<Dropped> dropped_;
    std::vector<Dropped> joined_;            // workers that joined the running job (psrun join), in order
    std::unique_ptr<JoinSlots> join_slots_;  // psd 0 hands out the slots; every psd knows --max-workers
    std::optional<std::uint32_t> chief_;     // the index that said HELLO as the chief
    std::vector<std::uint32_t> awaited_;     // dead workers check_run_finished() waits for (logged once each)
};

}  // namespace psrun::psd
