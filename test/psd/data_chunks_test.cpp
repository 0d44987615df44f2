// psd/data_chunks.h (issue 38): leases, completion, a dead worker's chunks re-queued, epoch
// rollover and checkpoint/restore of the dispenser's state, without sockets.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "psd/data_chunks.h"

using namespace psrun::psd;

namespace {

// Leases chunks round-robin to `workers` and completes each at once, until `epochs` are complete.
void drain_epochs(DataChunks& d, std::uint32_t workers, std::uint64_t epochs) {
    for (std::uint32_t w = 0; d.epochs_complete() < epochs; w = (w + 1) % workers) {
        const ChunkLease l = d.lease(w);
        REQUIRE(d.complete(w, l.id));
    }
}

}  // namespace

TEST_CASE("data chunks: plans are checked", "[data_chunks]") {
    CHECK(DataChunks::check({10, 3, 1}));
    CHECK_FALSE(DataChunks::check({0, 1, 1}));
    CHECK_FALSE(DataChunks::check({10, 0, 1}));
    CHECK_FALSE(DataChunks::check({10, 11, 1}));  // more chunks than examples
    CHECK_FALSE(DataChunks::check({DataChunks::kMaxExamples + 1, 1, 1}));
    // A chunk's count is 32 bits (found by the data_chunks fuzz target: 100 * 2^32 examples in 5 chunks).
    CHECK_FALSE(DataChunks::check({100ull << 32, 5, 1}));
    CHECK(DataChunks::check({100ull << 32, 101, 1}));
    CHECK(DataChunks::check({10, 3, 1}).has_value());
    auto bad = DataChunks::check({10, 11, 1});
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("--data-chunks") != std::string::npos);
}

TEST_CASE("data chunks: an epoch covers every example once, in a seeded order", "[data_chunks]") {
    DataChunks d({1003, 7, 42});
    std::set<std::uint32_t> seen_chunks;
    std::vector<bool> covered(1003, false);
    std::vector<std::uint32_t> order;
    for (int k = 0; k < 7; ++k) {
        const ChunkLease l = d.lease(static_cast<std::uint32_t>(k % 2));
        CHECK(l.id.epoch == 0);
        CHECK(l.count >= 1003 / 7);
        CHECK(seen_chunks.insert(l.id.chunk).second);
        order.push_back(l.id.chunk);
        for (std::uint64_t i = l.first; i < l.first + l.count; ++i) {
            CHECK_FALSE(covered[i]);
            covered[i] = true;
        }
    }
    CHECK(std::count(covered.begin(), covered.end(), true) == 1003);
    // The order is a function of (seed, epoch): another dispenser with the seed agrees, another seed differs.
    DataChunks same({1003, 7, 42}), other({1003, 7, 43});
    std::vector<std::uint32_t> same_order, other_order;
    for (int k = 0; k < 7; ++k) {
        same_order.push_back(same.lease(0).id.chunk);
        other_order.push_back(other.lease(0).id.chunk);
    }
    CHECK(same_order == order);
    CHECK(other_order != order);
}

TEST_CASE("data chunks: completion counts once, only from the holder", "[data_chunks]") {
    DataChunks d({100, 4, 1});
    const ChunkLease a = d.lease(0);
    CHECK_FALSE(d.complete(1, a.id));  // not worker 1's lease
    CHECK(d.complete(0, a.id));
    CHECK_FALSE(d.complete(0, a.id));  // twice: ignored
    CHECK(d.stale_reports() == 2);
    const auto e = d.epochs();
    REQUIRE(e.size() == 1);
    CHECK(e[0].examples == 25);
    CHECK(e[0].chunks_done == 1);
    CHECK_FALSE(e[0].complete);
}

TEST_CASE("data chunks: a dead worker's chunks go back to the front of the queue", "[data_chunks]") {
    DataChunks d({90, 9, 5});
    const ChunkLease a = d.lease(1);
    const ChunkLease b = d.lease(1);
    const ChunkLease c = d.lease(2);
    CHECK(d.held_by(1).size() == 2);
    CHECK(d.release(1) == 2);
    CHECK(d.held_by(1).empty());
    CHECK_FALSE(d.complete(1, a.id));  // the dead worker speaks again: its old lease is gone
    // The next two leases are the released chunks (the smaller id first), then the epoch goes on.
    const ChunkLease r1 = d.lease(2), r2 = d.lease(0);
    std::set<std::uint32_t> released{a.id.chunk, b.id.chunk}, got{r1.id.chunk, r2.id.chunk};
    CHECK(got == released);
    CHECK(r1.id < r2.id);
    CHECK(d.complete(2, r1.id));
    CHECK(d.complete(0, r2.id));
    CHECK(d.complete(2, c.id));
    // The rest of epoch 0 by worker 0 alone: the epoch completes with exactly 90 examples.
    while (d.epochs_complete() == 0) REQUIRE(d.complete(0, d.lease(0).id));
    const auto e = d.epochs();
    REQUIRE_FALSE(e.empty());
    CHECK(e[0].complete);
    CHECK(e[0].examples == 90);
    CHECK(d.epochs_inexact() == 0);
}

TEST_CASE("data chunks: epochs roll over while the last chunks are in flight", "[data_chunks]") {
    DataChunks d({30, 3, 9});
    const ChunkLease held = d.lease(0);  // worker 0 keeps this chunk of epoch 0 a long time
    REQUIRE(d.complete(1, d.lease(1).id));
    REQUIRE(d.complete(1, d.lease(1).id));
    const ChunkLease next = d.lease(1);  // epoch 0 has no chunk left to lease: epoch 1 opens
    CHECK(next.id.epoch == 1);
    CHECK(d.epochs_complete() == 0);
    REQUIRE(d.complete(0, held.id));
    CHECK(d.epochs_complete() == 1);
    drain_epochs(d, 3, 5);
    CHECK(d.epochs_complete() == 5);
    CHECK(d.epochs_inexact() == 0);
    for (const auto& e : d.epochs())
        if (e.complete) CHECK(e.examples == 30);
}

TEST_CASE("data chunks: the state survives a checkpoint and the epoch goes on", "[data_chunks]") {
    DataChunks d({50, 5, 3});
    drain_epochs(d, 2, 2);
    const ChunkLease done = d.lease(0);
    REQUIRE(d.complete(0, done.id));
    const ChunkLease in_flight = d.lease(1);  // leased when the checkpoint is written: not done
    const DataChunks::State state = d.state();
    CHECK(state.open.size() == 1);
    CHECK(state.open[0].done == std::vector<std::uint32_t>{done.id.chunk});

    auto r = DataChunks::restore(state);
    REQUIRE(r);
    CHECK(r->state() == state);
    CHECK(r->epochs_complete() == 2);
    const auto e = r->epochs();
    REQUIRE(e.size() == 3);
    CHECK(e[2].epoch == 2);
    CHECK(e[2].examples == done.count);
    // The restored run leases the rest of epoch 2 (the in-flight chunk among them) and never the done one.
    std::set<std::uint32_t> rest;
    for (int k = 0; k < 4; ++k) {
        const ChunkLease l = r->lease(0);
        CHECK(l.id.epoch == 2);
        rest.insert(l.id.chunk);
        REQUIRE(r->complete(0, l.id));
    }
    CHECK(rest.count(in_flight.id.chunk) == 1);
    CHECK(rest.count(done.id.chunk) == 0);
    CHECK(r->epochs_complete() == 3);
    CHECK(r->epochs_inexact() == 0);
    CHECK(r->lease(0).id.epoch == 3);
    // The old holder's report of its lease from before the checkpoint does not count.
    CHECK_FALSE(r->complete(1, in_flight.id));
}

TEST_CASE("data chunks: a restored state is checked field by field", "[data_chunks]") {
    DataChunks d({50, 5, 3});
    drain_epochs(d, 2, 2);
    const ChunkLease l = d.lease(0);
    REQUIRE(d.complete(0, l.id));
    const DataChunks::State good = d.state();
    REQUIRE(DataChunks::restore(good));
    auto refused = [&](auto change, const std::string& says) {
        DataChunks::State s = good;
        change(s);
        auto r = DataChunks::restore(s);
        REQUIRE_FALSE(r);
        CHECK(r.error().message.find(says) != std::string::npos);
    };
    refused([](auto& s) { s.plan.chunks = 0; }, "chunks");
    refused([](auto& s) { s.plan.chunks = 51; }, "chunks");
    refused([](auto& s) { s.next_epoch = 7; }, "7 epochs opened");
    refused([](auto& s) { s.epochs_complete = ~0ull; }, "epochs opened");
    refused([](auto& s) { s.epochs_inexact = 3; }, "inexact");
    refused([](auto& s) { s.closed[1].epoch = 0; }, "complete epoch 0 (kept entry 1) is listed twice");
    // Epochs complete out of order when the last chunk of one is still in flight as the next completes:
    // kept in completion order (a checkpoint of a resumed run held [.., 6, 5]; refusing it was a bug).
    DataChunks::State swapped = good;
    std::swap(swapped.closed[0], swapped.closed[1]);
    auto r = DataChunks::restore(swapped);
    REQUIRE(r);
    CHECK(r->state() == swapped);
    refused([](auto& s) { s.closed[0].chunks_done = 4; }, "complete epoch 0");
    refused([](auto& s) { s.open[0].epoch = 1; }, "open epoch 1");
    refused([](auto& s) { s.open[0].done = {0, 1, 2, 3, 4}; }, "open epoch 2");
    refused([](auto& s) { s.open[0].done = {3, 3}; }, "done chunk 3");
    refused([](auto& s) { s.open[0].done = {9}; }, "done chunk 9");
    // An open epoch left out: its chunks would never be leased again.
    refused([](auto& s) { s.open.clear(); }, "epochs opened");
}

TEST_CASE("data chunks: epochs that complete out of order survive a checkpoint", "[data_chunks]") {
    DataChunks d({40, 4, 9});
    const ChunkLease slow = d.lease(1);  // held by worker 1 while worker 0 finishes the rest of epoch 0 and epoch 1
    while (d.epochs_complete() < 1) REQUIRE(d.complete(0, d.lease(0).id));
    REQUIRE(d.complete(1, slow.id));  // epoch 0 completes after epoch 1
    REQUIRE(d.epochs_complete() == 2);
    const auto state = d.state();
    REQUIRE(state.closed.size() == 2);
    CHECK(state.closed[0].epoch == 1);
    CHECK(state.closed[1].epoch == 0);
    auto r = DataChunks::restore(state);
    REQUIRE(r);
    CHECK(r->state() == state);
}
