#include "common/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/coding.h"
#include "common/unique_fd.h"
#include "common/wire.h"

namespace psrun {
namespace {

constexpr std::uint64_t kShmMagic = 0x314D48534E525350ull;  // "PSRNSHM1"
constexpr std::uint32_t kShmVersion = 1;
constexpr long kTmpfsMagic = 0x01021994;
constexpr std::uint64_t kMaxFloats = 1ull << 32;  // 16 GiB per region: far above any model here

std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

tl::unexpected<Error> sys_error(const std::string& what) {
    return make_error(ErrorCode::kIo, what + ": " + std::strerror(errno));
}

Result<void> check_geometry(const ShmGeometry& g) {
    if (g.floats == 0 || g.floats > kMaxFloats) return make_error(ErrorCode::kProtocol, "shared memory: bad size");
    if (g.regions == 0 || g.regions > kMaxShmRegions)
        return make_error(ErrorCode::kProtocol, "shared memory: 1.." + std::to_string(kMaxShmRegions) +
                                                    " gradient regions, not " + std::to_string(g.regions));
    return {};
}

bool on_tmpfs(int fd) {
    struct statfs fs {};
    return fstatfs(fd, &fs) == 0 && static_cast<long>(fs.f_type) == kTmpfsMagic;
}

// Page 0 of a segment: what create() writes and open() verifies.
std::string header_bytes(const ShmGeometry& g, const ShmNonce& nonce) {
    std::string out;
    put_fixed64(out, kShmMagic);
    put_fixed32(out, kShmVersion);
    put_fixed32(out, g.regions);
    put_fixed64(out, g.floats);
    out.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
    return out;
}

std::string hex(const std::uint8_t* p, std::size_t n) {
    static const char* digits = "0123456789abcdef";
    std::string s;
    for (std::size_t i = 0; i < n; ++i) s += {digits[p[i] >> 4], digits[p[i] & 15]};
    return s;
}

}  // namespace

std::size_t ShmGeometry::region_bytes() const {
    const std::size_t page = page_size();
    return (floats * sizeof(float) + page - 1) / page * page;
}
std::size_t ShmGeometry::params_offset() const { return page_size(); }
std::size_t ShmGeometry::grads_offset(std::uint32_t region) const {
    return params_offset() + region_bytes() * (1 + region);
}
std::size_t ShmGeometry::total_bytes() const { return grads_offset(regions); }

std::string encode_attach(const AttachRequest& r) {
    std::string out;
    put_string16(out, r.path);
    put_fixed64(out, r.geometry.floats);
    put_fixed32(out, r.geometry.regions);
    out.append(reinterpret_cast<const char*>(r.nonce.data()), r.nonce.size());
    return out;
}

Result<AttachRequest> decode_attach(std::string_view bytes) {
    Decoder d(bytes);
    AttachRequest r;
    if (!d.get_string16(r.path) || !d.get64(r.geometry.floats) || !d.get32(r.geometry.regions))
        return make_error(ErrorCode::kProtocol, "bad ATTACH body");
    for (auto& b : r.nonce)
        if (!d.get8(b)) return make_error(ErrorCode::kProtocol, "bad ATTACH body");
    if (d.remaining() != 0) return make_error(ErrorCode::kProtocol, "bad ATTACH body: trailing bytes");
    PSRUN_TRY(wire::check_path(r.path));
    PSRUN_TRY(check_geometry(r.geometry));
    return r;
}

Result<ShmSegment> ShmSegment::create(const ShmGeometry& geometry, const std::string& dir) {
    PSRUN_TRY(check_geometry(geometry));
    ShmSegment seg;
    seg.geometry_ = geometry;
    std::uint8_t name[8];
    if (getrandom(seg.nonce_.data(), seg.nonce_.size(), 0) != static_cast<ssize_t>(seg.nonce_.size()) ||
        getrandom(name, sizeof name, 0) != static_cast<ssize_t>(sizeof name))
        return sys_error("shared memory: getrandom");
    seg.path_ = dir + "/psrun-" + std::to_string(geteuid()) + "-" + hex(name, sizeof name);
    UniqueFd fd(::open(seg.path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return sys_error("shared memory: cannot create " + seg.path_);
    seg.linked_ = true;  // from here on, the destructor of a failed `seg` removes the name
    if (!on_tmpfs(fd.get())) return make_error(ErrorCode::kUnsupported, "shared memory: " + dir + " is not a tmpfs");
    if (fchmod(fd.get(), 0600) != 0) return sys_error("shared memory: chmod " + seg.path_);
    // Reserve every page now: a full tmpfs then fails here, not with SIGBUS on a later write.
    if (int e = posix_fallocate(fd.get(), 0, static_cast<off_t>(geometry.total_bytes())); e != 0) {
        errno = e;
        return sys_error("shared memory: cannot reserve " + std::to_string(geometry.total_bytes() >> 20) + " MiB in " +
                         dir);
    }
    void* p = mmap(nullptr, geometry.total_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) return sys_error("shared memory: mmap " + seg.path_);
    seg.base_ = static_cast<std::byte*>(p);
    const std::string header = header_bytes(geometry, seg.nonce_);
    std::memcpy(seg.base_, header.data(), header.size());
    return seg;
}

Result<ShmSegment> ShmSegment::open(const AttachRequest& request) {
    PSRUN_TRY(check_geometry(request.geometry));
    const std::string& path = request.path;
    struct stat before {};
    if (lstat(path.c_str(), &before) != 0) return sys_error("shared memory: " + path);
    if (!S_ISREG(before.st_mode))
        return make_error(ErrorCode::kUnauthorized, "shared memory: " + path + " is not a regular file");
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd.valid()) return sys_error("shared memory: cannot open " + path);
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) return sys_error("shared memory: stat " + path);
    if (st.st_dev != before.st_dev || st.st_ino != before.st_ino || !S_ISREG(st.st_mode))
        return make_error(ErrorCode::kUnauthorized, "shared memory: " + path + " changed while being opened");
    if (st.st_uid != geteuid() || (st.st_mode & 077) != 0)
        return make_error(ErrorCode::kUnauthorized,
                          "shared memory: " + path + " must belong to psd's user and be private (mode 0600)");
    if (!on_tmpfs(fd.get()))
        return make_error(ErrorCode::kUnauthorized, "shared memory: " + path + " is not on a tmpfs");
    if (static_cast<std::size_t>(st.st_size) != request.geometry.total_bytes())
        return make_error(ErrorCode::kProtocol, "shared memory: " + path + " has the wrong size");
    void* p = mmap(nullptr, request.geometry.total_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    if (p == MAP_FAILED) return sys_error("shared memory: mmap " + path);
    ShmSegment seg;
    seg.base_ = static_cast<std::byte*>(p);
    seg.geometry_ = request.geometry;
    seg.path_ = path;
    seg.nonce_ = request.nonce;
    const std::string header = header_bytes(request.geometry, request.nonce);
    if (std::memcmp(seg.base_, header.data(), header.size()) != 0)
        return make_error(ErrorCode::kUnauthorized, "shared memory: " + path + " was not created by the sender");
    return seg;
}

ShmSegment::ShmSegment(ShmSegment&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      geometry_(o.geometry_),
      path_(std::move(o.path_)),
      nonce_(o.nonce_),
      linked_(std::exchange(o.linked_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
    if (this != &o) {
        reset();
        base_ = std::exchange(o.base_, nullptr);
        geometry_ = o.geometry_;
        path_ = std::move(o.path_);
        nonce_ = o.nonce_;
        linked_ = std::exchange(o.linked_, false);
    }
    return *this;
}

ShmSegment::~ShmSegment() { reset(); }

void ShmSegment::reset() {
    unlink();
    if (base_) munmap(base_, geometry_.total_bytes());
    base_ = nullptr;
}

void ShmSegment::unlink() {
    if (linked_) ::unlink(path_.c_str());
    linked_ = false;
}

std::span<float> ShmSegment::params() const {
    return {reinterpret_cast<float*>(base_ + geometry_.params_offset()), static_cast<std::size_t>(geometry_.floats)};
}

std::span<float> ShmSegment::grads(std::uint32_t region) const {
    return {reinterpret_cast<float*>(base_ + geometry_.grads_offset(region)),
            static_cast<std::size_t>(geometry_.floats)};
}

}  // namespace psrun
