#include "workerd/data/synthesize.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "common/rng.h"
#include "workerd/data/example_proto.h"
#include "workerd/data/image_encoder.h"
#include "workerd/data/tfrecord_writer.h"

namespace psrun::worker {
namespace {

struct Encoded {
    std::vector<std::vector<std::uint8_t>> records;  // serialized Examples
    std::vector<int> labels;
};

// Encodes pool images t, t + threads, ... (one thread's share of encode_pool); the first
// failure goes to `error`.
void encode_slice(const SynthesizeOptions& o, unsigned t, unsigned threads, Encoded& pool,
                  std::optional<Error>& error) {
    for (std::size_t i = t; i < pool.records.size(); i += threads) {
        const int label = static_cast<int>(i % static_cast<std::size_t>(o.classes));
        const auto hwc = synthetic_image(o.shape, label, o.seed, i);
        auto jpeg = encode_jpeg(hwc, o.shape.width, o.shape.height, o.shape.channels, o.quality);
        if (!jpeg) {
            error = jpeg.error();
            return;
        }
        const std::int64_t l = label;
        pool.records[i] =
            ExampleBuilder().add_bytes("image/encoded", *jpeg).add_int64s("image/class/label", {&l, 1}).serialize();
        pool.labels[i] = label;
    }
}

Result<Encoded> encode_pool(const SynthesizeOptions& o) {
    Encoded pool;
    pool.records.resize(static_cast<std::size_t>(o.distinct));
    pool.labels.resize(static_cast<std::size_t>(o.distinct));
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::optional<Error>> errors(threads);
    std::vector<std::thread> pool_threads;
    for (unsigned t = 0; t < threads; ++t)
        pool_threads.emplace_back([&, t] {
            try {  // nothing may leave a thread (std::terminate): a bad_alloc becomes this thread's error
                encode_slice(o, t, threads, pool, errors[t]);
            } catch (const std::exception& e) {
                errors[t] = Error{ErrorCode::kIo, std::string("encoding the synthetic images failed: ") + e.what()};
            }
        });
    for (auto& t : pool_threads) t.join();
    for (auto& e : errors)
        if (e) return tl::unexpected(*e);
    return pool;
}

// Writes `count` records drawn from the pool by (seed, stream) into `path`; or, with count 0,
// until `bytes` bytes.
// Records are drawn from pool images [lo, hi).
Result<std::uint64_t> write_shard(const std::string& path, const Encoded& pool, std::size_t lo, std::size_t hi,
                                  std::uint64_t count, std::uint64_t bytes, std::uint64_t seed, std::uint64_t stream) {
    PSRUN_TRY_ASSIGN(auto w, TfrecordWriter::create(path, false));
    Rng rng(seed, stream);
    std::uint64_t n = 0;
    while (count ? n < count : w.bytes_written() < bytes) {
        PSRUN_TRY(w.write(pool.records[lo + rng.below(hi - lo)]));
        ++n;
    }
    PSRUN_TRY(w.close());
    return n;
}

std::string shard_name(const std::string& dir, const char* split, int i, int n) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "/%s-%05d-of-%05d.tfrecord", split, i, n);
    return dir + buf;
}

}  // namespace

Result<nlohmann::json> synthesize_tfrecords(const SynthesizeOptions& o) {
    if (o.out.empty()) return make_error(ErrorCode::kInvalidArgument, "give --out DIR");
    if (!(o.gigabytes > 0) || o.classes < 1 || o.distinct < 1 || o.quality < 1 || o.quality > 100 ||
        o.test_images < 0 || o.shards < 0)
        return make_error(ErrorCode::kInvalidArgument,
                          "--gigabytes > 0, --classes >= 1, --distinct >= 1, --quality 1-100, --shards >= 0");
    std::error_code ec;
    std::filesystem::create_directories(o.out, ec);
    if (ec) return make_error(ErrorCode::kIo, o.out + ": cannot create it: " + ec.message());
    const auto t0 = std::chrono::steady_clock::now();
    PSRUN_TRY_ASSIGN(auto pool, encode_pool(o));
    const auto total = static_cast<std::uint64_t>(o.gigabytes * 1e9);
    const int shards = o.shards > 0 ? o.shards : static_cast<int>(std::max<std::uint64_t>(1, total / 256000000));
    const std::uint64_t per_shard = total / static_cast<std::uint64_t>(shards);
    // The last tenth of the pool is the test split's only: test images are never trained on.
    const std::size_t split = pool.records.size() - pool.records.size() / 10;
    std::vector<std::uint64_t> records(static_cast<std::size_t>(shards));
    std::vector<std::optional<Error>> errors(static_cast<std::size_t>(shards));
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<std::thread> writers;
    for (unsigned t = 0; t < threads; ++t)
        writers.emplace_back([&, t] {
            for (int s = static_cast<int>(t); s < shards; s += static_cast<int>(threads)) {
                const auto i = static_cast<std::size_t>(s);
                try {  // nothing may leave a thread (std::terminate)
                    auto n = write_shard(shard_name(o.out, "train", s, shards), pool, 0, split, 0, per_shard, o.seed,
                                         static_cast<std::uint64_t>(s) + 1);
                    if (!n) errors[i] = n.error();
                    else records[i] = *n;
                } catch (const std::exception& e) {
                    errors[i] =
                        Error{ErrorCode::kIo, "writing " + shard_name(o.out, "train", s, shards) + ": " + e.what()};
                }
            }
        });
    for (auto& w : writers) w.join();
    for (auto& e : errors)
        if (e) return tl::unexpected(*e);
    std::uint64_t train_records = 0;
    for (auto r : records) train_records += r;
    const std::string test = shard_name(o.out, "test", 0, 1);
    PSRUN_TRY_ASSIGN(auto test_records,
                     write_shard(test, pool, split < pool.records.size() ? split : 0, pool.records.size(),
                                 static_cast<std::uint64_t>(o.test_images), 0, o.seed, 0));
    std::uint64_t bytes = 0;
    for (int s = 0; s < shards; ++s) bytes += std::filesystem::file_size(shard_name(o.out, "train", s, shards), ec);
    return nlohmann::json{
        {"out", o.out},
        {"train_files", shards},
        {"train_records", train_records},
        {"train_bytes", bytes},
        {"test_records", test_records},
        {"shape",
         std::to_string(o.shape.channels) + "x" + std::to_string(o.shape.height) + "x" + std::to_string(o.shape.width)},
        {"classes", o.classes},
        {"distinct_images", o.distinct},
        {"quality", o.quality},
        {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
    };
}

}  // namespace psrun::worker
