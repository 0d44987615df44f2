// Client side of the parameter-server protocol: one DEALER per psd shard. Used by workerd,
// the tests and `psrun bench ps`. Not thread-safe: one thread drives a PsClient.
//
// Buffers: gradients passed to push()/push_pull() are sent zero-copy; the call returns only
// after ZeroMQ has released them, so the caller may overwrite them afterwards. Parameters come
// back either copied into a caller span or as ParamFrames used in place. With shared memory,
// a gradient computed straight into gradient_buffer(r) is not copied at all.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "common/job_keys.h"
#include "common/message_auth.h"
#include "common/payload_codec.h"
#include "common/ps_health.h"
#include "common/result.h"
#include "common/shm_segment.h"
#include "common/tensor_layout.h"
#include "common/wire.h"

namespace psrun {

struct PsClientOptions {
    std::vector<std::string> endpoints;  // psd i at position i
    std::uint32_t index = 0;             // worker rank
    wire::Role role = wire::Role::kWorker;
    std::optional<JobKeys> keys;  // nullopt: no CURVE (--no-auth); token below is used
    std::uint64_t token = 0;
    AuthMode auth = kDefaultAuthMode;  // with keys, on tcp shards: CURVE or a MAC on every message
    std::vector<TensorSpec> tensors = mnist_deep_tensors();
    // Sent in HELLO: psd refuses a worker whose model hash differs from the one it serves.
    wire::ModelId model{"mnist_deep", ""};
    std::chrono::milliseconds connect_timeout{30000};  // HELLO, STATS, STOP
    std::chrono::milliseconds reply_timeout{600000};   // INIT barrier, sync steps and DONE wait longer
    // ZMTP heartbeat timeout (0: none): a psd that answers no ZMTP ping for this long counts as
    // lost (common/ps_health.h); a psd that dies is seen at once, whatever this is.
    std::chrono::milliseconds heartbeat_timeout{10000};
    // How long to wait for a lost psd to answer again (common/ps_client_reconnect.cpp), counted
    // from the moment the loss is seen; 0: a lost psd fails the request at once. The same psd
    // process answering again is reconnected to and the request goes on; a restarted one is
    // reported (restarted_shard()). workerd's default is kDefaultReconnectWait.
    std::chrono::milliseconds reconnect_wait{0};
    // Polled while waiting for a lost psd: true ends the wait with an error (a stop signal).
    std::function<bool()> interrupted;
    // Shared memory with the psd shards on this host (common/shm_segment.h): hello() offers a
    // segment to every shard; those that map it exchange gradients and parameters through it,
    // the others (on another host) through payload frames. Failing to set it up is not an error.
    bool shared_memory = false;
    std::uint32_t shm_regions = 1;  // gradient regions: 2 lets a worker compute while one is in flight
    std::string shm_dir = kDefaultShmDir;
    // Reduced-precision exchange (--wire-precision bf16, wire::kFlagBf16): gradients go out and
    // parameters come back as bf16 payload frames (half the bytes; psd keeps f32 master weights).
    // The API stays f32: gradients are rounded (to nearest even) into a client-owned buffer, and
    // parameters are expanded into ParamFrames. Shards exchanging through shared memory stay f32.
    bool wire_bf16 = false;
    // A worker that joined the running job (psrun join): `index` came from psd 0's JOIN reply and
    // every HELLO carries wire::kFlagJoin, so that psd takes it at that slot.
    bool join = false;
};

struct StepInfo {
    std::uint64_t step = 0;  // global step after this exchange: shard 0's, or the furthest shard's once finished
    bool finished = false;   // last_step reached: stop training
    // Every shard reported last_step. Async shards count pushes independently: when the first one
    // finishes, another may still be short of it (workers step on: StepLoop::finish).
    bool all_finished = false;
    bool stale = false;     // sync mode: the gradient was too old and was dropped
    bool draining = false;  // a psd is draining (preemption): stop (async: the push was applied; sync: not)
    // A psd had declared this worker dead and took it back with this exchange (wire::kFlagRejoined);
    // rejoined_timeout_ms is that psd's --worker-timeout.
    bool rejoined = false;
    std::uint64_t rejoined_timeout_ms = 0;
    // A psd was lost during this exchange and answered again (same process): the gradient may
    // not have reached it (never applied twice); the parameters are its current ones.
    bool reconnected = false;
};

// Parameters received in place: one ZeroMQ frame per slice, kept alive by this object.
class ParamFrames {
  public:
    // Floats of slice `id` (a layout slice id), valid until the next exchange reusing this object
    // (or, for slices received through shared memory, until the client's next exchange).
    std::span<const float> slice(std::uint32_t id) const;
    void copy_to(std::span<float> params, const ShardLayout& layout) const;

  private:
    friend class PsClient;
    std::vector<zmq::message_t> frames_;            // the slice frames used in place (reserved: never reallocated)
    std::vector<std::span<const float>> by_slice_;  // slice id -> floats
    // bf16 slices expanded to f32 and misaligned f32 slices copied, at flat offsets
    // (decode_frame(), common/ps_client_payload.cpp).
    std::vector<float> spare_;
    float* spare_at(const ShardLayout& layout, std::uint32_t id);
};

// Sparse tables (rows tensors, docs/protocol.md "Sparse tables"): a worker collects the ids of its
// batch per table, pulls those rows, computes, and pushes the rows' gradients; the client dedups,
// sorts and splits them over the shards (row r lives on shard r mod K), so that each shard gets
// one (ids, values) frame pair per table inside the step's single message.
// A keyed table (TensorKind::kKeyedRows) takes raw 64-bit ids in `keys` instead of `ids` (split
// by keyed_owner(); 8-byte id frames); its rows are pulled as every shard answers them (an id
// that is not a row: its initial values) and a pushed row's gradient counts only once the id is
// a row there.
struct RowGrads {
    std::uint32_t tensor = 0;                  // index in PsClientOptions::tensors (a rows tensor)
    std::span<const std::uint32_t> ids = {};   // any order; the rows of a repeated id are summed
    std::span<const float> values = {};        // ids.size() (keyed: keys.size()) x width floats
    std::span<const std::uint64_t> keys = {};  // keyed tables only, in place of ids
};
struct RowRequest {
    std::uint32_t tensor = 0;                  // a rows tensor
    std::span<const std::uint32_t> ids = {};   // any order; repeats are fetched once
    std::span<const std::uint64_t> keys = {};  // keyed tables only, in place of ids
};
// Rows pulled by one exchange: request i's rows, ids.size() x width floats in its order.
class PulledRows {
  public:
    std::span<const float> rows(std::size_t request) const { return values_.at(request); }
    std::size_t size() const { return values_.size(); }

  private:
    friend class PsClient;
    std::vector<std::vector<float>> values_;
};

// One exchange with every shard: what it pushes and what it pulls. Pushing (a dense gradient or
// rows) and pulling (dense parameters or rows) make it a PUSH_PULL; only one of them, a PUSH or
// a PULL. A push carries the whole dense gradient (layout().total floats; empty only when the
// model has no dense tensor) and is tagged with `step`.
struct Exchange {
    std::span<const float> grads = {};
    std::uint64_t step = 0;
    std::span<const RowGrads> row_grads = {};
    std::span<const RowRequest> pulls = {};
    ParamFrames* params = nullptr;  // the dense parameters are wanted here
    PulledRows* rows = nullptr;     // required when `pulls` is not empty
    // The pulled rows are only read (evaluation): psd creates, admits and evicts no row for them.
    // Only on an exchange that pushes nothing.
    bool lookup = false;
};

struct RowPlan;  // common/ps_client_rows.cpp

class PsClient {
  public:
    // Creates the sockets and connects them (no I/O yet). Throws zmq::error_t on bad endpoints.
    explicit PsClient(PsClientOptions options);
    ~PsClient();
    PsClient(const PsClient&) = delete;
    PsClient& operator=(const PsClient&) = delete;

    // HELLO to every shard; checks each WELCOME's layout against the local tensor list.
    [[nodiscard]] Result<void> hello();
    const ShardLayout& layout() const { return layout_; }
    bool servers_initialized() const { return initialized_; }  // every shard holds parameters
    std::uint64_t welcome_step() const { return welcome_step_; }
    bool sync() const { return sync_; }  // psd runs in sync mode (WELCOME of shard 0)

    // Chief only: initial parameters (whole contiguous buffer) or "restored" (psd keeps its own).
    // dry_run (benchmarks only): psd validates gradients but never applies them.
    [[nodiscard]] Result<void> init(const wire::InitConfig& config, std::span<const float> params,
                                    bool dry_run = false);
    [[nodiscard]] Result<void> init_restored(const wire::InitConfig& config);

    // Chief only, shards initialised: every psd writes its shard (params, optimizer slots and
    // update counts) as <dir>/ps-<i>-of-<K>.tensors, fsynced, and ACKs. `dir` is absolute and
    // must exist on a filesystem every psd sees. Any shard's ERROR (disk full, non-finite
    // parameters, bad path) is returned naming the shard; the others may have written files.
    [[nodiscard]] Result<void> save(std::uint64_t global_step, const std::string& dir);
    // The same SAVE without waiting for the write (kFlagBackground), to `shards`: a psd with a
    // forked writer answers at once. Sent again with the same dir, it asks how the write went.
    // Returns the shards still writing (the others are done: their file is in `dir`). Any
    // shard's ERROR is returned naming it. REQUIRES: no shard is sent it again once it is done
    // (it would start another write).
    [[nodiscard]] Result<std::vector<std::uint32_t>> save_background(std::uint64_t global_step, const std::string& dir,
                                                                     const std::vector<std::uint32_t>& shards);
    // Chief only: every psd loads its slices from the shard files in `dir` (written with any
    // shard count), verifying CRCs, and becomes initialised with `config` (start_step = the
    // checkpoint's global step) exactly as after INIT.
    [[nodiscard]] Result<void> restore(const wire::InitConfig& config, const std::string& dir);
    // Chief only (docs/protocol.md "Shared model dir"): every psd reads the proof file
    // <dir>/.psrun/dircheck/chief.<nonce> through its own view of the model dir and writes
    // ps-<i>.<nonce> beside it. A psd that cannot is refused with its reason (host and path).
    [[nodiscard]] Result<void> dir_check(const std::string& dir, const std::string& nonce);
    const std::vector<TensorSpec>& tensors() const { return options_.tensors; }

    // Shared memory (after hello()): how many shards exchange through it, and gradient region r
    // (empty when none does). Pass a region's span to push*/push_pull* to send it without a copy.
    std::size_t shm_shards() const;
    std::span<float> gradient_buffer(std::uint32_t region) const;

    // The general exchange (dense and sparse); pull()/push()/push_pull*() are its dense cases.
    // Ids must be below their table's rows (else kInvalidArgument naming the table and id,
    // nothing sent).
    [[nodiscard]] Result<StepInfo> exchange(const Exchange& x);
    [[nodiscard]] Result<StepInfo> pull(std::span<float> params);
    [[nodiscard]] Result<StepInfo> push(std::span<const float> grads, std::uint64_t step);
    [[nodiscard]] Result<StepInfo> push_pull(std::span<const float> grads, std::uint64_t step, std::span<float> params);
    [[nodiscard]] Result<StepInfo> push_pull_frames(std::span<const float> grads, std::uint64_t step, ParamFrames& out);
    // `preempted`: this worker stops before the last step (signal or draining psd).
    [[nodiscard]] Result<void> done(bool preempted = false);
    [[nodiscard]] Result<void> heartbeat();
    // Chief only: every psd starts draining (refuses further steps, keeps serving SAVE/DONE),
    // so that a checkpoint saved next holds every update psd will ever apply in this run.
    // Returns shard 0's global step after the request (the step a checkpoint should name).
    [[nodiscard]] Result<std::uint64_t> drain();
    [[nodiscard]] Result<nlohmann::json> stats(std::uint32_t shard);
    // Elastic data (docs/protocol.md "Elastic data", common/ps_client_chunks.cpp): reports
    // `request.done` to psd 0 and, when `request.want`, leases the next data chunk from it.
    [[nodiscard]] Result<wire::ChunkGrant> chunk(const wire::ChunkRequest& request);
    // Joining a running job (docs/protocol.md "Joining", common/ps_client_chunks.cpp): asks psd 0
    // for a worker slot, before any HELLO (use role kTool). ERROR kInvalidArgument: no room, another
    // model, or psd without --max-workers (the reason names it).
    [[nodiscard]] Result<wire::JoinGrant> join(const wire::JoinRequest& request);
    [[nodiscard]] Result<void> stop(std::uint32_t shard);
    // A shard whose connection dropped after it was up (its psd died or hung) and did not come
    // back within reconnect_wait, or that came back as a restarted psd: every later request
    // fails at once naming it. Use a fresh PsClient to talk to a restarted psd. When an exchange
    // fails this way, ZeroMQ may still hold its gradient buffer (queued for a hung psd): destroy
    // this PsClient before overwriting that buffer.
    std::optional<std::uint32_t> lost_shard();
    // The shard whose psd answered again as another process (a restart: its parameters are
    // gone, the chief must restore them), if any.
    std::optional<std::uint32_t> restarted_shard() const;
    // Times a lost psd answered again as the same process and the request went on.
    std::uint64_t reconnects() const { return reconnects_; }

  private:
    struct Reply {
        wire::Header header;
        std::vector<zmq::message_t> frames;
    };
    wire::Header make_header(wire::MessageType type) const;
    // Payloads (common/ps_client_payload.cpp, common/payload_codec.h). The form shard i exchanges
    // PUSH/PUSH_PULL/PULL payloads in: shared memory, bf16 or f32 frames.
    PayloadForm form_of(std::uint32_t shard) const;
    // `body` (if any), then the shard's slices of `data` as frames in `form` (f32 or bf16).
    void send_slices(std::uint32_t shard, wire::Header header, std::span<const float> data, PayloadForm form,
                     std::optional<std::string> body);
    // Appends the shard's slices of `data` to header/payloads as frames in `form` (f32 or bf16).
    void add_slices(std::uint32_t shard, wire::Header& header, std::vector<zmq::message_t>& payloads,
                    std::span<const float> data, PayloadForm form);
    // PULL, PUSH or PUSH_PULL (header.type) of `grads` to `shard` in its form, with the shard's
    // sparse rows of the current exchange (add_row_frames()).
    void send_exchange(std::uint32_t shard, wire::Header header, std::span<const float> grads);
    // Shard i's parameters from its PARAMS reply, in the form the reply announces, into `out`.
    [[nodiscard]] Result<void> take_params(std::uint32_t shard, Reply& reply, ParamFrames& out);
    void send_plain(std::uint32_t shard, const wire::Header& header, const std::string* body);
    // Sends header and payloads to `shard`, sealed with a MAC trailer on a --auth mac shard.
    void send_message(std::uint32_t shard, wire::Header header, std::vector<zmq::message_t>& payloads);
    // --auth mac: checks and strips the MAC trailer of shard i's reply (parts[0] is its header).
    [[nodiscard]] Result<void> open_reply(std::uint32_t shard, const wire::Header& header,
                                          std::vector<zmq::message_t>& parts) const;
    // After a lost shard answered again as the same psd: sends it the request in flight anew
    // (or its idempotent stand-in); `initialized` is that psd's WELCOME flag.
    using Resend = std::function<void(std::uint32_t shard, bool initialized)>;
    // Receives one reply from each shard in `shards` (ERROR replies become errors). A shard lost
    // meanwhile is waited for (reconnect_wait) and, when the same psd answers, sent `resend`;
    // without `resend` (or with reconnect_wait 0) a lost shard fails the request.
    [[nodiscard]] Result<std::vector<Reply>> collect(const std::vector<std::uint32_t>& shards,
                                                     std::chrono::milliseconds timeout, const Resend& resend = {});
    // A control request: sends `header` (with `body` as its body frame, if given) to each of
    // `shards` and collects their replies; a shard that comes back as the same psd gets it again.
    [[nodiscard]] Result<std::vector<Reply>> control_request(const std::vector<std::uint32_t>& shards,
                                                             wire::Header header, const std::string* body,
                                                             std::chrono::milliseconds timeout);
    // common/ps_client_reconnect.cpp: a fresh socket for `shard` (monitored, connected).
    void replace_socket(std::uint32_t shard);
    // Waits for lost `shard` to answer HELLO on a fresh socket, up to reconnect_wait after the loss.
    // Same psd: returns its WELCOME flags. A restarted psd (another instance): marks it restarted_
    // and fails. Gives up with an error naming the shard and the time waited.
    [[nodiscard]] Result<std::uint32_t> reconnect(std::uint32_t shard);
    // Reconnects every lost shard before a request is sent; fails for a restarted one.
    [[nodiscard]] Result<void> ensure_links();
    // The stand-in for an exchange lost with its connection: PULL (PUSH/PUSH_PULL/PULL: the gradient
    // is not sent twice; a sync psd holding it answers at the end of its step), HEARTBEAT (PUSH).
    void resend_exchange(wire::MessageType type, std::uint32_t shard);
    zmq::socket_t new_socket(const std::string& endpoint);  // a DEALER for `endpoint`, not connected
    [[nodiscard]] Result<StepInfo> run_exchange(wire::MessageType type, std::span<const float> grads,
                                                std::uint64_t step, ParamFrames* out, PulledRows* rows);
    // Sparse rows (common/ps_client_rows.cpp): splits an exchange's rows over the shards into rows_,
    // appends shard i's row frames, and scatters the rows of shard i's PARAMS into `out`.
    [[nodiscard]] Result<void> plan_rows(std::span<const RowGrads> grads, std::span<const RowRequest> pulls,
                                         bool lookup);
    // `with_grads` false: the pull-ids frames only (the stand-in PULL of a lost exchange).
    void add_row_frames(std::uint32_t shard, wire::Header& header, std::vector<zmq::message_t>& payloads,
                        PayloadForm form, bool with_grads = true);
    [[nodiscard]] Result<void> take_rows(std::uint32_t shard, Reply& reply, std::size_t first);
    void finish_rows(PulledRows& out) const;
    std::vector<std::uint32_t> all_shards() const;
    // common/ps_client_shm.cpp
    void attach_shared_memory();
    // The segment's gradient region holding `grads` for shard i's PUSH/PUSH_PULL: the region they
    // are, else region 0 after copying shard i's slices of them there.
    std::uint32_t shm_region(std::uint32_t shard, std::span<const float> grads);
    [[nodiscard]] Result<void> take_shm_params(std::uint32_t shard, const Reply& reply, ParamFrames& out) const;

    PsClientOptions options_;
    zmq::context_t context_;
    std::vector<zmq::socket_t> sockets_;
    std::unique_ptr<ThreadTeam> mac_team_;   // --auth mac: tags big messages on two threads
    std::unique_ptr<MessageSealer> sealer_;  // --auth mac
    std::vector<bool> mac_shard_;            // shard i's messages carry a MAC (tcp, --auth mac)
    ShardLayout layout_;
    std::vector<std::vector<std::uint32_t>> shard_slices_;
    bool initialized_ = false;
    std::uint64_t welcome_step_ = 0;
    bool sync_ = false;
    std::atomic<int> holds_{0};
    ShmSegment shm_;                              // mapped when at least one shard attached it
    std::vector<bool> shm_shard_;                 // shard i exchanges through shm_
    std::vector<std::uint16_t> grad_bf16_;        // wire_bf16: the gradient in bf16 (held by ZeroMQ until released)
    std::vector<std::string> connect_endpoints_;  // normalised endpoints
    std::vector<std::uint64_t> instances_;        // shard i's psd instance (WELCOME), 0 before hello()
    std::vector<bool> restarted_;                 // shard i answered again as another psd instance
    std::vector<bool> gave_up_;                   // shard i did not come back within reconnect_wait
    std::optional<Error> link_error_;             // why, for every later request
    std::uint64_t reconnects_ = 0;
    std::unique_ptr<RowPlan> rows_;       // the current exchange's sparse rows, per shard (buffers reused)
    std::unique_ptr<LinkMonitor> links_;  // after sockets_: destroyed first
};

}  // namespace psrun
