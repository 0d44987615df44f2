// Per-message authentication for tcp connections on trusted fabrics (--auth mac): every message
// carries a trailer frame with a GMAC tag (AES-128-GCM over no plaintext) of the whole message,
// a sequence number and its send time, so psd refuses anyone without the job's key, any
// altered message and any replayed one, without encrypting the payloads the way CURVE does
// (docs/protocol.md "Authentication" has the threat model and the numbers).
//
// Keys: a master key derived from the job key file's CURVE secrets (every task of the job reads
// the same file); each client process draws a random 16-byte session id and MACs with the
// session key HMAC(master, session id), so nonces (direction, sequence number, shard, reply
// count) never repeat under one key.
//
// Trailer (kTrailerSize bytes, little-endian): session id 16 | sequence 8 (below 2^48) | send time
// ns since the Unix epoch 8 | shard 2 | reply count 1 | reserved 1 (0) | tag 16. The tag covers the
// trailer's first 36 bytes, then for the header frame and every payload frame in order its
// length (8 bytes) and the GMAC tags of its pieces of kMacChunk bytes (each under its own nonce),
// which a ThreadTeam computes in parallel.
//
// MessageSealer and MessageVerifier are not thread-safe: one thread drives each.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/gmac.h"
#include "common/job_keys.h"
#include "common/result.h"
#include "common/thread_team.h"

namespace psrun {

// How psd and its clients protect a tcp connection when the job has a key file (ipc sockets are
// owner-only files either way; --no-auth has no key file and no protection).
enum class AuthMode : std::uint8_t {
    kMac,    // job-key MAC on every message: authenticity, integrity, no replay; payloads readable
    kCurve,  // CURVE: the above plus encryption of every byte (costs more than a fast network)
};
// The mode psd, workerd and psrun use when none is given (docs/protocol.md "Authentication").
inline constexpr AuthMode kDefaultAuthMode = AuthMode::kMac;
std::string_view to_string(AuthMode mode);
[[nodiscard]] Result<AuthMode> parse_auth_mode(std::string_view text);  // "mac" or "curve"

// One frame of a message, not owned.
struct ByteRange {
    const void* data = nullptr;
    std::size_t size = 0;
};

inline constexpr std::size_t kTrailerSize = 52;
inline constexpr std::size_t kMacChunk = 1 << 20;  // bytes; doubled for messages of over 64 GiB
inline constexpr std::uint64_t kMaxSeq = (1ull << 48) - 1;
using SessionId = std::array<std::uint8_t, 16>;
using MacKey = std::array<std::uint8_t, 16>;

struct Trailer {
    SessionId session{};
    std::uint64_t seq = 0;
    std::int64_t sent_ns = 0;
    std::uint16_t shard = 0;       // request: the psd it is for; reply: the psd it is from
    std::uint8_t reply_count = 0;  // reply: how many replies this request had before
    GmacTag tag{};
};
std::string encode_trailer(const Trailer& trailer);
[[nodiscard]] Result<Trailer> decode_trailer(std::string_view bytes);

// The job's master MAC key (HMAC-SHA256 of the two CURVE secrets) and a session's key.
std::array<std::uint8_t, 32> mac_master_key(const JobKeys& keys);
MacKey session_key(const std::array<std::uint8_t, 32>& master, const SessionId& session);

// The tag of a message (see above) under `key`; `reply` selects the direction. `team` (may be
// null) tags the chunks in parallel; the result does not depend on it.
GmacTag message_tag(const GmacKey& key, const Trailer& trailer, bool reply, std::span<const ByteRange> frames,
                    ThreadTeam* team = nullptr);

// Client side: seals requests, checks that replies answer them.
class MessageSealer {
  public:
    // Draws the session id. `team` (not owned, may be null) must outlive the sealer.
    MessageSealer(const JobKeys& keys, ThreadTeam* team = nullptr);
    // Trailer for a request to `shard` made of `frames` (header frame first). Remembers its
    // sequence number as the one shard's reply must carry.
    std::string seal(std::uint16_t shard, std::span<const ByteRange> frames);
    // Checks a reply from `shard`: well-formed trailer, this session, the sequence number of the
    // last request sent to `shard`, and the tag.
    [[nodiscard]] Result<void> open(std::uint16_t shard, std::span<const ByteRange> frames,
                                    std::string_view trailer) const;
    const SessionId& session() const { return session_; }

  private:
    SessionId session_{};
    GmacKey key_;
    ThreadTeam* team_ = nullptr;
    std::uint64_t seq_ = 0;
    std::unordered_map<std::uint16_t, std::uint64_t> last_seq_;  // shard -> its last request
};

// psd side: verifies requests (tag, time window, sequence) and seals the replies.
class MessageVerifier {
  public:
    // `shard`: this psd's index. `window`: how far a message's send time may lie from this
    // host's clock (the job's clocks must agree this well) and how long a quiet session is kept.
    // `team` (not owned, may be null) must outlive the verifier.
    MessageVerifier(const JobKeys& keys, std::uint16_t shard, std::chrono::seconds window, ThreadTeam* team = nullptr);

    // Verifies a request that arrived on connection `routing`. On success the connection's
    // replies are bound to it; on failure the binding is dropped (the ERROR goes out unsealed).
    [[nodiscard]] Result<void> verify(const std::string& routing, std::span<const ByteRange> frames,
                                      std::string_view trailer);
    // Whether seal_reply(routing) gives a trailer: routing's last request verified, and fewer
    // than 255 replies went to it.
    bool can_seal(const std::string& routing) const;
    void forget(const std::string& routing) { bindings_.erase(routing); }  // its replies go unsealed
    // Trailer for a reply on `routing` to its last verified request; nullopt if it has none.
    std::optional<std::string> seal_reply(const std::string& routing, std::span<const ByteRange> frames);
    // Drops sessions quiet for longer than the window (their old messages fail the time check).
    // Cheap to call often: it scans the sessions at most once a second.
    void prune();
    std::size_t sessions() const { return sessions_.size(); }

  private:
    struct Session {
        GmacKey key;
        std::uint64_t last_seq = 0;
        std::int64_t last_ns = 0;  // local receive time of its last message
    };
    struct Binding {
        SessionId session{};
        std::uint64_t seq = 0;
        std::uint8_t replies = 0;
    };
    std::array<std::uint8_t, 32> master_{};
    std::uint16_t shard_ = 0;
    std::chrono::seconds window_;
    ThreadTeam* team_ = nullptr;
    std::map<SessionId, Session> sessions_;
    std::int64_t last_prune_ns_ = 0;
    std::unordered_map<std::string, Binding> bindings_;
};

}  // namespace psrun
