#include "workerd/data/mapped_npy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "workerd/data/reader_common.h"

namespace psrun::worker {
namespace {

constexpr std::size_t kReleaseBytes = std::size_t{256} << 20;

}  // namespace

Result<std::shared_ptr<MappedNpy>> MappedNpy::open(const std::string& path, ImageLayout layout,
                                                   const ImageDims* expect) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bad_file(path, std::string("cannot open (") + std::strerror(errno) + ")");
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
        ::close(fd);
        return bad_file(path, "cannot determine its size, or it is empty");
    }
    const auto length = static_cast<std::size_t>(st.st_size);
    void* base = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (base == MAP_FAILED) return bad_file(path, std::string("cannot map it (") + std::strerror(errno) + ")");
    std::shared_ptr<MappedNpy> m(new MappedNpy());
    m->path_ = path;
    m->base_ = base;
    m->length_ = length;
    const auto* bytes = static_cast<const std::uint8_t*>(base);
    // The header is at most 64 KiB + 12 bytes: parse a copy of it.
    const std::vector<std::uint8_t> head(bytes, bytes + std::min<std::size_t>(length, 65536 + 12));
    if (head.size() >= 2 && head[0] == 0x1f && head[1] == 0x8b)
        return bad_file(path,
                        "a gzip file cannot be memory-mapped: give --stream off to load it, or store it "
                        "uncompressed");
    PSRUN_TRY_ASSIGN(auto h, parse_npy_header(head, path));
    layout = resolve_image_layout(h.shape, layout, expect);
    const bool u8 = h.kind == 'u' && h.item_bytes == 1;
    const bool f32 = h.kind == 'f' && h.item_bytes == 4 && !h.big_endian;
    if (!u8 && !f32)
        return bad_file(path, "dtype '" + h.descr +
                                  "' cannot be memory-mapped (uint8 or little-endian float32; "
                                  "or give --stream off to load and convert it)");
    const auto& s = h.shape;
    if (s.size() < 2 || s.size() > 4)
        return bad_file(path, "shape of rank " + std::to_string(s.size()) +
                                  ": give (N, H, W), (N, C, H, W), (N, H, W, C) or (N, F)");
    bool nhwc = false;
    std::uint64_t c = 1, hh = 1, w = s[1];
    if (s.size() == 3) {
        hh = s[1];
        w = s[2];
    } else if (s.size() == 4) {
        nhwc = layout == ImageLayout::kNhwc || (layout == ImageLayout::kAuto && s[3] <= 4 && s[1] > 4);
        if (layout == ImageLayout::kAuto && (s[1] <= 4) == (s[3] <= 4))
            return bad_file(path,
                            "cannot tell whether its shape is N x C x H x W or N x H x W x C: give "
                            "--image-layout nchw or nhwc");
        c = nhwc ? s[3] : s[1];
        hh = nhwc ? s[1] : s[2];
        w = nhwc ? s[2] : s[3];
    }
    if (s.size() == 2) {
        std::size_t values = static_cast<std::size_t>(s[0]);
        if (s[1] == 0 || s[1] > (std::uint64_t{1} << 28) || !multiply_checked(values, s[1]))
            return bad_file(path, "bad dimensions: rows of 1 to 2^28 values");
        PSRUN_TRY(check_label_payload(values, h.item_bytes, length - h.data_offset, path));
    } else if (auto ok = check_image_payload(s[0], c, hh, w, h.item_bytes, length - h.data_offset, path); !ok) {
        return tl::unexpected(ok.error());
    }
    m->count_ = static_cast<std::size_t>(s[0]);
    m->channels_ = static_cast<int>(c);
    m->height_ = static_cast<int>(hh);
    m->width_ = static_cast<int>(w);
    m->flat_ = s.size() == 2;
    const std::uint8_t* data = bytes + h.data_offset;
    if (f32 && h.data_offset % alignof(float) != 0)
        return bad_file(path, "float32 data at an unaligned offset (not written by NumPy?)");
    m->rows_ = {u8 ? PixelType::kUint8 : PixelType::kFloat32,
                u8 ? data : nullptr,
                f32 ? reinterpret_cast<const float*>(data) : nullptr,
                static_cast<std::size_t>(c),
                static_cast<std::size_t>(hh * w),
                nhwc};
    return m;
}

MappedNpy::~MappedNpy() {
    if (base_ != nullptr) ::munmap(base_, length_);
}

std::string MappedNpy::shape() const {
    if (flat_) return std::to_string(width_) + " features";
    return std::to_string(channels_) + "x" + std::to_string(height_) + "x" + std::to_string(width_);
}

void MappedNpy::release_pages() const { ::madvise(base_, length_, MADV_DONTNEED); }

MappedSource::MappedSource(std::shared_ptr<const MappedNpy> mapped, std::vector<std::int32_t> labels,
                           Normalization normalization, std::size_t batch_size, std::uint64_t seed, ShardSpec shard)
    : mapped_(std::move(mapped)),
      labels_(std::move(labels)),
      normalization_(std::move(normalization)),
      sampler_(mapped_->count(), seed, shard),
      indices_(batch_size) {}

void MappedSource::next_batch(BatchView& out) {
    const auto t0 = std::chrono::steady_clock::now();
    sampler_.next_batch(indices_);
    if (!out.inputs_f32.empty()) fill_pixels(mapped_->rows(), normalization_, indices_, out.inputs_f32);
    if (!out.labels.empty())
        for (std::size_t b = 0; b < indices_.size(); ++b) out.labels[b] = labels_[indices_[b]];
    const PixelRows& r = mapped_->rows();
    bytes_since_release_ += indices_.size() * r.channels * r.plane * (r.type == PixelType::kUint8 ? 1 : 4);
    if (bytes_since_release_ >= kReleaseBytes) {
        mapped_->release_pages();
        bytes_since_release_ = 0;
    }
    time_.add(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0);
}

void MappedEvalSource::rewind() {
    next_ = 0;
    mapped_->release_pages();
}

std::size_t MappedEvalSource::next(BatchView& out, std::size_t batch_size) {
    if (next_ >= mapped_->count()) return 0;
    const std::size_t valid = std::min(batch_size, mapped_->count() - next_);
    indices_.resize(batch_size);
    for (std::size_t i = 0; i < batch_size; ++i)
        indices_[i] = static_cast<std::uint32_t>(i < valid ? next_ + i : next_);
    if (!out.inputs_f32.empty()) fill_pixels(mapped_->rows(), normalization_, indices_, out.inputs_f32);
    if (!out.labels.empty())
        for (std::size_t b = 0; b < indices_.size(); ++b) out.labels[b] = labels_[indices_[b]];
    next_ += valid;
    return valid;
}

}  // namespace psrun::worker
