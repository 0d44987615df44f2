// A .npy array of images or feature vectors memory-mapped instead of read (--stream on, or
// --stream auto for a file larger than --stream-memory-mb): its pages are read from the file as
// batches touch them and dropped from the process again (madvise DONTNEED after every 256 MiB
// drawn), so that a worker's resident memory does not grow with the file; the kernel's page
// cache keeps what fits. uint8 or little-endian float32, C order, shape (N, H, W), (N, C, H, W),
// (N, H, W, C) (layout as --image-layout) or (N, F). Labels stay in memory. Batches are drawn
// through the Sampler as in memory (seek exact). Thread-safe for reading after open().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/batch_fill.h"
#include "workerd/data/batch_source.h"
#include "workerd/data/npy_reader.h"
#include "workerd/data/sampler.h"

namespace psrun::worker {

class MappedNpy {
  public:
    // Maps `path` for `model` (images C x H x W, or features F = the product of the dimensions
    // after the first); a rank-4 array laid out as `layout`, resolved against the model's image
    // dims `expect` where given (resolve_image_layout). Errors (kInvalidArgument naming the
    // file): not a raw .npy (a gzip file cannot be mapped: give --stream off), a dtype other than
    // uint8/float32 or big-endian float32, fortran order, a size that does not match the header.
    [[nodiscard]] static Result<std::shared_ptr<MappedNpy>> open(const std::string& path, ImageLayout layout,
                                                                 const ImageDims* expect = nullptr);
    ~MappedNpy();
    MappedNpy(const MappedNpy&) = delete;
    MappedNpy& operator=(const MappedNpy&) = delete;

    std::size_t count() const { return count_; }
    const PixelRows& rows() const { return rows_; }
    int channels() const { return channels_; }
    int height() const { return height_; }
    int width() const { return width_; }
    bool flat() const { return flat_; }  // shape (N, F)
    std::string shape() const;           // "CxHxW" or "F features"
    const std::string& path() const { return path_; }
    // Drops the mapping's pages from this process (they stay in the page cache).
    void release_pages() const;

  private:
    MappedNpy() = default;
    std::string path_;
    void* base_ = nullptr;
    std::size_t length_ = 0;
    std::size_t count_ = 0;
    int channels_ = 1, height_ = 1, width_ = 1;
    bool flat_ = false;
    PixelRows rows_;
};

// Training batches over a mapped array and in-memory labels (REQUIRES labels.size() ==
// mapped->count()).
class MappedSource final : public BatchSource {
  public:
    MappedSource(std::shared_ptr<const MappedNpy> mapped, std::vector<std::int32_t> labels, Normalization normalization,
                 std::size_t batch_size, std::uint64_t seed, ShardSpec shard);
    void next_batch(BatchView& out) override;
    void seek(std::uint64_t examples) override { sampler_.seek(examples); }
    DataPosition position() const override { return {sampler_.epoch(), sampler_.offset(), sampler_.position(), true}; }
    DataTime data_time() const override { return time_; }  // all handling (page faults included)

  private:
    std::shared_ptr<const MappedNpy> mapped_;
    std::vector<std::int32_t> labels_;
    Normalization normalization_;
    Sampler sampler_;
    std::vector<std::uint32_t> indices_;
    std::size_t bytes_since_release_ = 0;
    DataTime time_;
};

// The evaluation pass over a mapped array, in order.
class MappedEvalSource final : public EvalSource {
  public:
    MappedEvalSource(std::shared_ptr<const MappedNpy> mapped, std::vector<std::int32_t> labels,
                     Normalization normalization)
        : mapped_(std::move(mapped)), labels_(std::move(labels)), normalization_(std::move(normalization)) {}
    void rewind() override;
    std::size_t next(BatchView& out, std::size_t batch_size) override;
    std::size_t size() const override { return mapped_->count(); }

  private:
    std::shared_ptr<const MappedNpy> mapped_;
    std::vector<std::int32_t> labels_;
    Normalization normalization_;
    std::size_t next_ = 0;
    std::vector<std::uint32_t> indices_;
};

}  // namespace psrun::worker
