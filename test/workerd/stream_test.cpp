// The streaming pipeline on TFRecord files and image folders: every example once per epoch,
// workers' shares disjoint and covering (by file and by record), the same batches for the same
// seed, evaluation passes in order with a partial last batch, data errors at their place in
// the stream (or skipped and counted), and load_data's choices.
#include <png.h>

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "test/workerd/data_files.h"
#include "workerd/data/data_sources.h"
#include "workerd/data/decode_all.h"
#include "workerd/data/example_proto.h"
#include "workerd/data/image_encoder.h"
#include "workerd/data/stream_pipeline.h"
#include "workerd/data/tfrecord_writer.h"

namespace psrun::worker {
namespace {

using test::Bytes;

// A model of 4 features and 10 classes.
ModelInput features_model() {
    ModelInput m{"m", 1, 1, 4, 10};
    m.input = InputKind::kFeatures;
    m.length = 4;
    return m;
}

// `files` TFRecord files of `per_file` records; record r of file f holds features
// {id, id, id, id} with id = f * per_file + r, and label id % 10.
std::vector<std::string> write_records(const test::DataDir& dir, int files, int per_file) {
    std::vector<std::string> paths;
    for (int f = 0; f < files; ++f) {
        paths.push_back(dir.file("part-" + std::to_string(f) + ".tfrecord"));
        auto w = TfrecordWriter::create(paths.back(), f % 2 == 1);
        REQUIRE(w);
        for (int r = 0; r < per_file; ++r) {
            const float id = static_cast<float>(f * per_file + r);
            const std::vector<float> x{id, id, id, id};
            const std::vector<std::int64_t> y{static_cast<std::int64_t>(f * per_file + r) % 10};
            REQUIRE(w->write(ExampleBuilder().add_floats("x", x).add_int64s("y", y).serialize()));
        }
        REQUIRE(w->close());
    }
    return paths;
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
}

DataOptions record_options(const std::string& train, const std::string& test) {
    DataOptions o;
    o.train_data = train;
    o.test_data = test;
    o.inputs = {"x"};
    o.targets = {"y"};
    o.shuffle_buffer = 16;
    o.threads = 2;
    return o;
}

// The ids (first feature) of `batches` training batches of `source`.
std::vector<int> draw(BatchSource& source, std::size_t batch, int batches) {
    std::vector<int> ids;
    std::vector<float> x(batch * 4);
    std::vector<std::int32_t> y(batch);
    for (int b = 0; b < batches; ++b) {
        BatchView v{x, {}, y, {}};
        source.next_batch(v);
        for (std::size_t i = 0; i < batch; ++i) {
            ids.push_back(static_cast<int>(x[i * 4]));
            CHECK(y[i] == ids.back() % 10);
        }
    }
    return ids;
}

}  // namespace

TEST_CASE("TFRecord streams: epochs cover every record once, seeds replay, shares are disjoint", "[stream]") {
    test::DataDir dir;
    const auto files = write_records(dir, 4, 25);  // 100 records, every other file gzip
    auto data = load_data(record_options(join(files), files[0]), features_model(), {});
    INFO((data ? std::string() : data.error().message));
    REQUIRE(data);
    REQUIRE(data->train.stream);
    CHECK(data->train.size == 0);

    auto one = make_stream_source(*data->train.stream, 10, 7, {});
    const auto epoch0 = draw(*one, 10, 10);
    CHECK(std::set<int>(epoch0.begin(), epoch0.end()).size() == 100);  // an epoch: every record once
    CHECK(epoch0 != [] {
        std::vector<int> v(100);
        for (int i = 0; i < 100; ++i) v[i] = i;
        return v;
    }());
    const auto epoch1 = draw(*one, 10, 10);
    CHECK(std::set<int>(epoch1.begin(), epoch1.end()).size() == 100);
    CHECK(epoch1 != epoch0);  // reshuffled
    auto again = make_stream_source(*data->train.stream, 10, 7, {});
    CHECK(draw(*again, 10, 10) == epoch0);
    auto early = make_stream_source(*data->train.stream, 10, 7, {});
    early->start();  // reading ahead before the first batch changes nothing drawn
    early->start();
    CHECK(draw(*early, 10, 10) == epoch0);
    early->seek(0);
    CHECK(draw(*early, 10, 10) == epoch0);
    // Time in next_batch() is split: blocked on an empty queue (at most the first batch of a
    // freshly started stream here), and handling the batches.
    const DataTime t = early->data_time();
    CHECK(t.longest_wait <= t.waited);
    CHECK(t.handling > 0);
    CHECK(t.total() == Approx(t.waited + t.handling));
    CHECK_FALSE(one->position().exact);

    // Two workers over 4 files: two files each, disjoint, together all.
    std::set<int> seen;
    for (int w = 0; w < 2; ++w) {
        auto s = make_stream_source(*data->train.stream, 10, 7, {w, 2});
        const auto ids = draw(*s, 10, 5);
        const std::set<int> mine(ids.begin(), ids.end());
        CHECK(mine.size() == 50);
        for (int id : mine) CHECK(seen.insert(id).second);
    }
    CHECK(seen.size() == 100);
    // Eight workers over 4 files: records split by (file + record) mod 8.
    seen.clear();
    for (int w = 0; w < 8; ++w) {
        auto s = make_stream_source(*data->train.stream, 1, 7, {w, 8});
        const std::vector<int> ids = draw(*s, 1, w < 4 ? 13 : 12);  // an epoch of this worker's records
        const std::set<int> mine(ids.begin(), ids.end());
        CHECK(mine.size() == ids.size());
        for (int id : mine) CHECK(seen.insert(id).second);
    }
    CHECK(seen.size() == 100);

    // A seek restarts the files in another order (not exact); the data is still all there.
    one->seek(1000);
    CHECK(one->position().examples == 1000);
    const auto after = draw(*one, 10, 10);
    CHECK(std::set<int>(after.begin(), after.end()).size() == 100);
}

TEST_CASE("DataTime splits a call into its wait and the rest", "[stream]") {
    DataTime t;
    t.add(0.003, 0.001);
    t.add(0.002, 0.002);
    t.add(0.004, 0.0);
    CHECK(t.waited == Approx(0.003));
    CHECK(t.longest_wait == Approx(0.002));
    CHECK(t.handling == Approx(0.006));
    t.add(0.001, 0.0015);  // clock reads a hair apart: no negative handling
    CHECK(t.handling == Approx(0.006));
}

TEST_CASE("stream evaluation: one pass in order, a partial last batch", "[stream]") {
    test::DataDir dir;
    const auto files = write_records(dir, 2, 25);
    auto data = load_data(record_options(files[0], join(files)), features_model(), {});
    REQUIRE(data);
    REQUIRE(data->test.stream);
    auto eval = make_stream_eval_source(*data->test.stream);
    for (int pass = 0; pass < 2; ++pass) {
        eval->rewind();
        std::vector<float> x(32 * 4);
        std::vector<std::int32_t> y(32);
        std::vector<int> ids;
        BatchView v{x, {}, y, {}};
        while (const std::size_t n = eval->next(v, 32))
            for (std::size_t i = 0; i < n; ++i) ids.push_back(static_cast<int>(x[i * 4]));
        REQUIRE(ids.size() == 50);
        for (int i = 0; i < 50; ++i) CHECK(ids[static_cast<std::size_t>(i)] == i);
    }
}

TEST_CASE("stream errors: a corrupt record fails at its place naming file and offset, or is skipped", "[stream]") {
    test::DataDir dir;
    auto files = write_records(dir, 1, 40);
    // Flip a byte of record 30's data (records here are 78 bytes framed).
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const auto size = static_cast<std::size_t>(f.tellg());
    REQUIRE(size % 40 == 0);
    const std::size_t record = size / 40;
    f.seekp(static_cast<std::streamoff>(30 * record + 14));
    f.put('\x55');
    f.close();
    DataOptions o = record_options(files[0], files[0]);
    o.shuffle_buffer = 0;
    auto data = load_data(o, features_model(), {});
    REQUIRE(data);
    auto s = make_stream_source(*data->train.stream, 10, 1, {});
    CHECK(draw(*s, 10, 3).size() == 30);  // records 0-29 arrive
    const std::string where = files[0] + ": record 30 at offset " + std::to_string(30 * record);
    CHECK_THROWS_WITH(draw(*s, 10, 1), Catch::StartsWith(where) && Catch::Contains("CRC"));

    o.corrupt = CorruptRecords::kSkip;
    auto skipping = load_data(o, features_model(), {});
    REQUIRE(skipping);
    auto k = make_stream_source(*skipping->train.stream, 13, 1, {});
    const auto ids = draw(*k, 13, 6);  // 78 = two epochs of the 39 good records
    CHECK(std::count(ids.begin(), ids.end(), 30) == 0);
    CHECK(k->skipped_records() >= 1);

    // A missing key is found at load time, listing the keys there are.
    DataOptions wrong = record_options(files[0], files[0]);
    wrong.inputs = {"image/encoded"};
    auto w = load_data(wrong, features_model(), {});
    REQUIRE_FALSE(w);
    CHECK_THAT(w.error().message, Catch::Contains("record 0 at offset 0: has no feature 'image/encoded' (it has: 'x' "
                                                  "(float_list), 'y' (int64_list)); give --inputs"));
}

namespace {

// Serialized examples {x: [id x4], y: [id % 10]}, `end` of them; next() throws once `throw_at`
// were read, describe() for record `bad_describe` (that runs on a decode thread).
class ThrowingProducer final : public RecordProducer {
  public:
    ThrowingProducer(std::uint64_t throw_at, std::uint64_t bad_describe, std::uint64_t end = 1000)
        : throw_at_(throw_at), bad_(bad_describe), end_(end) {}
    Result<bool> next(RawRecord& out) override {
        if (next_ == end_) return false;
        if (next_ == throw_at_) throw std::runtime_error("the disk went away");
        const float id = static_cast<float>(next_);
        const std::vector<float> x{id, id, id, id};
        const std::vector<std::int64_t> y{static_cast<std::int64_t>(next_ % 10)};
        out.bytes = ExampleBuilder().add_floats("x", x).add_int64s("y", y).serialize();
        out.index = next_++;
        return true;
    }
    std::string describe(const RawRecord& r) const override {
        if (r.index == bad_) throw std::bad_alloc();
        return "record " + std::to_string(r.index);
    }
    bool examples() const override { return true; }

  private:
    std::uint64_t throw_at_, bad_, end_, next_ = 0;
};

PipelineConfig throwing_config() {
    PipelineConfig c;
    c.layout = ExampleLayout{features_model(), PixelType::kFloat32};
    c.keys = RecordKeys{{"x"}, {"y"}};
    c.batch_size = 10;
    c.shuffle_buffer = 0;
    c.threads = 2;
    return c;
}

}  // namespace

// Issue 39: an exception on a pipeline thread was std::terminate.
TEST_CASE("a reader or decoder that throws fails the stream with an error, not terminate", "[stream]") {
    SECTION("the reader thread") {
        StreamPipeline p(throwing_config(), std::make_unique<ThrowingProducer>(25, 1000));
        std::size_t good = 0;
        auto drain = [&] {
            while (auto b = p.pop()) {
                good += b->valid;
                p.recycle(std::move(b));
            }
        };
        CHECK_THROWS_WITH(drain(), Catch::Contains("reader thread failed: the disk went away"));
        CHECK(good <= 20);
    }
    SECTION("a decode thread") {
        StreamPipeline p(throwing_config(), std::make_unique<ThrowingProducer>(5000, 12));
        auto drain = [&] {
            while (auto b = p.pop()) p.recycle(std::move(b));
        };
        CHECK_THROWS_WITH(drain(), Catch::Contains("decoder thread failed"));
    }
    SECTION("decode_all's threads") {
        std::uint64_t skipped = 0;
        PipelineConfig c = throwing_config();
        c.corrupt = CorruptRecords::kSkip;        // an exception is no corrupt record: it fails even so
        ThrowingProducer producer(5000, 12, 40);  // next() runs on the calling thread: only describe() throws
        auto all = decode_all(producer, c, 2, skipped);
        REQUIRE_FALSE(all);
        CHECK_THAT(all.error().message, Catch::Contains("decoding the data failed"));
    }
}

// Issue 38 item 5: a thread the host refuses was std::terminate ("--data-threads 100000"). Every
// new thread's stack is 1 GiB here and the address space has room for about three more, so the
// pipeline's fourth thread (and decode_all's) fails to start: an error that says what to change.
TEST_CASE("a thread the host refuses fails the pipeline with an error, not terminate", "[stream]") {
    pthread_attr_t old_attr, big;
    REQUIRE(pthread_getattr_default_np(&old_attr) == 0);
    pthread_attr_init(&big);
    pthread_attr_setstacksize(&big, std::size_t{1} << 30);
    rlimit old_as{};
    REQUIRE(getrlimit(RLIMIT_AS, &old_as) == 0);
    std::ifstream statm("/proc/self/statm");
    std::uint64_t vm_pages = 0;
    statm >> vm_pages;
    REQUIRE(vm_pages > 0);
    std::string pipeline_error, decode_all_error;
    {
        PipelineConfig c = throwing_config();
        c.threads = 16;
        ThrowingProducer producer(5000, 5000, 40);
        REQUIRE(pthread_setattr_default_np(&big) == 0);
        const rlimit tight{vm_pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)) + (std::uint64_t{7} << 29),
                           old_as.rlim_max};
        setrlimit(RLIMIT_AS, &tight);
        try {
            StreamPipeline p(c, std::make_unique<ThrowingProducer>(5000, 5000));
        } catch (const std::exception& e) {
            pipeline_error = e.what();
        }
        std::uint64_t skipped = 0;
        auto all = decode_all(producer, c, 16, skipped);
        if (!all) decode_all_error = all.error().message;
        setrlimit(RLIMIT_AS, &old_as);
        pthread_setattr_default_np(&old_attr);
    }
    pthread_attr_destroy(&big);
    pthread_attr_destroy(&old_attr);
    CHECK_THAT(pipeline_error, Catch::Contains("data pipeline: the host refused thread") &&
                                   Catch::Contains("of 18 (16 decoding threads)") &&
                                   Catch::Contains("give fewer --data-threads"));
    CHECK_THAT(decode_all_error, Catch::Contains("the host refused thread") && Catch::Contains("of 16"));
}

TEST_CASE("image folders: in memory or streamed, the same examples; PNG and JPEG mixed", "[stream]") {
    test::DataDir dir;
    namespace fs = std::filesystem;
    // 2 classes x 12 images of 6 x 6 gray: class c, image i has every pixel 20 * i + c.
    for (int c = 0; c < 2; ++c) {
        fs::create_directories(dir.path / "train" / ("class" + std::to_string(c)));
        for (int i = 0; i < 12; ++i) {
            const Bytes px(36, static_cast<std::uint8_t>(20 * i + c));
            auto img = i % 2 ? encode_jpeg(px, 6, 6, 1, 100) : encode_png(px, 6, 6, 1);
            REQUIRE(img);
            dir.write("train/class" + std::to_string(c) + "/" + std::to_string(i) + (i % 2 ? ".jpg" : ".png"), *img);
        }
    }
    ModelInput m{"tiny", 1, 6, 6, 2};
    DataOptions o;
    o.train_data = dir.file("train");
    o.validation_split = 0.25;
    o.threads = 2;
    auto memory = load_data(o, m, {});
    INFO((memory ? std::string() : memory.error().message));
    REQUIRE(memory);
    REQUIRE(memory->train.memory);
    CHECK(memory->train.class_names == std::vector<std::string>{"class0", "class1"});
    CHECK(memory->train.size + memory->test.size == 24);
    o.stream = StreamMode::kOn;
    auto streamed = load_data(o, m, {});
    REQUIRE(streamed);
    REQUIRE(streamed->train.stream);
    const std::size_t n = memory->train.size;
    auto s = make_stream_source(*streamed->train.stream, n, 3, {});
    std::vector<float> x(n * 36);
    std::vector<std::int32_t> y(n);
    BatchView v{x, {}, y, {}};
    s->next_batch(v);
    std::multiset<std::pair<int, int>> from_stream, from_memory;
    for (std::size_t i = 0; i < n; ++i) {
        from_stream.insert({static_cast<int>(std::lround(x[i * 36] * 255)), y[i]});
        from_memory.insert({memory->train.memory->images.u8[i * 36], memory->train.memory->labels[i]});
    }
    CHECK(from_stream == from_memory);
    for (const auto& [pixel, label] : from_stream) CHECK(std::abs(pixel % 20 - label) <= 1);
    CHECK(s->position().exact);
    CHECK(s->position().epoch == 1);
}

}  // namespace psrun::worker
