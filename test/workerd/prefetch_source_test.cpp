// PrefetchSource (workerd/prefetch_source.h) over a real MemorySource: the batches, their order,
// the transform's batch indices and position() are those of the inner source drawn directly,
// also across seek(); an exception from the inner source reaches next_batch(); destroying the
// source while its thread draws ahead returns.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <vector>

#include "test/workerd/random_images.h"
#include "workerd/data/memory_source.h"
#include "workerd/prefetch_source.h"

namespace psrun::worker {
namespace {

constexpr std::size_t kBatch = 8, kPixels = 784;

struct Batch {
    std::vector<float> x = std::vector<float>(kBatch * kPixels);
    std::vector<std::int32_t> labels = std::vector<std::int32_t>(kBatch);
    BatchView view() { return {x, {}, labels, {}}; }
};

// Fails its third batch.
class FailingSource final : public BatchSource {
  public:
    void next_batch(BatchView& out) override {
        if (++drawn_ == 3) throw std::runtime_error("record 17 of f.tfrecord is corrupt");
        std::fill(out.labels.begin(), out.labels.end(), static_cast<std::int32_t>(drawn_));
    }
    void seek(std::uint64_t) override {}
    DataPosition position() const override { return {0, drawn_ * kBatch, drawn_ * kBatch, true}; }
    DataTime data_time() const override { return {}; }

  private:
    std::uint64_t drawn_ = 0;
};

}  // namespace

TEST_CASE("prefetched batches are the inner source's, in order, with their indices and positions", "[prefetch]") {
    const auto data = std::make_shared<const LabeledImages>(test::random_images(100, 3));
    const ShardSpec shard{1, 2};
    MemorySource direct(data, kBatch, 7, shard);
    Batch shape;
    std::vector<std::uint64_t> indices;
    // The transform marks each batch with its index, as the augmentation keys its draws by it.
    PrefetchSource ahead(std::make_unique<MemorySource>(data, kBatch, 7, shard), shape.view(), kBatch,
                         [&](BatchView& v, std::uint64_t index) {
                             indices.push_back(index);
                             v.inputs_f32[0] = static_cast<float>(index);
                         });
    auto check_next = [&](std::uint64_t want_index) {
        Batch a, b;
        auto va = a.view(), vb = b.view();
        direct.next_batch(va);
        ahead.next_batch(vb);
        CHECK(b.x[0] == static_cast<float>(want_index));
        b.x[0] = a.x[0];
        CHECK(a.x == b.x);
        CHECK(a.labels == b.labels);
        CHECK(ahead.position().examples == direct.position().examples);
        CHECK(ahead.position().epoch == direct.position().epoch);
        CHECK(ahead.position().offset == direct.position().offset);
    };
    CHECK(ahead.position().examples == 0);
    for (std::uint64_t k = 0; k < 15; ++k) check_next(k);  // 120 examples: past an epoch of the 50-example shard
    direct.seek(40);
    ahead.seek(40);
    CHECK(ahead.position().examples == 40);
    for (std::uint64_t k = 5; k < 9; ++k) check_next(k);
    CHECK(ahead.data_time().total() > 0);  // every handover counted
    CHECK(indices.size() >= 19);
}

TEST_CASE("an error of the inner source is rethrown by next_batch; destruction does not wait for a consumer",
          "[prefetch]") {
    Batch shape;
    {
        PrefetchSource ahead(std::make_unique<FailingSource>(), shape.view(), kBatch, nullptr);
        Batch b;
        auto v = b.view();
        ahead.next_batch(v);
        CHECK(b.labels[0] == 1);
        ahead.next_batch(v);
        CHECK(b.labels[0] == 2);
        CHECK(ahead.position().examples == 2 * kBatch);
        CHECK_THROWS_WITH(ahead.next_batch(v), Catch::Contains("record 17 of f.tfrecord"));
    }
    std::atomic<int> drawn{0};
    {
        const auto data = std::make_shared<const LabeledImages>(test::random_images(64, 5));
        PrefetchSource idle(std::make_unique<MemorySource>(data, kBatch, 1, ShardSpec{}), shape.view(), kBatch,
                            [&](BatchView&, std::uint64_t) { ++drawn; });
    }  // destroyed with a batch read ahead and nobody taking it
    CHECK(drawn <= 1);
}

}  // namespace psrun::worker
