#include "workerd/data/chunk_source.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <stdexcept>

#include "common/rng.h"
#include "workerd/data/batch_fill.h"

namespace psrun::worker {

ChunkSource::ChunkSource(const LabeledImages& data, std::size_t batch_size, std::uint64_t seed, std::uint32_t chunks,
                         ChunkFetcher fetch)
    : data_(data), seed_(seed), chunks_(chunks), fetch_(std::move(fetch)), indices_(batch_size) {}

wire::ChunkRequest ChunkSource::request(bool want) {
    wire::ChunkRequest r{data_.size(), chunks_, seed_, want, {}};
    // The chunks used up by an earlier batch are trained on: report them (at most a request's worth).
    const std::size_t n = std::min<std::size_t>(ready_to_report_, wire::kMaxChunkReports);
    r.done.assign(finished_.begin(), finished_.begin() + static_cast<std::ptrdiff_t>(n));
    finished_.erase(finished_.begin(), finished_.begin() + static_cast<std::ptrdiff_t>(n));
    ready_to_report_ -= n;
    return r;
}

void ChunkSource::lease_next() {
    auto grant = fetch_(request(true));
    if (!grant) throw ChunkFetchError(grant.error());
    if (!grant->leased || grant->count == 0 || grant->first + grant->count > data_.size())
        throw std::runtime_error("data chunks: psd 0 leased a chunk outside this worker's " +
                                 std::to_string(data_.size()) + " examples: every worker must read the same data");
    current_ = grant->id;
    holding_ = true;
    ++leased_;
    order_.resize(grant->count);
    std::iota(order_.begin(), order_.end(), static_cast<std::uint32_t>(grant->first));
    Rng rng(seed_, (grant->id.epoch << 20) ^ grant->id.chunk ^ 0x5EED0000000000ull);
    for (std::size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng.below(i)]);
    pos_ = 0;
}

void ChunkSource::next_batch(BatchView& out) {
    const auto t0 = std::chrono::steady_clock::now();
    ready_to_report_ = finished_.size();  // the previous batch was trained on before this call
    for (auto& index : indices_) {
        if (!holding_ || pos_ == order_.size()) {
            if (holding_) finished_.push_back(current_);
            holding_ = false;
            lease_next();
        }
        index = order_[pos_++];
    }
    if (pos_ == order_.size()) {  // used up exactly: reported after the step, with the next lease
        finished_.push_back(current_);
        holding_ = false;
    }
    drawn_ += indices_.size();
    fill_examples(data_, indices_, out);
    time_.add(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0);
}

void ChunkSource::restart() {
    if (holding_ || !finished_.empty())
        spdlog::info(
            "data chunks: psd 0 was restored from a checkpoint: {} chunk(s) held or not reported are left "
            "to it",
            finished_.size() + (holding_ ? 1 : 0));
    holding_ = false;
    finished_.clear();
    ready_to_report_ = 0;
    order_.clear();
    pos_ = 0;
}

bool ChunkSource::report_finished() {
    ready_to_report_ = finished_.size();
    while (!finished_.empty()) {
        auto sent = fetch_(request(false));
        if (!sent) {
            spdlog::warn("data chunks: could not report {} finished chunk(s) to psd 0: {}", finished_.size(),
                         sent.error().message);
            return false;
        }
    }
    return true;
}

DataPosition ChunkSource::position() const { return {current_.epoch, holding_ ? pos_ : 0, drawn_, false}; }

}  // namespace psrun::worker
