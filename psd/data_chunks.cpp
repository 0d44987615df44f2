#include "psd/data_chunks.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <sstream>

#include "common/rng.h"

namespace psrun::psd {

Result<void> DataChunks::check(const ChunkPlan& plan) {
    if (plan.examples == 0 || plan.examples > kMaxExamples)
        return invalid_argument(fmt::format("data chunks: {} examples (1..{})", plan.examples, kMaxExamples));
    if (plan.chunks == 0 || plan.chunks > kMaxChunks || plan.chunks > plan.examples)
        return invalid_argument(fmt::format("data chunks: {} chunks for {} examples (1..min(examples, {})): give "
                                            "fewer --data-chunks",
                                            plan.chunks, plan.examples, kMaxChunks));
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

// psrun-data-chunks 1
// plan <examples> <chunks> <seed>
// counters <next_epoch> <complete> <inexact> <stale> <leased>
// closed <epoch> <examples> <chunks>          (the kept complete epochs)
// open <epoch> <examples> <ndone> <chunk>...  (the done chunks of an open epoch)
std::string DataChunks::serialize() const {
    std::ostringstream out;
    out << "psrun-data-chunks 1\nplan " << plan_.examples << ' ' << plan_.chunks << ' ' << plan_.seed << '\n'
        << "counters " << next_epoch_ << ' ' << epochs_complete_ << ' ' << epochs_inexact_ << ' ' << stale_reports_
        << ' ' << leased_total_ << '\n';
    for (const EpochCount& c : closed_) out << "closed " << c.epoch << ' ' << c.examples << ' ' << c.chunks_done << '\n';
    for (const auto& [epoch, e] : open_) {
        out << "open " << epoch << ' ' << e.examples << ' ' << e.chunks_done;
        for (std::uint32_t c = 0; c < plan_.chunks; ++c)
            if (e.done[c]) out << ' ' << c;
        out << '\n';
    }
    return out.str();
}

Result<DataChunks> DataChunks::restore(std::string_view text, const ChunkPlan& expected) {
    std::istringstream in{std::string(text)};
    auto bad = [](const std::string& why) { return invalid_argument("data chunk state: " + why); };
    std::string word;
    int version = 0;
    if (!(in >> word >> version) || word != "psrun-data-chunks" || version != 1) return bad("not a version 1 state");
    ChunkPlan plan;
    if (!(in >> word >> plan.examples >> plan.chunks >> plan.seed) || word != "plan") return bad("no plan line");
    if (plan != expected)
        return bad(fmt::format("it was saved for {} examples in {} chunks (seed {}), this run has {} in {} (seed {})",
                               plan.examples, plan.chunks, plan.seed, expected.examples, expected.chunks,
                               expected.seed));
    if (auto ok = check(plan); !ok) return tl::unexpected(ok.error());
    DataChunks d(plan);
    if (!(in >> word >> d.next_epoch_ >> d.epochs_complete_ >> d.epochs_inexact_ >> d.stale_reports_ >>
          d.leased_total_) ||
        word != "counters")
        return bad("no counters line");
    while (in >> word) {
        std::uint64_t epoch = 0, examples = 0;
        std::uint32_t n = 0;
        if (!(in >> epoch >> examples >> n) || epoch >= d.next_epoch_ || n > plan.chunks) return bad("bad " + word + " line");
        if (word == "closed") {
            if (d.closed_.size() >= kKeptEpochs) return bad("too many closed epochs");
            d.closed_.push_back(EpochCount{epoch, examples, n, true});
            continue;
        }
        if (word != "open" || d.open_.contains(epoch)) return bad("unexpected '" + word + "'");
        OpenEpoch& e = d.open_[epoch];
        e.done.assign(plan.chunks, false);
        for (std::uint32_t k = 0; k < n; ++k) {
            std::uint32_t c = 0;
            if (!(in >> c) || c >= plan.chunks || e.done[c]) return bad("bad done chunk in epoch " + std::to_string(epoch));
            e.done[c] = true;
            e.examples += d.describe(ChunkId{epoch, c}).count;
            ++e.chunks_done;
        }
        if (e.examples != examples || e.chunks_done == plan.chunks) return bad("inconsistent epoch " + std::to_string(epoch));
    }
    // Every chunk not done is queued again, oldest epoch first, in each epoch's own order.
    for (const auto& [epoch, e] : d.open_)
        for (auto c : d.order(epoch))
            if (!e.done[c]) d.queue_.push_back(ChunkId{epoch, c});
    return d;
}

}  // namespace psrun::psd
