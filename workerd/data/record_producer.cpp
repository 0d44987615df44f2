#include "workerd/data/record_producer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <numeric>

#include "common/rng.h"

namespace psrun::worker {
namespace {

// Image files larger than this are refused (a damaged file system, or not an image).
constexpr std::uint64_t kMaxImageFileBytes = std::uint64_t{256} << 20;

}  // namespace

Result<void> read_whole_file(const std::string& path, std::vector<std::uint8_t>& out) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::kInvalidArgument, path + ": cannot open (" + std::strerror(errno) + ")");
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    in.seekg(0, std::ios::beg);
    if (size < 0 || !in) return make_error(ErrorCode::kInvalidArgument, path + ": cannot determine its size");
    if (static_cast<std::uint64_t>(size) > kMaxImageFileBytes)
        return make_error(ErrorCode::kInvalidArgument,
                          path + ": " + std::to_string(size) + " bytes: too large for an image file (at most 256 MiB)");
    out.resize(static_cast<std::size_t>(size));
    in.read(reinterpret_cast<char*>(out.data()), size);
    if (in.gcount() != size) return make_error(ErrorCode::kInvalidArgument, path + ": read error");
    return {};
}

FolderProducer::FolderProducer(std::shared_ptr<const std::vector<std::string>> files,
                               std::shared_ptr<const std::vector<std::int32_t>> labels, bool training,
                               std::uint64_t seed, ShardSpec shard, std::uint64_t start)
    : files_(std::move(files)), labels_(std::move(labels)), training_(training) {
    if (training_) {
        sampler_ = std::make_unique<Sampler>(files_->size(), seed, shard);
        sampler_->seek(start);
    }
}

Result<bool> FolderProducer::next(RawRecord& out) {
    if (training_) {
        std::uint32_t i = 0;
        sampler_->next_batch({&i, 1});
        index_ = i;
        out.epoch = sampler_->epoch();
    } else {
        if (next_ >= files_->size()) return false;
        index_ = static_cast<std::uint32_t>(next_++);
    }
    out.file = index_;
    out.index = 0;
    out.offset = 0;
    out.label = (*labels_)[index_];
    PSRUN_TRY(read_whole_file((*files_)[index_], out.bytes));
    return true;
}

FileShare share_files(const std::vector<std::string>& all, ShardSpec shard) {
    FileShare s;
    const auto n = static_cast<std::size_t>(shard.count);
    if (all.size() >= n) {
        for (std::size_t i = static_cast<std::size_t>(shard.index); i < all.size(); i += n) {
            s.files.push_back(all[i]);
            s.global_index.push_back(static_cast<std::uint32_t>(i));
        }
        return s;
    }
    s.files = all;
    s.global_index.resize(all.size());
    std::iota(s.global_index.begin(), s.global_index.end(), 0u);
    s.split_records = n > 1;
    return s;
}

TfrecordProducer::TfrecordProducer(FileShare share, ShardSpec shard, bool training, std::uint64_t seed,
                                   std::uint64_t restart_key, CorruptRecords policy)
    : share_(std::move(share)),
      shard_(shard),
      training_(training),
      seed_(seed),
      restart_key_(restart_key),
      policy_(policy) {
    draw_order();
}

void TfrecordProducer::draw_order() {
    order_.resize(share_.files.size());
    std::iota(order_.begin(), order_.end(), 0u);
    if (!training_) return;
    Rng rng(seed_ ^ (restart_key_ * 0x9E3779B97F4A7C15ull),
            (std::uint64_t{static_cast<std::uint32_t>(shard_.index)} << 32) ^ epoch_);
    for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng.below(i)]);
}

std::string TfrecordProducer::describe(const RawRecord& r) const {
    return share_.files[r.file] + ": record " + std::to_string(r.index) + " at offset " + std::to_string(r.offset);
}

Result<bool> TfrecordProducer::open_next_file() {
    if (reader_) {
        skipped_ += reader_->skipped();
        reader_.reset();
    }
    if (next_file_ == order_.size()) {
        if (!training_) return false;
        if (records_this_epoch_ == 0)
            return make_error(ErrorCode::kInvalidArgument,
                              share_.files.front() +
                                  (share_.files.size() > 1 ? " and the other files of this worker" : "") +
                                  ": no records in an epoch (empty files, or every record skipped as corrupt)");
        ++epoch_;
        records_this_epoch_ = 0;
        next_file_ = 0;
        draw_order();
    }
    current_ = order_[next_file_++];
    PSRUN_TRY_ASSIGN(auto opened, TfrecordReader::open(share_.files[current_], policy_));
    reader_ = std::move(opened);
    return true;
}

Result<bool> TfrecordProducer::next(RawRecord& out) {
    while (true) {
        if (!reader_) {
            auto opened = open_next_file();
            if (!opened || !*opened) return opened;
        }
        PSRUN_TRY_ASSIGN(auto more, reader_->next(out.bytes));
        if (!more) {
            auto opened = open_next_file();
            if (!opened || !*opened) return opened;
            continue;
        }
        const std::uint64_t r = reader_->record_index();
        if (share_.split_records && (share_.global_index[current_] + r) % static_cast<std::uint64_t>(shard_.count) !=
                                        static_cast<std::uint64_t>(shard_.index))
            continue;
        out.file = current_;
        out.index = r;
        out.offset = reader_->record_offset();
        out.label = -1;
        out.epoch = epoch_;
        ++records_this_epoch_;
        return true;
    }
}

}  // namespace psrun::worker
