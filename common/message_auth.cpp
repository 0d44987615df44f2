#include "common/message_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "common/coding.h"

namespace psrun {
namespace {

constexpr std::size_t kSignedSize = kTrailerSize - 16;  // the fields before the tag

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string signed_fields(const Trailer& t) {
    std::string out(reinterpret_cast<const char*>(t.session.data()), t.session.size());
    put_fixed64(out, t.seq);
    put_fixed64(out, static_cast<std::uint64_t>(t.sent_ns));
    put_fixed16(out, t.shard);
    put_fixed8(out, t.reply_count);
    put_fixed8(out, 0);
    return out;
}

bool tags_equal(const GmacTag& a, const GmacTag& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

}  // namespace

std::string_view to_string(AuthMode mode) { return mode == AuthMode::kMac ? "mac" : "curve"; }

Result<AuthMode> parse_auth_mode(std::string_view text) {
    if (text == "mac") return AuthMode::kMac;
    if (text == "curve") return AuthMode::kCurve;
    return make_error(
        ErrorCode::kInvalidArgument,
        "--auth must be mac (a MAC on every message) or curve (encrypt every byte), not '" + std::string(text) + "'");
}

std::string encode_trailer(const Trailer& trailer) {
    std::string out = signed_fields(trailer);
    out.append(reinterpret_cast<const char*>(trailer.tag.data()), trailer.tag.size());
    return out;
}

Result<Trailer> decode_trailer(std::string_view bytes) {
    if (bytes.size() != kTrailerSize)
        return make_error(ErrorCode::kUnauthorized, "auth trailer of " + std::to_string(bytes.size()) +
                                                        " bytes, expected " + std::to_string(kTrailerSize));
    Trailer t;
    std::memcpy(t.session.data(), bytes.data(), t.session.size());
    Decoder d(bytes.substr(t.session.size()));
    std::uint64_t sent = 0;
    std::uint8_t reserved = 0;
    d.get64(t.seq);
    d.get64(sent);
    d.get16(t.shard);
    d.get8(t.reply_count);
    d.get8(reserved);
    t.sent_ns = static_cast<std::int64_t>(sent);
    if (reserved != 0) return make_error(ErrorCode::kUnauthorized, "auth trailer with a non-zero reserved byte");
    std::memcpy(t.tag.data(), bytes.data() + kSignedSize, t.tag.size());
    return t;
}

std::array<std::uint8_t, 32> mac_master_key(const JobKeys& keys) {
    const std::string secret = keys.client_secret + keys.server_secret;
    static constexpr char kLabel[] = "psrun message auth v1";
    std::array<std::uint8_t, 32> out{};
    unsigned int length = 0;
    HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(kLabel),
         sizeof kLabel - 1, out.data(), &length);
    return out;
}

MacKey session_key(const std::array<std::uint8_t, 32>& master, const SessionId& session) {
    std::array<std::uint8_t, 32> full{};
    unsigned int length = 0;
    HMAC(EVP_sha256(), master.data(), static_cast<int>(master.size()), session.data(), session.size(), full.data(),
         &length);
    MacKey key{};
    std::copy_n(full.begin(), key.size(), key.begin());
    return key;
}

namespace {

// Nonce: direction | reply count | shard | sequence (48 bits) | part. Part 0 is the message's tag,
// parts 1.. its chunks; a session's requests have distinct sequence numbers and a psd's replies
// add its shard and how many replies that request had.
GmacNonce make_nonce(const Trailer& t, bool reply, std::uint16_t part) {
    GmacNonce nonce{};
    nonce[0] = reply ? 1 : 0;
    nonce[1] = t.reply_count;
    std::memcpy(nonce.data() + 2, &t.shard, 2);
    std::memcpy(nonce.data() + 4, &t.seq, 6);
    std::memcpy(nonce.data() + 10, &part, 2);
    return nonce;
}

std::size_t chunks_of(std::size_t size, std::size_t chunk) { return (size + chunk - 1) / chunk; }

// kMacChunk, doubled until the message has at most 65535 chunks (the nonce's part field).
std::size_t chunk_size(std::span<const ByteRange> frames) {
    for (std::size_t chunk = kMacChunk;; chunk *= 2) {
        std::size_t n = 0;
        for (const auto& f : frames) n += chunks_of(f.size, chunk);
        if (n <= 0xFFFF) return chunk;
    }
}

}  // namespace

GmacTag message_tag(const GmacKey& key, const Trailer& trailer, bool reply, std::span<const ByteRange> frames,
                    ThreadTeam* team) {
    // Every frame is cut into chunks, each tagged on its own (in parallel on `team`); the message's
    // tag covers the trailer's fields and, per frame, its length and its chunks' tags.
    const std::size_t chunk = chunk_size(frames);
    std::vector<ByteRange> chunks;
    for (const auto& f : frames)
        for (std::size_t off = 0; off < f.size; off += chunk)
            chunks.push_back(ByteRange{static_cast<const char*>(f.data) + off, std::min(chunk, f.size - off)});
    std::vector<GmacTag> tags(chunks.size());
    auto tag_chunks = [&](int part) {
        const auto parts = static_cast<std::size_t>(team ? team->size() : 1);
        for (std::size_t c = static_cast<std::size_t>(part); c < chunks.size(); c += parts)
            tags[c] =
                key.tag(make_nonce(trailer, reply, static_cast<std::uint16_t>(c + 1)), chunks[c].data, chunks[c].size);
    };
    if (team && chunks.size() > 1) team->run(tag_chunks);
    else tag_chunks(0);

    std::string covered = signed_fields(trailer);
    std::size_t next = 0;
    for (const auto& f : frames) {
        put_fixed64(covered, f.size);
        const std::size_t n = chunks_of(f.size, chunk);
        covered.append(reinterpret_cast<const char*>(tags.data() + next), n * sizeof(GmacTag));
        next += n;
    }
    return key.tag(make_nonce(trailer, reply, 0), covered.data(), covered.size());
}

namespace {
SessionId random_session() {
    SessionId id{};
    if (RAND_bytes(id.data(), static_cast<int>(id.size())) != 1)
        throw std::runtime_error("libcrypto could not draw a random session id");
    return id;
}
}  // namespace

MessageSealer::MessageSealer(const JobKeys& keys, ThreadTeam* team)
    : session_(random_session()), key_(session_key(mac_master_key(keys), session_)), team_(team) {}

std::string MessageSealer::seal(std::uint16_t shard, std::span<const ByteRange> frames) {
    Trailer t;
    t.session = session_;
    if (seq_ >= kMaxSeq) throw std::runtime_error("this client sent 2^48 messages: start a new one");
    t.seq = ++seq_;
    t.sent_ns = now_ns();
    t.shard = shard;
    t.tag = message_tag(key_, t, false, frames, team_);
    last_seq_[shard] = t.seq;
    return encode_trailer(t);
}

Result<void> MessageSealer::open(std::uint16_t shard, std::span<const ByteRange> frames,
                                 std::string_view trailer) const {
    PSRUN_TRY_ASSIGN(auto t, decode_trailer(trailer));
    const auto expected = last_seq_.find(shard);
    if (t.session != session_ || t.shard != shard || expected == last_seq_.end() || t.seq != expected->second)
        return make_error(ErrorCode::kUnauthorized, "a reply that does not answer this client's last request");
    if (!tags_equal(t.tag, message_tag(key_, t, true, frames, team_)))
        return make_error(ErrorCode::kUnauthorized,
                          "a reply whose MAC does not verify (altered, or not from this job's psd)");
    return {};
}

MessageVerifier::MessageVerifier(const JobKeys& keys, std::uint16_t shard, std::chrono::seconds window,
                                 ThreadTeam* team)
    : master_(mac_master_key(keys)), shard_(shard), window_(window), team_(team) {}

Result<void> MessageVerifier::verify(const std::string& routing, std::span<const ByteRange> frames,
                                     std::string_view trailer) {
    bindings_.erase(routing);
    PSRUN_TRY_ASSIGN(auto t, decode_trailer(trailer));
    if (t.seq > kMaxSeq) return make_error(ErrorCode::kUnauthorized, "a message with a sequence number above 2^48");
    if (t.shard != shard_)
        return make_error(ErrorCode::kUnauthorized,
                          "a message for ps " + std::to_string(t.shard) + ", not this ps " + std::to_string(shard_));
    const std::int64_t now = now_ns();
    const auto window_ns =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(window_).count());
    // The distance of two int64 always fits a uint64 (any sent_ns is possible: it is the peer's).
    const auto sent = static_cast<std::uint64_t>(t.sent_ns), here = static_cast<std::uint64_t>(now);
    const std::uint64_t skew = t.sent_ns > now ? sent - here : here - sent;
    if (skew > window_ns)
        return make_error(ErrorCode::kUnauthorized, "a message sent " + std::to_string(skew / 1'000'000'000) + " s " +
                                                        (t.sent_ns > now ? "ahead of" : "before") +
                                                        " this host's clock (limit " + std::to_string(window_.count()) +
                                                        " s): a replay, or the job's clocks disagree (check NTP)");
    auto it = sessions_.find(t.session);
    std::optional<GmacKey> fresh;  // a session not seen yet: kept only if the message verifies
    if (it == sessions_.end()) fresh.emplace(session_key(master_, t.session));
    const GmacKey& key = fresh ? *fresh : it->second.key;
    if (!tags_equal(t.tag, message_tag(key, t, false, frames, team_)))
        return make_error(
            ErrorCode::kUnauthorized,
            "a message whose MAC does not verify: the sender lacks this job's key file, or it was altered");
    if (it != sessions_.end() && t.seq <= it->second.last_seq)
        return make_error(ErrorCode::kUnauthorized, "a replayed message (sequence " + std::to_string(t.seq) +
                                                        ", this session is at " + std::to_string(it->second.last_seq) +
                                                        ")");
    if (it == sessions_.end()) it = sessions_.emplace(t.session, Session{std::move(*fresh), 0, 0}).first;
    it->second.last_seq = t.seq;
    it->second.last_ns = now;
    bindings_[routing] = Binding{t.session, t.seq, 0};
    return {};
}

bool MessageVerifier::can_seal(const std::string& routing) const {
    const auto b = bindings_.find(routing);
    return b != bindings_.end() && b->second.replies < 0xFF && sessions_.contains(b->second.session);
}

std::optional<std::string> MessageVerifier::seal_reply(const std::string& routing, std::span<const ByteRange> frames) {
    if (!can_seal(routing)) return std::nullopt;
    const auto b = bindings_.find(routing);
    const auto s = sessions_.find(b->second.session);
    Trailer t;
    t.session = b->second.session;
    t.seq = b->second.seq;
    t.sent_ns = now_ns();
    t.shard = shard_;
    t.reply_count = b->second.replies++;
    t.tag = message_tag(s->second.key, t, true, frames, team_);
    return encode_trailer(t);
}

void MessageVerifier::prune() {
    const std::int64_t now = now_ns();
    if (now - last_prune_ns_ < 1'000'000'000) return;
    last_prune_ns_ = now;
    // Twice the window: a sender whose clock runs ahead by up to one window stamps its messages
    // that much later than psd received them.
    const std::int64_t oldest = now - 2 * std::chrono::duration_cast<std::chrono::nanoseconds>(window_).count();
    std::erase_if(sessions_, [&](const auto& kv) { return kv.second.last_ns < oldest; });
    std::erase_if(bindings_, [&](const auto& kv) { return !sessions_.contains(kv.second.session); });
}

}  // namespace psrun
