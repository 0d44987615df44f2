#include "workerd/data/data_bench.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "workerd/data/batch_fill.h"
#include "workerd/data/data_sources.h"
#include "workerd/data/example_decoder.h"
#include "workerd/data/image_encoder.h"
#include "workerd/data/record_producer.h"
#include "workerd/data/synthetic_images.h"
#include "workerd/data/tfrecord_writer.h"

namespace psrun::worker {
namespace {

using Clock = std::chrono::steady_clock;
using Bytes = std::vector<std::uint8_t>;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Calls one(i) round-robin over `n` items until `seconds` passed (at least 2n calls); returns calls/s.
template <class F>
Result<double> rate(std::size_t n, double seconds, F&& one) {
    for (std::size_t i = 0; i < n; ++i)  // warm-up: every item once
        PSRUN_TRY(one(i));
    std::size_t calls = 0;
    const auto t0 = Clock::now();
    while (calls < 2 * n || since(t0) < seconds) {
        PSRUN_TRY(one(calls % n));
        ++calls;
    }
    return static_cast<double>(calls) / since(t0);
}

std::string shape_text(const ImageShape& s) {
    return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" + std::to_string(s.width);
}

double mean_size(const std::vector<Bytes>& v) {
    double total = 0;
    for (const auto& b : v) total += static_cast<double>(b.size());
    return v.empty() ? 0 : total / static_cast<double>(v.size());
}

Result<void> write_file(const std::string& path, const Bytes& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) return make_error(ErrorCode::kIo, path + ": cannot write");
    return {};
}

}  // namespace

Result<std::vector<nlohmann::json>> run_data_benchmark(const DataBenchOptions& o) {
    auto shape = parse_image_shape(o.shape);
    if (!shape) return tl::unexpected(shape.error());
    PSRUN_TRY_ASSIGN(auto target_shape, o.target.empty() ? shape : parse_image_shape(o.target));
    if (o.images < 1 || !(o.seconds > 0) || o.threads < 1)
        return make_error(ErrorCode::kInvalidArgument, "--images >= 1, --seconds > 0, --threads >= 1");
    const ImageTarget target{target_shape.channels, target_shape.height, target_shape.width, ResizeMode::kCrop};
    std::vector<nlohmann::json> out;
    auto base = [&](const std::string& format, double per_sec, int threads, double bytes) {
        nlohmann::json j{{"format", format},
                         {"shape", shape_text(*shape)},
                         {"target", shape_text(target_shape)},
                         {"images_per_sec", per_sec},
                         {"threads", threads},
                         {"images_per_sec_per_core", per_sec / threads},
                         {"mpixels_per_sec", per_sec * shape->height * shape->width / 1e6}};
        if (bytes > 0) j["mean_encoded_bytes"] = bytes;
        out.push_back(j);
    };
    ImageDecoder decoder;
    Bytes chw(static_cast<std::size_t>(target.channels * target.height * target.width));
    if (!o.image.empty()) {
        Bytes file;
        PSRUN_TRY(read_whole_file(o.image, file));
        PSRUN_TRY_ASSIGN(auto info, decoder.decode(file, target, chw, o.image));
        const std::string name = to_string(info.format);
        auto line = [&](const std::string& what, double per_sec) {
            base(name + what, per_sec, 1, static_cast<double>(file.size()));
            out.back()["file"] = o.image;
            out.back()["shape"] = std::to_string(info.width) + "x" + std::to_string(info.height);
            out.back()["mpixels_per_sec"] = per_sec * info.width * info.height / 1e6;
        };
        if (info.format == ImageFormat::kJpeg) {  // libjpeg-turbo alone, as tjbench measures it
            JpegDecoder jpeg;
            Bytes hwc;
            auto r = rate(1, o.seconds, [&](std::size_t) -> Result<void> {
                PSRUN_TRY(jpeg.decode(file, o.image, target.channels, 0, 0, ResizeMode::kCrop, hwc));
                return {};
            });
            if (!r) return tl::unexpected(r.error());
            line("-file-decode", *r);
        }
        auto r = rate(1, o.seconds, [&](std::size_t) -> Result<void> {  // the reader's whole path
            PSRUN_TRY(decoder.decode(file, target, chw, o.image));
            return {};
        });
        if (!r) return tl::unexpected(r.error());
        line("-file", *r);
        return out;
    }
    // The synthetic set, encoded both ways.
    std::vector<Bytes> jpegs, pngs;
    std::vector<int> labels;
    for (int i = 0; i < o.images; ++i) {
        const int label = i % 10;
        const Bytes hwc = synthetic_image(*shape, label, 1, static_cast<std::uint64_t>(i));
        auto j = encode_jpeg(hwc, shape->width, shape->height, shape->channels, o.quality);
        auto p = encode_png(hwc, shape->width, shape->height, shape->channels);
        if (!j || !p) return tl::unexpected(!j ? j.error() : p.error());
        jpegs.push_back(std::move(*j));
        pngs.push_back(std::move(*p));
        labels.push_back(label);
    }
    if (!o.save_samples.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(o.save_samples, ec);
        PSRUN_TRY(write_file(o.save_samples + "/sample.jpg", jpegs[0]));
        PSRUN_TRY(write_file(o.save_samples + "/sample.png", pngs[0]));
    }
    const ModelInput model{"bench", target.channels, target.height, target.width, 10};
    auto example_records = [&](const std::vector<Bytes>& images) {
        std::vector<Bytes> records;
        for (std::size_t i = 0; i < images.size(); ++i) {
            const std::int64_t l = labels[i];
            records.push_back(ExampleBuilder()
                                  .add_bytes("image/encoded", images[i])
                                  .add_int64s("image/class/label", {&l, 1})
                                  .serialize());
        }
        return records;
    };
    for (const std::string& format : o.formats) {
        if (format == "jpeg-decode") {
            JpegDecoder jpeg;
            Bytes hwc;
            auto r = rate(jpegs.size(), o.seconds, [&](std::size_t i) -> Result<void> {
                PSRUN_TRY(jpeg.decode(jpegs[i], "bench", shape->channels, 0, 0, ResizeMode::kCrop, hwc));
                return {};
            });
            if (!r) return tl::unexpected(r.error());
            base(format, *r, 1, mean_size(jpegs));
        } else if (format == "jpeg" || format == "png") {
            const auto& set = format == "jpeg" ? jpegs : pngs;
            auto r = rate(set.size(), o.seconds, [&](std::size_t i) -> Result<void> {
                PSRUN_TRY(decoder.decode(set[i], target, chw, "bench"));
                return {};
            });
            if (!r) return tl::unexpected(r.error());
            base(format, *r, 1, mean_size(set));
        } else if (format == "tfrecord-jpeg" || format == "tfrecord-png") {
            // Framing and CRC over an in-memory stream of the records, then Example + image decoding.
            const auto records = example_records(format == "tfrecord-jpeg" ? jpegs : pngs);
            Bytes stream;
            for (const auto& r : records) {
                const Bytes framed = frame_tfrecord(r);
                stream.insert(stream.end(), framed.begin(), framed.end());
            }
            ExampleDecoder ex({model, PixelType::kUint8}, {}, ResizeMode::kCrop);
            LabeledImages slot = make_examples({model, PixelType::kUint8}, 1);
            std::size_t decoded = 0;
            const auto t0 = Clock::now();
            while (decoded < 2 * records.size() || since(t0) < o.seconds) {
                PSRUN_TRY_ASSIGN(auto all, parse_tfrecords(stream, "bench", CorruptRecords::kError));
                for (const auto& r : all) {
                    PSRUN_TRY(ex.decode_example(r, slot, 0, "bench"));
                    ++decoded;
                }
            }
            base(format, static_cast<double>(decoded) / since(t0), 1, mean_size(records));
        } else if (format == "idx") {
            LabeledImages data = make_examples({model, PixelType::kUint8}, 64);
            std::vector<float> batch(64 * chw.size());
            std::vector<std::int32_t> l(64);
            std::vector<std::uint32_t> idx(64);
            for (std::uint32_t i = 0; i < 64; ++i) idx[i] = i;
            auto r = rate(1, o.seconds, [&](std::size_t) -> Result<void> {
                fill_batch(data, idx, batch, l);
                return {};
            });
            if (!r) return tl::unexpected(r.error());
            base(format, *r * 64, 1, 0);
        } else if (format == "stream-tfrecord-jpeg") {
            char tmpl[] = "/tmp/psrun-bench-data-XXXXXX";
            if (::mkdtemp(tmpl) == nullptr) return make_error(ErrorCode::kIo, "cannot create a temporary directory");
            const std::string dir = tmpl;
            const std::string file = dir + "/bench.tfrecord";
            {
                PSRUN_TRY_ASSIGN(auto w, TfrecordWriter::create(file, false));
                for (const auto& r : example_records(jpegs)) PSRUN_TRY(w.write(r));
                PSRUN_TRY(w.close());
            }
            DataOptions d;
            d.train_data = file;
            d.test_data = file;
            d.threads = o.threads;
            d.shuffle_buffer = 1000;
            auto loaded = load_data(d, model, {});
            if (!loaded) {
                std::filesystem::remove_all(dir);
                return tl::unexpected(loaded.error());
            }
            auto source = make_stream_source(*loaded->train.stream, 64, 1, {});
            std::vector<float> batch(64 * chw.size());
            std::vector<std::int32_t> l(64);
            BatchView view{batch, {}, l, {}};
            for (int i = 0; i < 8; ++i) source->next_batch(view);  // the threads started
            std::size_t n = 0;
            const auto t0 = Clock::now();
            while (since(t0) < o.seconds) {
                source->next_batch(view);
                n += 64;
            }
            const double per_sec = static_cast<double>(n) / since(t0);
            source.reset();
            std::filesystem::remove_all(dir);
            base(format, per_sec, o.threads, mean_size(jpegs));
        } else {
            return make_error(ErrorCode::kInvalidArgument,
                              "--formats: unknown '" + format +
                                  "' (jpeg-decode, jpeg, png, tfrecord-jpeg, tfrecord-png, idx, stream-tfrecord-jpeg)");
        }
    }
    return out;
}

}  // namespace psrun::worker
