#include "psd/data_chunks.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "common/rng.h"

namespace psrun::psd {

Result<void> DataChunks::check(const ChunkPlan& plan) {
    if (plan.examples == 0 || plan.examples > kMaxExamples)
        return invalid_argument(fmt::format("data chunks: {} examples (1..{})", plan.examples, kMaxExamples));
    if (plan.chunks == 0 || plan.chunks > kMaxChunks || plan.chunks > plan.examples)
        return invalid_argument(
            fmt::format("data chunks: {} chunks for {} examples (1..min(examples, {})): give "
                        "fewer --data-chunks",
                        plan.chunks, plan.examples, kMaxChunks));
    // A lease's count is 32 bits (ChunkLease, the CHUNK grant): the largest chunk must fit.
    if ((plan.examples + plan.chunks - 1) / plan.chunks > std::numeric_limits<std::uint32_t>::max())
        return invalid_argument(
            fmt::format("data chunks: {} examples in {} chunks make chunks of more than 2^32 - 1 "
                        "examples: give more --data-chunks",
                        plan.examples, plan.chunks));
    return {};
}

DataChunks::DataChunks(ChunkPlan plan) : plan_(plan) {}

std::vector<std::uint32_t> DataChunks::order(std::uint64_t epoch) const {
    std::vector<std::uint32_t> o(plan_.chunks);
    std::iota(o.begin(), o.end(), 0u);
    Rng rng(plan_.seed, 0xC4A9000000000000ull ^ epoch);  // Fisher-Yates with the project's own generator
    for (std::size_t i = o.size(); i > 1; --i) std::swap(o[i - 1], o[rng.below(i)]);
    return o;
}

void DataChunks::open_next_epoch() {
    const std::uint64_t e = next_epoch_++;
    open_[e].done.assign(plan_.chunks, false);
    for (auto c : order(e)) queue_.push_back(ChunkId{e, c});
}

ChunkLease DataChunks::describe(ChunkId id) const {
    const std::uint64_t first = id.chunk * plan_.examples / plan_.chunks;
    const std::uint64_t end = (std::uint64_t{id.chunk} + 1) * plan_.examples / plan_.chunks;
    return ChunkLease{id, first, static_cast<std::uint32_t>(end - first)};
}

ChunkLease DataChunks::lease(std::uint32_t worker) {
    if (queue_.empty()) open_next_epoch();
    const ChunkId id = queue_.front();
    queue_.pop_front();
    leased_[id] = worker;
    ++leased_total_;
    return describe(id);
}

bool DataChunks::complete(std::uint32_t worker, ChunkId id) {
    auto it = leased_.find(id);
    if (it == leased_.end() || it->second != worker) {
        ++stale_reports_;
        return false;
    }
    leased_.erase(it);
    OpenEpoch& e = open_.at(id.epoch);  // a leased chunk's epoch is open
    e.done[id.chunk] = true;
    e.examples += describe(id).count;
    if (++e.chunks_done == plan_.chunks) close_epoch(id.epoch);
    return true;
}

void DataChunks::close_epoch(std::uint64_t epoch) {
    const OpenEpoch& e = open_.at(epoch);
    ++epochs_complete_;
    if (e.examples != plan_.examples) ++epochs_inexact_;
    closed_.push_back(EpochCount{epoch, e.examples, e.chunks_done, true});
    if (closed_.size() > kKeptEpochs) closed_.pop_front();
    open_.erase(epoch);
}

std::size_t DataChunks::release(std::uint32_t worker) {
    std::vector<ChunkId> back = held_by(worker);
    for (const ChunkId& id : back) leased_.erase(id);
    // Oldest first at the front: an unfinished epoch completes before the next one moves on.
    for (auto it = back.rbegin(); it != back.rend(); ++it) queue_.push_front(*it);
    return back.size();
}

std::vector<ChunkId> DataChunks::held_by(std::uint32_t worker) const {
    std::vector<ChunkId> out;
    for (const auto& [id, holder] : leased_)
        if (holder == worker) out.push_back(id);
    return out;
}

std::vector<EpochCount> DataChunks::epochs() const {
    std::vector<EpochCount> out(closed_.begin(), closed_.end());
    for (const auto& [epoch, e] : open_) out.push_back(EpochCount{epoch, e.examples, e.chunks_done, false});
    std::sort(out.begin(), out.end(), [](const EpochCount& a, const EpochCount& b) { return a.epoch < b.epoch; });
    return out;
}

DataChunks::State DataChunks::state() const {
    State s{plan_, next_epoch_, epochs_complete_, epochs_inexact_, stale_reports_, leased_total_, {}, {}};
    s.closed.assign(closed_.begin(), closed_.end());
    for (const auto& [epoch, e] : open_) {
        OpenState o{epoch, {}};
        for (std::uint32_t c = 0; c < plan_.chunks; ++c)
            if (e.done[c]) o.done.push_back(c);
        s.open.push_back(std::move(o));
    }
    return s;
}

Result<DataChunks> DataChunks::restore(const State& s) {
    auto bad = [](const std::string& why) { return invalid_argument("data chunk state: " + why); };
    if (auto ok = check(s.plan); !ok) return bad(ok.error().message);
    // Every epoch opened is either still open or complete.
    if (s.next_epoch != s.epochs_complete + s.open.size() || s.next_epoch < s.epochs_complete)
        return bad(fmt::format("{} epochs opened, but {} complete and {} open", s.next_epoch, s.epochs_complete,
                               s.open.size()));
    if (s.epochs_inexact > s.epochs_complete || s.closed.size() > kKeptEpochs || s.closed.size() > s.epochs_complete)
        return bad(fmt::format("{} kept and {} inexact of {} complete epochs", s.closed.size(), s.epochs_inexact,
                               s.epochs_complete));
    DataChunks d(s.plan);
    d.next_epoch_ = s.next_epoch;
    d.epochs_complete_ = s.epochs_complete;
    d.epochs_inexact_ = s.epochs_inexact;
    d.stale_reports_ = s.stale_reports;
    d.leased_total_ = s.leased_total;
    for (std::size_t i = 0; i < s.closed.size(); ++i) {
        const EpochCount& c = s.closed[i];
        // Kept in the order they completed: an epoch may complete before the one before it (its last
        // chunk was still in flight), so the entries are unique but need not ascend.
        const bool twice = std::any_of(s.closed.begin(), s.closed.begin() + static_cast<std::ptrdiff_t>(i),
                                       [&](const EpochCount& before) { return before.epoch == c.epoch; });
        if (c.epoch >= s.next_epoch || twice || !c.complete || c.chunks_done != s.plan.chunks ||
            c.examples > kMaxExamples)
            return bad(
                fmt::format("complete epoch {} (kept entry {}) is listed twice, beyond the epochs opened, "
                            "or not complete",
                            c.epoch, i));
        d.closed_.push_back(c);
    }
    for (std::size_t i = 0; i < s.open.size(); ++i) {
        const OpenState& o = s.open[i];
        if (o.epoch >= s.next_epoch || (i > 0 && o.epoch <= s.open[i - 1].epoch) || o.done.size() >= s.plan.chunks ||
            std::any_of(s.closed.begin(), s.closed.end(), [&](const EpochCount& c) { return c.epoch == o.epoch; }))
            return bad(fmt::format("open epoch {} (entry {}) is out of order, complete or beyond the epochs opened",
                                   o.epoch, i));
        OpenEpoch& e = d.open_[o.epoch];
        e.done.assign(s.plan.chunks, false);
        for (std::size_t k = 0; k < o.done.size(); ++k) {
            const std::uint32_t c = o.done[k];
            if (c >= s.plan.chunks || (k > 0 && c <= o.done[k - 1]))
                return bad(fmt::format("open epoch {}: done chunk {} is out of range or out of order", o.epoch, c));
            e.done[c] = true;
            e.examples += d.describe(ChunkId{o.epoch, c}).count;
            ++e.chunks_done;
        }
    }
    // Every chunk not done is queued again, oldest epoch first, in each epoch's own order.
    for (const auto& [epoch, e] : d.open_)
        for (auto c : d.order(epoch))
            if (!e.done[c]) d.queue_.push_back(ChunkId{epoch, c});
    return d;
}

}  // namespace psrun::psd
