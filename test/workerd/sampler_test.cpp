// Shuffling and sharding: shards are disjoint and cover the data, every epoch is a permutation of
// the shard, epochs differ, and a seed replays the same order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "workerd/data/sampler.h"

namespace psrun::worker {
namespace {

std::vector<std::uint32_t> draw(Sampler& s, std::size_t n) {
    std::vector<std::uint32_t> out(n);
    s.next_batch(out);
    return out;
}

}  // namespace

TEST_CASE("--shard parses i/n and rejects anything else", "[sampler]") {
    auto ok = parse_shard("2/5");
    REQUIRE(ok);
    CHECK(ok->index == 2);
    CHECK(ok->count == 5);
    for (const char* bad : {"", "3", "5/5", "-1/2", "1/0", "a/b", "1/2x", "/2", "1/"}) {
        INFO(bad);
        CHECK_FALSE(parse_shard(bad));
    }
}

TEST_CASE("shards are disjoint and together cover the dataset", "[sampler]") {
    const std::size_t size = 1003;
    const int shards = 4;
    std::vector<int> owner(size, -1);
    for (int i = 0; i < shards; ++i) {
        Sampler s(size, 1, ShardSpec{i, shards});
        const auto epoch = draw(s, s.shard_size());
        CHECK(s.epoch() == 0);
        for (auto index : epoch) {
            REQUIRE(index < size);
            CHECK(owner[index] == -1);  // no example in two shards, none twice in an epoch
            owner[index] = i;
        }
    }
    CHECK(std::count(owner.begin(), owner.end(), -1) == 0);
}

TEST_CASE("an empty shard is a usage error", "[sampler]") {
    CHECK_THROWS_AS(Sampler(3, 1, ShardSpec{4, 5}), UsageError);
    CHECK_NOTHROW(Sampler(5, 1, ShardSpec{4, 5}));
}

TEST_CASE("each epoch is a fresh permutation; a seed replays the order", "[sampler]") {
    const std::size_t size = 500;
    Sampler a(size, 42), b(size, 42), c(size, 43);
    const auto e0 = draw(a, size);
    const auto e1 = draw(a, size);
    CHECK(a.epoch() == 1);
    std::vector<std::uint32_t> sorted0 = e0, sorted1 = e1;
    std::sort(sorted0.begin(), sorted0.end());
    std::sort(sorted1.begin(), sorted1.end());
    std::vector<std::uint32_t> all(size);
    for (std::size_t i = 0; i < size; ++i) all[i] = static_cast<std::uint32_t>(i);
    CHECK(sorted0 == all);
    CHECK(sorted1 == all);
    CHECK(e0 != e1);
    std::vector<std::uint32_t> identity = all;
    CHECK(e0 != identity);
    // Same seed, drawn in other batch sizes across the epoch boundary: same sequence.
    auto b1 = draw(b, 333), b2 = draw(b, size * 2 - 333);
    b1.insert(b1.end(), b2.begin(), b2.end());
    std::vector<std::uint32_t> a_all = e0;
    a_all.insert(a_all.end(), e1.begin(), e1.end());
    CHECK(b1 == a_all);
    CHECK(draw(c, size) != e0);
}

TEST_CASE("seek jumps to the stream position drawn so far, across epochs and backwards", "[sampler]") {
    const std::size_t size = 1000;
    for (std::uint64_t examples : {0ull, 1ull, 999ull, 1000ull, 1001ull, 3456ull}) {
        Sampler sequential(size * 2, 7, ShardSpec{1, 2});
        if (examples > 0) draw(sequential, examples);
        Sampler jumped(size * 2, 7, ShardSpec{1, 2});
        draw(jumped, 2500);  // somewhere else first: seek must also go back
        jumped.seek(examples);
        INFO("examples " << examples);
        CHECK(jumped.position() == examples);
        CHECK(jumped.epoch() == examples / size);
        CHECK(jumped.offset() == examples % size);
        CHECK(draw(jumped, 1500) == draw(sequential, 1500));
    }
}

TEST_CASE("fill_batch scales pixels to [0, 1] and copies labels", "[sampler]") {
    LabeledImages data;
    data.images.count = 3;
    data.images.height = 1;
    data.images.width = 2;
    data.images.u8 = {0, 255, 51, 102, 7, 8};
    data.labels = {4, 5, 6};
    std::vector<float> images(4);
    std::vector<std::int32_t> labels(2);
    const std::vector<std::uint32_t> idx{1, 0};
    fill_batch(data, idx, images, labels);
    const std::vector<float> expected{51 / 255.0f, 102 / 255.0f, 0.0f, 1.0f};
    for (std::size_t i = 0; i < 4; ++i) CHECK(images[i] == Approx(expected[i]));
    CHECK(labels == std::vector<std::int32_t>{5, 4});
}

}  // namespace psrun::worker
