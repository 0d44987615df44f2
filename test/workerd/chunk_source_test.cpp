// workerd/data/chunk_source.h (issue 38): batches drawn from the chunks a real psd::DataChunks
// leases (psd 0's bookkeeping, called in-process in place of CHUNK round trips). Each example's
// label is its index, so a batch says which examples it drew.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "psd/data_chunks.h"
#include "workerd/data/chunk_source.h"

namespace psrun::worker {
namespace {

LabeledImages indexed(std::size_t n) {
    LabeledImages d;
    d.images.count = n;
    d.images.height = d.images.width = 1;
    d.images.u8.assign(n, 0);
    d.labels.resize(n);
    std::iota(d.labels.begin(), d.labels.end(), 0);
    return d;
}

// psd 0's handling of a CHUNK request from `worker` (psd/parameter_server_chunks.cpp), without the wire.
ChunkFetcher psd0(psd::DataChunks& d, std::uint32_t worker, int* requests = nullptr) {
    return [&d, worker, requests](const wire::ChunkRequest& r) -> Result<wire::ChunkGrant> {
        if (requests) ++*requests;
        for (const auto& c : r.done) d.complete(worker, psd::ChunkId{c.epoch, c.chunk});
        wire::ChunkGrant g;
        if (r.want) {
            const psd::ChunkLease l = d.lease(worker);
            g = wire::ChunkGrant{true, wire::ChunkRef{l.id.epoch, l.id.chunk}, l.first, l.count};
        }
        return g;
    };
}

std::vector<std::int32_t> draw(ChunkSource& s, std::size_t batch) {
    std::vector<std::int32_t> labels(batch);
    BatchView v;
    v.labels = labels;
    s.next_batch(v);
    return labels;
}

}  // namespace

TEST_CASE("chunk source: one worker's first epoch is a permutation of the data", "[chunk_source]") {
    const LabeledImages data = indexed(100);
    psd::DataChunks d({100, 10, 3});
    ChunkSource s(data, 7, 3, 10, psd0(d, 0));  // batches of 7 cross chunk boundaries
    std::vector<std::int32_t> seen;
    while (seen.size() < 100) {
        const auto b = draw(s, 7);
        seen.insert(seen.end(), b.begin(), b.end());
    }
    seen.resize(100);
    std::vector<std::int32_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::int32_t> all(100);
    std::iota(all.begin(), all.end(), 0);
    CHECK(sorted == all);
    CHECK(seen != all);  // shuffled: chunks in a seeded order, examples within each chunk
    CHECK(s.report_finished());
    CHECK(d.epochs_complete() == 1);
    CHECK(d.epochs()[0].examples == 100);
}

TEST_CASE("chunk source: a used-up chunk is reported after the batch that trained on it", "[chunk_source]") {
    const LabeledImages data = indexed(40);
    psd::DataChunks d({40, 4, 1});
    int requests = 0;
    ChunkSource s(data, 10, 1, 4, psd0(d, 0, &requests));  // one chunk per batch exactly
    draw(s, 10);
    CHECK(requests == 1);
    CHECK(d.epochs()[0].chunks_done == 0);  // the batch is not trained yet
    draw(s, 10);                            // the previous batch was: reported with the next lease
    CHECK(requests == 2);
    CHECK(d.epochs()[0].chunks_done == 1);
    CHECK(s.report_finished());  // before DONE: the second chunk too, without a lease
    CHECK(requests == 3);
    CHECK(d.epochs()[0].chunks_done == 2);
    CHECK(d.held_by(0).empty());
}

TEST_CASE("chunk source: a worker lost mid-epoch leaves no example unvisited", "[chunk_source]") {
    const LabeledImages data = indexed(300);
    psd::DataChunks d({300, 30, 5});
    ChunkSource a(data, 8, 5, 30, psd0(d, 0)), b(data, 8, 5, 30, psd0(d, 1));
    for (int k = 0; k < 9; ++k) {
        draw(a, 8);
        draw(b, 8);
    }
    CHECK(d.release(1) >= 1);  // worker 1 is declared dead: its chunks go back to the queue
    while (d.epochs_complete() < 3) draw(a, 8);
    CHECK(d.epochs_inexact() == 0);
    for (const auto& e : d.epochs())
        if (e.complete) CHECK(e.examples == 300);
}

TEST_CASE("chunk source: after psd 0 is restored from a checkpoint the epoch still counts every example once",
          "[chunk_source]") {
    const LabeledImages data = indexed(300);
    psd::DataChunks live({300, 30, 5});
    psd::DataChunks* psd = &live;  // the psd 0 the fetchers reach: replaced by the restarted one below
    auto fetch = [&psd](std::uint32_t worker) {
        return [&psd, worker](const wire::ChunkRequest& r) { return psd0(*psd, worker)(r); };
    };
    ChunkSource a(data, 8, 5, 30, fetch(0)), b(data, 8, 5, 30, fetch(1));
    for (int k = 0; k < 50; ++k) {  // into epoch 1
        draw(a, 8);
        draw(b, 8);
    }
    const psd::DataChunks::State checkpoint = live.state();
    for (int k = 0; k < 7; ++k) {  // trained on after the checkpoint: lost with the psd's parameters
        draw(a, 8);
        draw(b, 8);
    }
    auto restored = psd::DataChunks::restore(checkpoint);  // psd 0 restarted and restored by the chief
    REQUIRE(restored);
    psd = &*restored;
    a.restart();  // the step loop's recovery: their leases and unreported chunks belong to the lost psd
    b.restart();
    while (restored->epochs_complete() < 4) {
        draw(a, 8);
        draw(b, 8);
    }
    CHECK(restored->stale_reports() == 0);  // nothing from before the restart was reported to it
    CHECK(restored->epochs_inexact() == 0);
    CHECK(restored->epochs().front().epoch == 0);
    for (const auto& e : restored->epochs())
        if (e.complete) CHECK(e.examples == 300);
}

TEST_CASE("chunk source: a failing psd 0 ends training with its reason", "[chunk_source]") {
    const LabeledImages data = indexed(10);
    ChunkSource s(data, 4, 1, 2, [](const wire::ChunkRequest&) -> Result<wire::ChunkGrant> {
        return make_error(ErrorCode::kIo, "psd 0 is gone");
    });
    CHECK_THROWS_WITH(draw(s, 4), Catch::Contains("psd 0 is gone"));
    CHECK_THROWS_AS(draw(s, 4), ChunkFetchError);  // the step loop recovers from a restarted psd 0 on it
    ChunkSource wide(data, 4, 1, 2, [](const wire::ChunkRequest&) -> Result<wire::ChunkGrant> {
        return wire::ChunkGrant{true, {0, 0}, 8, 5};  // beyond this worker's 10 examples
    });
    CHECK_THROWS_WITH(draw(wide, 4), Catch::Contains("every worker must read the same data"));
}

}  // namespace psrun::worker
