// `psrun eval` and `psrun predict` (issue 13) end to end with the real binaries on real MNIST: a
// short mnist_softmax run (1 psd, 1 worker) into a temp model dir, then
//  - eval: its accuracy is the run's own final evaluation (summary.json), the confusion matrix
//    rows hold the test split's per-class counts, precision and recall follow from the matrix,
//    confusion.png is a PNG;
//  - predict: its arg-max on the IDX test images agrees with eval's diagonal, --output is a
//    .npy numpy reads with rows summing to 1, and PGM (P5, P2) and PNG files of test images give
//    the class and probability the same image gets in the IDX batch;
//  - the checkpoint exported to ONNX (psrun export) gives the same accuracy and classes
//    through --onnx;
//  - each error (no checkpoint, a damaged one, labels != images, a wrong image shape, an
//    unknown file type) exits 2 with a message saying what is wrong.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test/integration/integration_util.h"
#include "test/psd/child_process.h"
#include "workerd/data/dataset_fetch.h"
#include "workerd/data/idx_reader.h"

namespace fs = std::filesystem;
using psrun::test::ChildProcess;

namespace {

const fs::path kPsrun = psrun::test::build_dir() / "launcher/psrun";

struct Run {
    int code;
    std::string output;  // stdout and stderr
};

Run psrun_cmd(const fs::path& tmp, const std::vector<std::string>& args, const std::string& name) {
    ChildProcess p(kPsrun, args, (tmp / (name + ".log")).string());
    const int code = p.wait(120);
    return {code, p.output()};
}

// "<name> <class> <probability>" lines of predict's output, by name.
std::map<std::string, std::pair<int, double>> predictions(const std::string& output) {
    std::map<std::string, std::pair<int, double>> out;
    std::istringstream in(output);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("psrun", 0) == 0) continue;
        std::istringstream fields(line);
        std::string name;
        int cls = -1;
        double p = -1;
        if (fields >> name >> cls >> p) out[name] = {cls, p};
    }
    return out;
}

void write_bytes(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
    REQUIRE(out);
}

// Image `index` of the IDX test images as a binary (P5) or ASCII (P2) PGM.
std::string pgm(const psrun::worker::ImageArray& images, std::size_t index, bool ascii) {
    const std::size_t n = images.example_size();
    std::string out = std::string(ascii ? "P2" : "P5") + "\n# MNIST test image\n28 28\n255\n";
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint8_t v = images.u8[index * n + i];
        if (ascii) out += std::to_string(v) + (i % 28 == 27 ? "\n" : " ");
        else out += static_cast<char>(v);
    }
    return out;
}

// Writes image `index` of an IDX file as PNG with python3's zlib: gray, or RGB with r = g = b.
int write_png(const fs::path& idx, std::size_t index, const fs::path& out, bool rgb, int side = 28) {
    const std::string script =
        "import struct, sys, zlib\n"
        "idx, i, out, rgb, side = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == '1', int(sys.argv[5])\n"
        "px = open(idx, 'rb').read()[16 + i * 784:16 + (i + 1) * 784]\n"
        "rows = b''.join(b'\\0' + bytes(px[(y % 28) * 28 + (x % 28)] for x in range(side) for _ in range(3 if rgb else "
        "1))"
        " for y in range(side))\n"
        "chunk = lambda t, d: struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))\n"
        "hdr = struct.pack('>IIBBBBB', side, side, 8, 2 if rgb else 0, 0, 0, 0)\n"
        "open(out, 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', hdr) + chunk(b'IDAT', zlib.compress(rows))"
        " + chunk(b'IEND', b''))\n";
    const fs::path py = out.string() + ".py";
    write_bytes(py, script);
    const std::string cmd = "timeout 60 /usr/bin/python3 " + py.string() + " " + idx.string() + " " +
                            std::to_string(index) + " " + out.string() + " " + (rgb ? "1" : "0") + " " +
                            std::to_string(side);
    return std::system(cmd.c_str());
}

}  // namespace

TEST_CASE("psrun eval and predict on a short mnist_softmax run", "[integration][predict]") {
    psrun::test::TempTree tmp;
    const fs::path model = tmp.path / "model";
    REQUIRE(psrun_cmd(tmp.path, {"data", "fetch"}, "fetch").code == 0);
    const std::string data_dir = psrun::worker::default_data_dir(psrun::worker::DatasetKind::kMnist);
    auto test_split = psrun::worker::load_split(data_dir, "t10k");
    REQUIRE(test_split);
    fs::path idx_images = fs::path(data_dir) / "t10k-images-idx3-ubyte";
    if (!fs::exists(idx_images)) idx_images += ".gz";
    fs::path idx_labels = fs::path(data_dir) / "t10k-labels-idx1-ubyte";
    if (!fs::exists(idx_labels)) idx_labels += ".gz";

    {
        ChildProcess train(kPsrun, {"local",       "--ps",         "1",       "--workers", "1",
                                    "--grace",     "20",           "--",      "--model",   "mnist_softmax",
                                    "--model-dir", model.string(), "--steps", "300",       "--checkpoint-steps",
                                    "150",         "--log-every",  "100",     "--threads", "1"},
                           (tmp.path / "train.log").string());
        const int code = train.wait(240);
        INFO(train.output());
        REQUIRE(code == 0);
    }
    std::ifstream summary_in(model / "summary.json");
    const auto summary = nlohmann::json::parse(summary_in);
    const double run_accuracy = summary["test_accuracy"].get<double>();

    // eval: the run's own accuracy, a consistent matrix, a PNG.
    const fs::path out = tmp.path / "eval-out";
    const Run eval = psrun_cmd(tmp.path, {"eval", "--model-dir", model.string(), "-o", out.string()}, "eval");
    INFO(eval.output);
    REQUIRE(eval.code == 0);
    CHECK_THAT(eval.output,
               Catch::Contains("accuracy") && Catch::Contains("precision") && Catch::Contains("confusion matrix"));
    std::ifstream eval_in(out / "eval.json");
    const auto report = nlohmann::json::parse(eval_in);
    CHECK(std::abs(report["accuracy"].get<double>() - run_accuracy) * 100 <= 0.05);
    CHECK(report["step"].get<int>() == 300);
    const auto confusion = report["confusion"].get<std::vector<std::vector<std::int64_t>>>();
    REQUIRE(confusion.size() == 10);
    std::vector<std::int64_t> per_class(10, 0);
    for (auto label : test_split->labels) ++per_class[static_cast<std::size_t>(label)];
    std::int64_t trace = 0;
    for (std::size_t c = 0; c < 10; ++c) {
        std::int64_t row = 0, column = 0;
        for (std::size_t k = 0; k < 10; ++k) row += confusion[c][k], column += confusion[k][c];
        CHECK(row == per_class[c]);  // 980 zeros, 1135 ones, ...
        CHECK(report["recall"][c].get<double>() == Approx(double(confusion[c][c]) / double(row)));
        CHECK(report["precision"][c].get<double>() == Approx(double(confusion[c][c]) / double(column)));
        trace += confusion[c][c];
    }
    CHECK(report["correct"].get<std::int64_t>() == trace);
    CHECK(double(trace) / 10000 == Approx(report["accuracy"].get<double>()));
    // The training run's time to its targets, from summary.json: MNIST's, unreached by softmax
    // regression; --target-accuracy asks for others (the run evaluated once, at step 300).
    CHECK_THAT(eval.output, Catch::Contains("training run: time to 99.0% and 99.2% test accuracy: neither reached"));
    CHECK(report["training_targets"]["targets"][0]["kind"] == "default");
    const Run low = psrun_cmd(
        tmp.path,
        {"eval", "--model-dir", model.string(), "-o", (tmp.path / "low").string(), "--target-accuracy", "50,99.9"},
        "eval-low");
    INFO(low.output);
    CHECK(low.code == 0);
    CHECK_THAT(low.output,
               Catch::Contains("training run: time to 50.0% in ") &&
                   Catch::Contains("(global step 300); 99.9% not reached (seconds since training started)"));
    {
        std::ifstream png(out / "confusion.png", std::ios::binary);
        std::string magic(8, '\0');
        png.read(magic.data(), 8);
        CHECK(magic == "\x89PNG\r\n\x1a\n");
    }

    // predict on the IDX images: the arg-max agrees with eval's diagonal.
    const Run idx =
        psrun_cmd(tmp.path, {"predict", "--model-dir", model.string(), "--images", idx_images.string()}, "predict-idx");
    REQUIRE(idx.code == 0);
    const auto by_index = predictions(idx.output);
    REQUIRE(by_index.size() == 10000);
    std::int64_t agree = 0;
    for (std::size_t i = 0; i < 10000; ++i) agree += by_index.at(std::to_string(i)).first == test_split->labels[i];
    CHECK(agree == trace);

    // --output: numpy reads it, [10000, 10], rows sum to 1, the same arg-max count.
    const fs::path npy = tmp.path / "probs.npy";
    REQUIRE(
        psrun_cmd(tmp.path,
                  {"predict", "--model-dir", model.string(), "--images", idx_images.string(), "--output", npy.string()},
                  "predict-npy")
            .code == 0);
    const std::string check = "timeout 60 /usr/bin/python3 -c \"import numpy as np, sys; p = np.load('" + npy.string() +
                              "'); assert p.dtype == np.float32 and p.shape == (10000, 10), p.shape; "
                              "assert np.allclose(p.sum(axis=1), 1, atol=1e-5); "
                              "sys.exit(0 if int(p.argmax(axis=1).sum()) == " +
                              std::to_string([&] {
                                  std::int64_t s = 0;
                                  for (const auto& [name, v] : by_index) s += v.first;
                                  return s;
                              }()) +
                              " else 3)\"";
    CHECK(std::system(check.c_str()) == 0);

    // Single images as PGM (binary, ASCII) and PNG (gray; RGB converted to gray) against the batch.
    for (std::size_t index : {std::size_t{0}, std::size_t{8}}) {
        const fs::path p5 = tmp.path / ("img" + std::to_string(index) + ".pgm");
        const fs::path p2 = tmp.path / ("img" + std::to_string(index) + "-ascii.pgm");
        const fs::path gray = tmp.path / ("img" + std::to_string(index) + ".png");
        const fs::path rgb = tmp.path / ("img" + std::to_string(index) + "-rgb.png");
        write_bytes(p5, pgm(test_split->images, index, false));
        write_bytes(p2, pgm(test_split->images, index, true));
        REQUIRE(write_png(idx_images, index, gray, false) == 0);
        REQUIRE(write_png(idx_images, index, rgb, true) == 0);
        const Run single = psrun_cmd(tmp.path,
                                     {"predict", "--model-dir", model.string(), "--images", p5.string(), p2.string(),
                                      gray.string(), rgb.string()},
                                     "predict-single");
        INFO(single.output);
        REQUIRE(single.code == 0);
        CHECK_THAT(single.output, Catch::Contains("colour PNG read as gray"));
        const auto got = predictions(single.output);
        const auto& want = by_index.at(std::to_string(index));
        for (const auto& f : {p5, p2, gray}) {
            REQUIRE(got.count(f.string()) == 1);
            CHECK(got.at(f.string()).first == want.first);
            CHECK(got.at(f.string()).second == Approx(want.second).margin(2e-6));
        }
        CHECK(got.at(rgb.string()).first == want.first);
    }

    // The same checkpoint exported to ONNX (psrun export) and read back through the importer:
    // eval gives the same accuracy, predict the same classes.
    const fs::path onnx = tmp.path / "onnx" / "model.onnx";
    fs::create_directories(onnx.parent_path());
    {
        const Run exported =
            psrun_cmd(tmp.path, {"export", "--model-dir", model.string(), "-o", onnx.string()}, "export");
        INFO(exported.output);
        REQUIRE(exported.code == 0);
        const Run onnx_eval = psrun_cmd(tmp.path, {"eval", "--onnx", onnx.string()}, "eval-onnx");
        INFO(onnx_eval.output);
        REQUIRE(onnx_eval.code == 0);
        std::ifstream in(onnx.parent_path() / "eval.json");  // next to the ONNX file by default
        const auto onnx_report = nlohmann::json::parse(in);
        CHECK(std::abs(onnx_report["accuracy"].get<double>() - report["accuracy"].get<double>()) * 100 <= 0.05);
        CHECK(onnx_report["step"].get<int>() == -1);
        const Run onnx_idx =
            psrun_cmd(tmp.path, {"predict", "--onnx", onnx.string(), "--images", idx_images.string()}, "predict-onnx");
        REQUIRE(onnx_idx.code == 0);
        const auto onnx_pred = predictions(onnx_idx.output);
        REQUIRE(onnx_pred.size() == 10000);
        std::int64_t same = 0;
        for (const auto& [name, v] : onnx_pred) same += v.first == by_index.at(name).first;
        CHECK(same >= 9995);  // an exported graph holds the same floats; ties may break apart
    }

    // --checkpoint: the older checkpoint loads.
    CHECK(psrun_cmd(tmp.path,
                    {"eval", "--model-dir", model.string(), "--checkpoint", "150", "-o", (tmp.path / "e150").string()},
                    "eval-150")
              .code == 0);

    {  // errors exit 2 saying what is wrong
        auto expect = [&](const std::vector<std::string>& args, const std::string& message) {
            const Run r = psrun_cmd(tmp.path, args, "error");
            INFO(r.output);
            CHECK(r.code == 2);
            CHECK_THAT(r.output, Catch::Contains(message));
        };
        const fs::path empty = tmp.path / "empty";
        fs::create_directories(empty);
        expect({"eval", "--model-dir", empty.string()}, "holds no checkpoint");
        expect({"predict", "--model-dir", empty.string(), "--images", idx_images.string()}, "holds no checkpoint");
        expect({"eval", "--model-dir", model.string(), "--checkpoint", "123"}, "has no checkpoint of step 123");

        // A damaged newest checkpoint: named, with the older one that verifies as the way out.
        const fs::path damaged = tmp.path / "damaged";
        fs::create_directories(damaged);
        for (const char* c : {"ckpt-0000000150", "ckpt-0000000300"})
            fs::copy(model / c, damaged / c, fs::copy_options::recursive);
        psrun::test::flip_byte(damaged / "ckpt-0000000300" / "ps-0-of-1.tensors", 4096);
        expect({"eval", "--model-dir", damaged.string()}, "ps-0-of-1.tensors");
        expect({"eval", "--model-dir", damaged.string()}, "use --checkpoint 150");

        // 5 labels for 10000 images.
        const fs::path labels5 = tmp.path / "labels5";
        write_bytes(labels5, std::string("\0\0\x08\x01\0\0\0\x05\x01\x02\x03\x04\x05", 13));
        expect({"eval", "--model-dir", model.string(), "--test-images", idx_images.string(), "--test-labels",
                labels5.string()},
               "holds 5 labels but");

        // Wrong shapes: a 20x20 PGM and PNG, a (3, 32, 32) .npy.
        const fs::path small = tmp.path / "small.pgm";
        write_bytes(small, "P5\n20 20\n255\n" + std::string(400, '\x10'));
        expect({"predict", "--model-dir", model.string(), "--images", small.string()}, "resize the image to 28x28");
        const fs::path small_png = tmp.path / "small.png";
        REQUIRE(write_png(idx_images, 0, small_png, false, 20) == 0);
        expect({"predict", "--model-dir", model.string(), "--images", small_png.string()}, "are 1x20x20 (CxHxW)");
        const fs::path npy32 = tmp.path / "x32.npy";
        std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 32, 32), }";
        header.append(63 - (10 + header.size()) % 64, ' ');
        header += '\n';
        write_bytes(npy32, std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header +
                               std::string(3 * 32 * 32, '\0'));
        expect({"predict", "--model-dir", model.string(), "--images", npy32.string()}, "takes 1x28x28");

        const fs::path text = tmp.path / "notes.txt";
        write_bytes(text, "these are not pixels\n");
        expect({"predict", "--model-dir", model.string(), "--images", text.string()}, "unknown image file type");
        expect({"predict", "--model-dir", model.string(), "--onnx", "x.onnx", "--images", text.string()}, "excludes");
        expect({"predict", "--onnx", (tmp.path / "missing.onnx").string(), "--images", text.string()}, "missing.onnx");
        expect({"predict", "--onnx", text.string(), "--images", idx_images.string()}, "notes.txt");
        expect({"eval", "--onnx", onnx.string(), "--checkpoint", "150"}, "an ONNX file holds one set of parameters");
        expect({"eval", "--onnx", onnx.string(), "--target-accuracy", "99"}, "--target-accuracy needs --model-dir");
        expect({"eval", "--model-dir", model.string(), "--target-accuracy", "99,x"}, "'x' is not a number");
    }
}
