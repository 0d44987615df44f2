// BatchNorm's running statistics through a parameter-server job, end to end with the real
// psrun, psd and workerd on real MNIST (docs/models.md "Operator kinds"): a small CNN with
// batch_norm after both convs and the hidden dense layer (and a layer_norm) trains with
// `psrun local --ps 2 --workers 2`, the state tensors sharded over both psd. Evaluation runs
// on the running statistics only, so:
//  - the trained model evaluates well (the workers' deltas moved the statistics on psd);
//  - the same run with momentum 0 (statistics never moved: mean 0, variance 1) evaluates far
//    worse, so the first figure is the statistics' doing;
//  - `psrun export` writes them into the ONNX file, and `psrun eval --onnx` of that file gives
//    the run's own final accuracy (the statistics were checkpointed and exported).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test/integration/integration_util.h"
#include "test/psd/child_process.h"

namespace fs = std::filesystem;
using psrun::test::ChildProcess;

namespace {

fs::path exe(const char* rel) { return psrun::test::build_dir() / rel; }

nlohmann::json bn_cnn(double momentum) {
    auto bn = [&](const char* name) {
        return nlohmann::json{{"kind", "batch_norm"}, {"name", name}, {"momentum", momentum}};
    };
    return {
        {"name", "bn_cnn"},
        {"input", {{"channels", 1}, {"height", 28}, {"width", 28}}},
        {"classes", 10},
        {"layers",
         {{{"kind", "conv2d"}, {"name", "conv1"}, {"filters", 16}, {"kernel", 5}, {"padding", "same"}, {"bias", false}},
          bn("bn1"),
          {{"kind", "relu"}},
          {{"kind", "max_pool"}, {"window", 2}},
          {{"kind", "conv2d"}, {"name", "conv2"}, {"filters", 32}, {"kernel", 5}, {"padding", "same"}, {"bias", false}},
          bn("bn2"),
          {{"kind", "relu"}},
          {{"kind", "max_pool"}, {"window", 2}},
          {{"kind", "dense"}, {"name", "fc1"}, {"units", 128}, {"bias", false}},
          bn("bn3"),
          {{"kind", "relu"}},
          {{"kind", "layer_norm"}, {"name", "ln"}},
          {{"kind", "dense"}, {"name", "fc2"}, {"units", 10}}}},
        {"loss", {{"kind", "softmax_cross_entropy"}, {"reduction", "mean"}}},
        {"recipe", {{"optimizer", "adam"}, {"learning_rate", 1e-3}, {"batch_size", 64}}}};
}

nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    REQUIRE(in);
    return nlohmann::json::parse(in);
}

// Trains `model` for 300 steps; the run's final test accuracy (on the running statistics).
double train(const fs::path& dir, const nlohmann::json& model) {
    fs::create_directories(dir);
    std::ofstream(dir / "model.json") << model.dump(2);
    ChildProcess run(
        exe("launcher/psrun"),
        {"local", "--ps", "2", "--workers", "2", "--grace", "20", "--", "--model", (dir / "model.json").string(),
         "--model-dir", (dir / "run").string(), "--steps", "300", "--eval-every", "0", "--threads", "1"},
        (dir / "run.log").string());
    const int rc = run.wait(240);
    INFO("log: " << (dir / "run.log").string());
    REQUIRE(rc == 0);
    return read_json(dir / "run" / "summary.json").at("test_accuracy").get<double>();
}

}  // namespace

TEST_CASE("batch_norm's running statistics move on psd, are checkpointed and exported, and evaluation uses them",
          "[integration][batch_norm]") {
    psrun::test::TempTree tmp;
    ChildProcess fetch(exe("launcher/psrun"), {"data", "fetch"}, (tmp.path / "fetch.log").string());
    REQUIRE(fetch.wait(300) == 0);

    const double trained = train(tmp.path / "moving", bn_cnn(0.1));
    CHECK(trained >= 0.9);
    const double frozen = train(tmp.path / "frozen", bn_cnn(0.0));
    CHECK(frozen <= trained - 0.1);

    const fs::path onnx = tmp.path / "bn.onnx";
    ChildProcess exp(exe("launcher/psrun"),
                     {"export", "--model-dir", (tmp.path / "moving" / "run").string(), "-o", onnx.string()},
                     (tmp.path / "export.log").string());
    REQUIRE(exp.wait(120) == 0);
    const fs::path eval_dir = tmp.path / "eval";
    ChildProcess eval(exe("launcher/psrun"), {"eval", "--onnx", onnx.string(), "--output-dir", eval_dir.string()},
                      (tmp.path / "eval.log").string());
    REQUIRE(eval.wait(300) == 0);
    std::ifstream log(tmp.path / "eval.log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    INFO(text);
    CHECK(read_json(eval_dir / "eval.json").at("accuracy").get<double>() == Approx(trained).margin(1e-6));
}
