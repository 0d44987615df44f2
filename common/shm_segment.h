// Shared-memory exchange between a worker and the psd shards on its host (docs/protocol.md,
// "Shared memory"). The socket then carries only headers: gradients and parameters stay in
// one segment that both processes map, so no byte crosses the kernel.
//
// The worker creates the segment: a file in a tmpfs directory (/dev/shm), created O_EXCL with
// mode 0600 and a random name, whose first page holds a magic, the geometry and a random
// 128-bit nonce. It sends the path and the nonce in an authenticated ATTACH; psd opens the
// file only if it is a regular tmpfs file of the expected size, owned by psd's own user and
// accessible to nobody else, and only if the nonce in it matches. Once every shard answered,
// the worker unlinks the name: the mappings stay, and nothing is left in /dev/shm when either
// process dies.
//
// Layout (every region starts on a page boundary):
//   page 0            ShmHeader (magic, version, floats, regions, nonce)
//   params region     `floats` floats: psd writes its slices before each PARAMS reply
//   gradient region r `floats` floats, r < regions: the worker writes before PUSH with aux = r
// Ownership of a region passes with the messages: the worker writes a gradient region only
// while no PUSH naming it is unanswered, psd writes the params region only while it holds a
// request of that worker; each side reads only what the other wrote before its message.
// A ShmSegment is move-only and not thread-safe; its spans are valid while it lives.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/result.h"

namespace psrun {

inline constexpr std::uint32_t kMaxShmRegions = 2;
inline constexpr const char* kDefaultShmDir = "/dev/shm";

using ShmNonce = std::array<std::uint8_t, 16>;

struct ShmGeometry {
    std::uint64_t floats = 0;          // parameters in the model (layout total)
    std::uint32_t regions = 1;         // gradient regions, 1..kMaxShmRegions
    std::size_t region_bytes() const;  // floats * 4 rounded up to a page
    std::size_t params_offset() const;
    std::size_t grads_offset(std::uint32_t region) const;
    std::size_t total_bytes() const;
};

// Body of ATTACH: which segment to map, and the proof that the sender created it.
struct AttachRequest {
    std::string path;  // absolute, 1..4095 bytes, no NUL
    ShmGeometry geometry;
    ShmNonce nonce{};
};
std::string encode_attach(const AttachRequest& request);
[[nodiscard]] Result<AttachRequest> decode_attach(std::string_view bytes);

class ShmSegment {
  public:
    // Worker side: a new segment in `dir` (a tmpfs directory), zero-filled.
    [[nodiscard]] static Result<ShmSegment> create(const ShmGeometry& geometry,
                                                   const std::string& dir = kDefaultShmDir);
    // psd side: maps the segment an ATTACH names, after the checks in the file comment.
    [[nodiscard]] static Result<ShmSegment> open(const AttachRequest& request);

    ShmSegment() = default;
    ShmSegment(ShmSegment&& other) noexcept;
    ShmSegment& operator=(ShmSegment&& other) noexcept;
    ShmSegment(const ShmSegment&) = delete;
    ShmSegment& operator=(const ShmSegment&) = delete;
    ~ShmSegment();  // unmaps, and removes the name if this object created it and unlink() was not called

    bool mapped() const { return base_ != nullptr; }
    std::span<float> params() const;
    std::span<float> grads(std::uint32_t region) const;  // REQUIRES: region < geometry().regions
    const ShmGeometry& geometry() const { return geometry_; }
    AttachRequest attach_request() const { return {path_, geometry_, nonce_}; }
    // Creator: removes the file name (idempotent); the mappings stay valid.
    void unlink();

  private:
    void reset();

    std::byte* base_ = nullptr;
    ShmGeometry geometry_;
    std::string path_;
    ShmNonce nonce_{};
    bool linked_ = false;  // this object created the name and has not unlinked it
};

}  // namespace psrun
