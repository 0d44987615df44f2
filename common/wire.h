// The psrun parameter-server wire protocol (docs/protocol.md has the grammar and the flows).
// A message is multipart: one header frame (fixed 48 bytes + 8 bytes per payload frame) and
// one payload frame per tensor slice or body. All integers are little-endian.
// Decoding never trusts the peer: every function here returns an Error for any malformed
// input and never reads out of bounds. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/finite.h"
#include "common/optimizer.h"
#include "common/result.h"
#include "common/tensor_layout.h"

namespace psrun::wire {

inline constexpr std::uint32_t kMagic = 0x4E525350;  // "PSRN"
// 2: ATTACH and shared-memory payloads; 3: DIRCHECK; 4: the model in HELLO, the learning-rate schedule in INIT;
// 5: REJOINED; 6: MAC trailer, bf16 slices; 7: psd's instance in WELCOME; 8: tensor class and kind (and row
// initializer) in the tensor list; 9: sparse tables (row frames, the tables in WELCOME); 10: weight decay
// and global-norm clipping in INIT; 11: the moving average's decay and the parameter groups in INIT; 12: CHUNK;
// 13: keyed rows tables (their policy in the tensor list, the keyed flag in WELCOME, 8-byte id frames);
// 14: JOIN and the JOIN flag on HELLO (workers that join a running job, psrun join); the LOOKUP flag
// on PULL (evaluation reads rows without creating or admitting them)
inline constexpr std::uint16_t kVersion = 16;
inline constexpr std::size_t kFixedHeaderSize = 48;
inline constexpr std::size_t kFrameDescriptorSize = 8;
inline constexpr std::uint32_t kMaxFrames = 4096;
inline constexpr std::uint32_t kMaxTensors = 4096;        // tensors in a HELLO list (and a row frame's tensor field)
inline constexpr std::uint16_t kMaxParamGroups = 64;      // --param-group entries in INIT
inline constexpr std::uint32_t kBodyFrame = 0xFFFFFFFF;   // descriptor id of a non-tensor frame
inline constexpr std::uint32_t kMaxBodyBytes = 1u << 20;  // bodies are small; slices are not
inline constexpr std::uint64_t kMaxDenseElements = 1ull << 32;  // floats of one dense tensor
inline constexpr std::uint64_t kMaxRowsElements = 1ull << 40;   // floats of one rows tensor
inline constexpr std::uint32_t kMaxRowWidth = 65536;            // floats per row
inline constexpr std::uint32_t kMaxAdmitAfter = 65535;          // a keyed table's RowPolicy::admit_after

enum class MessageType : std::uint8_t {
    kHello = 1,
    kWelcome = 2,
    kInit = 3,
    kPull = 4,
    kPush = 5,
    kPushPull = 6,
    kParams = 7,
    kAck = 8,
    kDone = 9,
    kStats = 10,
    kStop = 11,
    kError = 12,
    kHeartbeat = 13,
    kSave = 14,
    kRestore = 15,
    kAttach = 16,
    kDirCheck = 17,
    kChunk = 18,
    kJoin = 19,
};
inline constexpr std::uint8_t kMaxMessageType = 19;
std::string_view to_string(MessageType type);

enum class Role : std::uint8_t { kWorker = 0, kChief = 1, kPs = 2, kTool = 3 };
inline constexpr std::uint8_t kMaxRole = 3;

// Header flag bits.
inline constexpr std::uint32_t kFlagRestored = 1u << 0;     // INIT: psd already holds parameters
inline constexpr std::uint32_t kFlagFinished = 1u << 1;     // PARAMS/ACK: last_step reached
inline constexpr std::uint32_t kFlagStale = 1u << 2;        // PARAMS: the push was stale, dropped
inline constexpr std::uint32_t kFlagSync = 1u << 3;         // WELCOME: psd runs in sync mode
inline constexpr std::uint32_t kFlagInitialized = 1u << 4;  // WELCOME: psd holds parameters
inline constexpr std::uint32_t kFlagDryRun = 1u << 5;       // INIT: validate gradients, never apply (benchmarks)
// Preemption (docs/protocol.md "Draining"): on PARAMS/ACK from psd: psd is draining, stop
// training (async: the push was applied; sync: it was not); on HEARTBEAT from the chief: start draining now; on
// DONE: this worker stopped early (signal or draining), not at the last step.
inline constexpr std::uint32_t kFlagDraining = 1u << 6;
// Shared memory (common/shm_segment.h): on PUSH/PUSH_PULL the gradient is in the sender's
// segment, region `aux`, and no payload frame follows; on PARAMS the parameters were written
// into the segment's params region. Only on a connection whose ATTACH was accepted.
inline constexpr std::uint32_t kFlagShm = 1u << 7;
// On any reply from psd: psd had declared this worker dead (silent longer than its
// --worker-timeout, e.g. the worker was stopped) and took it back with the request this answers;
// `aux` is psd's --worker-timeout in milliseconds (issue 14).
inline constexpr std::uint32_t kFlagRejoined = 1u << 8;
// Message authentication (--auth mac, common/message_auth.h): the message ends with one auth
// trailer frame (session, sequence number, send time, tag) that is not listed in `frames`.
inline constexpr std::uint32_t kFlagMac = 1u << 9;
// Reduced-precision exchange (--wire-precision bf16): on PUSH/PUSH_PULL the gradient slice frames
// hold bf16 values (2 bytes each); on PULL/PUSH_PULL the sender asks for bf16 parameters; on
// PARAMS the parameter slice frames hold bf16 values. psd keeps f32 master weights.
inline constexpr std::uint32_t kFlagBf16 = 1u << 10;
// Elastic membership (psrun join, docs/protocol.md "Joining"): on HELLO, the sender took its index
// from psd 0's JOIN reply: psd accepts it below --max-workers and counts it in sync steps from its
// first gradient.
inline constexpr std::uint32_t kFlagJoin = 1u << 11;
// On PULL of rows (docs/protocol.md "Sparse tables"): read them only, as evaluation does: psd creates
// no row, and a keyed table counts no occurrence, admits and evicts nothing (an id that is not a row
// reads as its initial values).
inline constexpr std::uint32_t kFlagLookup = 1u << 12;
// Checkpoints that do not stall the chief (docs/protocol.md "Save flow", version 16): on SAVE, answer
// at once instead of when the shard file is written; the chief sends the same SAVE again to learn
// how the write went. On the ACK of such a SAVE: the shard file is still being written.
inline constexpr std::uint32_t kFlagBackground = 1u << 13;
inline constexpr std::uint32_t kKnownFlags = 0x3FFF;
inline constexpr std::uint64_t kMaxShmRegion = 1;  // aux of a shared-memory PUSH: 0 or 1

// Row frames (sparse tables, docs/protocol.md "Sparse tables"): descriptor id =
// kRowFrame | part << 16 | tensor (the rows tensor's index in the list); bits 24..30 are zero.
//   kGradIds     PUSH/PUSH_PULL: uint32 row ids, strictly ascending, all owned by the receiving shard
//                (a keyed table: uint64 raw ids, strictly ascending, keyed_owner() the receiving shard)
//   kGradValues  follows its kGradIds frame: ids x width gradient values (bf16 under kFlagBf16)
//   kPullIds     PULL/PUSH_PULL: row ids to pull as in kGradIds, strictly ascending, owned by the shard
//   kValues      PARAMS: the rows of one kPullIds frame, in its order (bf16 under kFlagBf16)
enum class RowPart : std::uint8_t { kGradIds = 0, kGradValues = 1, kPullIds = 2, kValues = 3 };
inline constexpr std::uint32_t kRowFrame = 0x80000000u;
inline constexpr std::uint32_t kMaxRowsPerFrame = 1u << 24;  // ids in one frame
constexpr std::uint32_t row_frame_id(RowPart part, std::uint32_t tensor) {
    return kRowFrame | (static_cast<std::uint32_t>(part) << 16) | tensor;
}
constexpr bool is_row_frame(std::uint32_t id) { return id != kBodyFrame && (id & kRowFrame) != 0; }
constexpr RowPart row_part(std::uint32_t id) { return static_cast<RowPart>((id >> 16) & 0xFF); }
constexpr std::uint32_t row_tensor(std::uint32_t id) { return id & 0xFFFF; }

struct FrameDesc {
    std::uint32_t id = kBodyFrame;  // slice id in the layout, or kBodyFrame
    std::uint32_t bytes = 0;        // exact size of the payload frame
    bool operator==(const FrameDesc&) const = default;
};

struct Header {
    MessageType type = MessageType::kError;
    Role role = Role::kWorker;
    std::uint64_t token = 0;  // job token; must match the psd's
    std::uint32_t index = 0;  // sender's task index (worker rank or ps index)
    std::uint32_t flags = 0;
    std::uint64_t step = 0;  // PUSH*: step the gradient was computed at; PARAMS/ACK: global step
    std::uint64_t aux = 0;   // shared-memory PUSH*: gradient region; REJOINED: psd's worker timeout (ms); otherwise 0
    std::vector<FrameDesc> frames;
    bool operator==(const Header&) const = default;
};

// Frames before the first row frame of `header` (its dense slices and bodies, which come first).
std::size_t dense_frame_count(const Header& header);

// Serialises the header frame (with its CRC32).
std::string encode_header(const Header& header);
// Parses and validates a header frame: magic, version, type, role, flags, frame count, size, CRC,
// row frame ids well-formed (part <= 3, tensor < 4096), and a SHM message carrying row frames only.
[[nodiscard]] Result<Header> decode_header(std::string_view bytes);
// Checks that the payload frames match the header's descriptors one by one.
[[nodiscard]] Result<void> check_frames(const Header& header, std::span<const std::size_t> frame_sizes);

// Bodies (each is one kBodyFrame payload frame).
// The tensor list: name, shape, class, kind and (rows) initializer of each tensor, and a keyed
// table's RowPolicy. A rows tensor has rank 2, width <= kMaxRowWidth and class trainable; a keyed
// table's policy admits after 1..kMaxAdmitAfter occurrences with a probability in (0, 1].
std::string encode_tensors(const std::vector<TensorSpec>& tensors);
[[nodiscard]] Result<std::vector<TensorSpec>> decode_tensors(std::string_view bytes);

// Which model a worker trains: its name (for messages) and the SHA-256 of its canonical
// architecture (workerd/nn/model_summary.h), 64 lower-case hex digits; empty for a tool that
// only names the tensor list. psd serves one model: HELLOs with another hash are refused.
struct ModelId {
    std::string name;  // 1..255 bytes
    std::string hash;  // "" or 64 hex digits
    bool operator==(const ModelId&) const = default;
};
inline constexpr std::size_t kMaxModelNameBytes = 255;
struct Hello {
    ModelId model;
    std::vector<TensorSpec> tensors;
};
std::string encode_hello(const Hello& hello);  // HELLO: model name, hash, then the tensor list
[[nodiscard]] Result<Hello> decode_hello(std::string_view bytes);

// `instance`: drawn at random (never 0) when the psd process starts. A client that reconnects
// after losing a psd compares it: the same value means the same process (its parameters are
// intact), another one a restarted psd (docs/protocol.md "Losing a psd").
struct Welcome {
    std::uint32_t shard = 0;
    ShardLayout layout;
    std::uint64_t instance = 0;
};
std::string encode_welcome(const Welcome& welcome);
[[nodiscard]] Result<Welcome> decode_welcome(std::string_view bytes);

struct InitConfig {
    OptimizerConfig optimizer;
    std::uint64_t start_step = 0;  // global step of the initial parameters
    std::uint64_t last_step = 0;   // 0: no limit; else updates stop at this global step
};
std::string encode_init(const InitConfig& init);
[[nodiscard]] Result<InitConfig> decode_init(std::string_view bytes);

struct ErrorBody {
    ErrorCode code = ErrorCode::kProtocol;
    std::string reason;
};
std::string encode_error(const ErrorBody& error);
[[nodiscard]] Result<ErrorBody> decode_error(std::string_view bytes);

// SAVE body: the directory the shard file goes into; header step = the chief's global step.
// RESTORE body: init config (start_step = the checkpoint's step) + the checkpoint directory.
// Paths are absolute, 1..kMaxPathBytes bytes, without NUL.
inline constexpr std::size_t kMaxPathBytes = 4095;
[[nodiscard]] Result<void> check_path(std::string_view path);
std::string encode_save(const std::string& dir);
[[nodiscard]] Result<std::string> decode_save(std::string_view bytes);
struct RestoreRequest {
    InitConfig init;
    std::string dir;
};
std::string encode_restore(const RestoreRequest& request);
[[nodiscard]] Result<RestoreRequest> decode_restore(std::string_view bytes);

// DIRCHECK body (chief -> ps, docs/protocol.md "Shared model dir"): the chief's model dir
// (absolute, as check_path) and the nonce of the file it wrote there (16..64 bytes of [0-9a-f]).
struct DirCheckRequest {
    std::string dir;
    std::string nonce;
};
std::string encode_dircheck(const DirCheckRequest& request);
[[nodiscard]] Result<DirCheckRequest> decode_dircheck(std::string_view bytes);

// CHUNK (worker -> psd 0, docs/protocol.md "Elastic data", psd/data_chunks.h): the worker's data
// plan (examples, chunks, seed: every worker of the run sends the same), the chunks it trained
// on completely since its last CHUNK, and whether it wants a new chunk. The reply is a CHUNK
// whose body is a ChunkGrant (leased = false when none was wanted).
struct ChunkRef {
    std::uint64_t epoch = 0;
    std::uint32_t chunk = 0;
    bool operator==(const ChunkRef&) const = default;
};
inline constexpr std::uint32_t kMaxChunkReports = 1024;  // done chunks in one request
struct ChunkRequest {
    std::uint64_t examples = 0;  // >= 1
    std::uint32_t chunks = 0;    // 1..examples
    std::uint64_t seed = 0;
    bool want = true;
    std::vector<ChunkRef> done;
    bool operator==(const ChunkRequest&) const = default;
};
struct ChunkGrant {
    bool leased = false;
    ChunkRef id;
    std::uint64_t first = 0;  // the chunk's first example
    std::uint32_t count = 0;  // examples (>= 1 when leased)
    bool operator==(const ChunkGrant&) const = default;
};
std::string encode_chunk_request(const ChunkRequest& request);
[[nodiscard]] Result<ChunkRequest> decode_chunk_request(std::string_view bytes);
std::string encode_chunk_grant(const ChunkGrant& grant);
[[nodiscard]] Result<ChunkGrant> decode_chunk_grant(std::string_view bytes);

// JOIN (a joining worker, role tool -> psd 0; docs/protocol.md "Joining"): the model it trains,
// checked as HELLO checks it, and its data plan's chunk count (a joiner must read chunks: >= 1).
// The reply is a JOIN whose body is a JoinGrant: the index to say HELLO with (below max_workers),
// the map's worker count and psd's --max-workers. No room, another model, or no chunks: ERROR
// kInvalidArgument naming it.
struct JoinRequest {
    ModelId model;             // name 1..255 bytes, hash "" or 64 hex digits
    std::uint32_t chunks = 0;  // --data-chunks of the joiner: 1..2^20
    bool operator==(const JoinRequest&) const = default;
};
inline constexpr std::uint32_t kMaxJoinChunks = 1u << 20;
struct JoinGrant {
    std::uint32_t index = 0;        // < max_workers
    std::uint32_t num_workers = 0;  // the map's workers (>= 1, <= max_workers)
    std::uint32_t max_workers = 0;  // psd's --max-workers
    bool operator==(const JoinGrant&) const = default;
};
std::string encode_join_request(const JoinRequest& request);
[[nodiscard]] Result<JoinRequest> decode_join_request(std::string_view bytes);
std::string encode_join_grant(const JoinGrant& grant);
[[nodiscard]] Result<JoinGrant> decode_join_grant(std::string_view bytes);

using ::psrun::all_finite;  // common/finite.h: the gradients' NaN/Inf check

}  // namespace psrun::wire
