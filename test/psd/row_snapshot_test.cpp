// psd/row_snapshot.h's copy-on-write protocol under a real race: a writer thread reads every part
// of every block while this thread changes blocks at random (each change saving the block
// first); what the writer read is the array as it was at the start, byte for byte.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "psd/row_snapshot.h"

using psrun::psd::RowSnapshot;

TEST_CASE("a row snapshot read by another thread while the rows change is the rows as they were", "[psd][snapshot]") {
    constexpr std::uint64_t kBlocks = 1 << 15;
    constexpr std::size_t kParts = 3, kFloats = RowSnapshot::kBlockRows * 4;  // floats of a block's part
    const bool keep_all = GENERATE(false, true);
    INFO((keep_all ? "every part kept" : "the parts not read yet kept"));
    // parts[p][block * kFloats + j]; the metadata: one word per block.
    std::vector<std::vector<float>> parts(kParts, std::vector<float>(kBlocks * kFloats));
    std::vector<std::uint64_t> meta(kBlocks);
    for (std::size_t p = 0; p < kParts; ++p)
        for (std::size_t i = 0; i < parts[p].size(); ++i) parts[p][i] = static_cast<float>(p * 1000003 + i);
    for (std::uint64_t b = 0; b < kBlocks; ++b) meta[b] = b * 7 + 1;
    const auto parts_then = parts;
    const auto meta_then = meta;

    RowSnapshot snapshot(kBlocks, std::vector<std::size_t>(kParts, kFloats * sizeof(float)), sizeof(std::uint64_t),
                         keep_all);
    std::vector<std::vector<float>> read(kParts, std::vector<float>(kBlocks * kFloats, -1.0f));
    std::vector<std::uint64_t> read_meta(kBlocks * kParts);
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> changes{0};
    std::atomic<bool> bad_record{false};  // a record without the part read (Catch2 asserts on this thread only)
    std::thread writer([&] {
        while (changes < 1000) std::this_thread::yield();  // blocks saved before they are read, too
        for (std::size_t p = 0; p < kParts; ++p)
            for (std::uint64_t b = 0; b < kBlocks; ++b) {
                float* out = read[p].data() + b * kFloats;
                snapshot.read(
                    b, p,
                    [&] {
                        std::memcpy(out, parts[p].data() + b * kFloats, kFloats * sizeof(float));
                        read_meta[b * kParts + p] = meta[b];
                    },
                    [&](const std::byte* record, std::size_t first) {
                        if (p < first) bad_record = true;
                        std::memcpy(&read_meta[b * kParts + p], record, sizeof(std::uint64_t));
                        std::memcpy(out, record + sizeof(std::uint64_t) + (p - first) * kFloats * sizeof(float),
                                    kFloats * sizeof(float));
                    });
            }
        done = true;
    });
    std::mt19937_64 rng(5);
    while (!done) {  // change random blocks (every part and the metadata), saving each first
        const std::uint64_t b = rng() % kBlocks;
        snapshot.before_change(b, [&](std::size_t first, std::byte* record) {
            std::memcpy(record, &meta[b], sizeof(std::uint64_t));
            for (std::size_t p = first; p < kParts; ++p)
                std::memcpy(record + sizeof(std::uint64_t) + (p - first) * kFloats * sizeof(float),
                            parts[p].data() + b * kFloats, kFloats * sizeof(float));
        });
        for (std::size_t p = 0; p < kParts; ++p)
            for (std::size_t j = 0; j < kFloats; ++j) parts[p][b * kFloats + j] += 1.0f;
        meta[b] += 1;
        ++changes;
    }
    writer.join();
    CHECK_FALSE(bad_record);
    INFO(changes << " changes");
    CHECK(changes > 1000);
    for (std::size_t p = 0; p < kParts; ++p) CHECK(read[p] == parts_then[p]);
    for (std::uint64_t b = 0; b < kBlocks; ++b)
        for (std::size_t p = 0; p < kParts; ++p) REQUIRE(read_meta[b * kParts + p] == meta_then[b]);
    CHECK(snapshot.saved_bytes() > 0);
    CHECK(parts != parts_then);
}

TEST_CASE("a row snapshot's saved blocks fill its arena's chunks to the last byte and go on in the next",
          "[psd][snapshot]") {
    // Records of 8 KiB: 1,024 fill an 8 MiB chunk exactly; 3,000 blocks take three chunks.
    constexpr std::uint64_t kBlocks = 3000;
    constexpr std::size_t kBytes = 4096;
    RowSnapshot snapshot(kBlocks, {kBytes, kBytes}, 0, true);
    std::vector<std::byte> block(2 * kBytes);
    for (std::uint64_t b = 0; b < kBlocks; ++b)
        snapshot.before_change(b, [&](std::size_t first, std::byte* record) {
            REQUIRE(first == 0);
            std::memset(record, static_cast<int>(b % 251), 2 * kBytes);
        });
    CHECK(snapshot.saved_bytes() == 3 * (std::size_t{8} << 20));
    for (std::uint64_t b = 0; b < kBlocks; ++b) {
        bool from_record = false;
        snapshot.read(
            b, 0, [] {},
            [&](const std::byte* record, std::size_t) {
                from_record = true;
                std::memcpy(block.data(), record, block.size());
            });
        REQUIRE(from_record);
        REQUIRE(block.front() == static_cast<std::byte>(b % 251));
        REQUIRE(block.back() == static_cast<std::byte>(b % 251));
    }
}
