// End to end with the real daemons on real MNIST: `psrun local --ps K --workers 2` starts psd and
// workerd, the workers train asynchronously through psd, every daemon exits 0 (psd through its
// done-queue), and the chief leaves summary.json, metrics.jsonl, a TensorBoard events file and
// curves.png in the model dir. Uses both cores: not run in parallel with other tests.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "common/event_writer.h"
#include "common/tfrecord.h"
#include "test/integration/integration_util.h"
#include "test/psd/child_process.h"

namespace fs = std::filesystem;
using psrun::test::ChildProcess;

namespace {

// Every records of metrics.jsonl.
std::vector<nlohmann::json> read_metrics(const fs::path& path) {
    std::vector<nlohmann::json> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
}

// Tags of the scalar events in the model dir's single events file.
std::multiset<std::string> event_tags(const fs::path& model_dir) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(model_dir))
        if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(e.path());
    REQUIRE(files.size() == 1);
    auto records = psrun::read_tfrecords(files[0].string());
    REQUIRE(records);
    std::multiset<std::string> tags;
    for (const auto& r : *records) {
        auto ev = psrun::decode_scalar_event(r);
        if (ev) tags.insert(ev->tag);
    }
    return tags;
}

nlohmann::json run_local(const psrun::test::TempTree& tmp, int ps, int steps, int eval_every, std::string* log,
                         const std::vector<std::string>& extra = {}) {
    const fs::path model = tmp.path / "model";
    ChildProcess fetch(psrun::test::build_dir() / "launcher/psrun", {"data", "fetch"},
                       (tmp.path / "fetch.log").string());
    REQUIRE(fetch.wait(300) == 0);  // a no-op once MNIST is in the cache
    std::vector<std::string> args = {"local",
                                     "--ps",
                                     std::to_string(ps),
                                     "--workers",
                                     "2",
                                     "--grace",
                                     "30",
                                     "--",
                                     "--model-dir",
                                     model.string(),
                                     "--batch-size",
                                     "100",
                                     "--learning-rate",
                                     "1e-3",
                                     "--steps",
                                     std::to_string(steps),
                                     "--eval-every",
                                     std::to_string(eval_every),
                                     "--log-every",
                                     "100",
                                     "--threads",
                                     "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    ChildProcess psrun(psrun::test::build_dir() / "launcher/psrun", args, (tmp.path / "psrun.log").string());
    const int code = psrun.wait(400);
    *log = psrun.output();
    INFO(*log);
    REQUIRE(code == 0);
    std::ifstream in(model / "summary.json");
    REQUIRE(in);
    return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("psrun local --ps 1 --workers 2 trains real MNIST to >= 97% with every daemon exiting 0",
          "[integration][mnist]") {
    psrun::test::TempTree tmp;
    std::string log;
    const auto summary = run_local(tmp, 1, 600, 200, &log);
    INFO(log);
    // No overshoot: the global step is exactly --steps.
    CHECK(summary["global_step"].get<int>() == 600);
    CHECK(summary["workers"].get<int>() == 2);
    CHECK(summary["test_accuracy"].get<double>() >= 0.97);
    CHECK(summary["images_per_sec"].get<double>() > 0);
    CHECK(summary["train_seconds"].get<double>() > 0);
    // The chief did only part of the steps: the other worker trained too.
    CHECK(summary["chief_steps"].get<int>() < 600);
    CHECK(summary["chief_steps"].get<int>() > 0);
    // psd left through the done-queue; psrun printed the final accuracy.
    CHECK(log.find("all 2 workers are done") != std::string::npos);
    CHECK(log.find("final test accuracy") != std::string::npos);
    // Async mode blocks on each exchange by default (--overlap off).
    CHECK(log.find("waited (overlapped)") == std::string::npos);
    // Evaluations at 200, 400 and the last step.
    const auto& evals = summary["evaluations"];
    REQUIRE(evals.size() >= 3);
    CHECK(evals.back()["global_step"].get<int>() == 600);
    // MNIST's customary targets, timed by the chief (summary.json) and printed by psrun.
    const auto& targets = summary["targets"]["targets"];
    REQUIRE(targets.size() == 2);
    CHECK(targets[0]["kind"] == "default");
    CHECK(targets[0]["threshold"].get<double>() == 0.99);
    CHECK(targets[1]["threshold"].get<double>() == 0.992);
    CHECK(summary["targets"]["seconds"] == "elapsed");
    CHECK(log.find("time to 99.0%") != std::string::npos);

    const fs::path model = tmp.path / "model";
    const auto metrics = read_metrics(model / "metrics.jsonl");
    int losses = 0, accuracies = 0;
    for (const auto& m : metrics) {
        REQUIRE(m.contains("step"));
        losses += m.contains("loss");
        accuracies += m.contains("test_accuracy");
    }
    CHECK(losses >= 5);
    CHECK(accuracies >= 3);
    const auto tags = event_tags(model);
    CHECK(tags.count("loss") >= 5);
    CHECK(tags.count("test_accuracy") >= 3);
    CHECK(tags.count("images_per_sec") >= 5);
    std::ifstream png(model / "curves.png", std::ios::binary);
    char magic[8] = {};
    png.read(magic, 8);
    CHECK(std::string(magic + 1, 3) == "PNG");
}

TEST_CASE("psrun local with 2 ps shards trains and finishes through both done-queues", "[integration][mnist]") {
    psrun::test::TempTree tmp;
    std::string log;
    // --target-accuracy passes through psrun to the chief, which times it; psrun prints it.
    const auto summary = run_local(tmp, 2, 200, 0, &log, {"--target-accuracy", "85,99.9"});
    INFO(log);
    CHECK(summary["global_step"].get<int>() == 200);
    CHECK(summary["test_accuracy"].get<double>() >= 0.90);
    const auto& targets = summary["targets"]["targets"];
    REQUIRE(targets.size() == 2);
    CHECK(targets[0] == nlohmann::json({{"kind", "given"},
                                        {"threshold", 0.85},
                                        {"reached", true},
                                        {"global_step", 200},
                                        {"seconds", targets[0]["seconds"]}}));
    CHECK(targets[0]["seconds"].get<double>() > 0);
    CHECK(targets[1] == nlohmann::json({{"kind", "given"}, {"threshold", 0.999}, {"reached", false}}));
    CHECK(log.find("; 99.9% not reached (seconds since training started)") != std::string::npos);
    CHECK(log.find("[psd:0] all 2 workers are done") != std::string::npos);
    CHECK(log.find("[psd:1] all 2 workers are done") != std::string::npos);
}

// The overlapped loop against the blocking one (the default), same seed, the default learning
// rate and an odd --steps: both stop exactly at --steps (a gradient computed after psd's last step
// is dropped, the last one sent is applied), every worker ends with DONE, and both converge.
TEST_CASE("--overlap on and off both finish exactly at an odd --steps and converge", "[integration][mnist]") {
    double accuracy[2] = {0, 0};
    for (int on : {1, 0}) {
        psrun::test::TempTree tmp;
        std::string log;
        const auto summary =
            run_local(tmp, 1, 301, 0, &log, {"--overlap", on ? "on" : "off", "--learning-rate", "1e-4"});
        INFO(log);
        CHECK(summary["global_step"].get<int>() == 301);
        CHECK(log.find("\"applied\":301,") != std::string::npos);  // psd applied every step, none more
        CHECK(log.find("all 2 workers are done") != std::string::npos);
        CHECK((log.find("waited (overlapped)") != std::string::npos) == (on == 1));
        accuracy[on] = summary["test_accuracy"].get<double>();
    }
    INFO("test accuracy with overlap " << accuracy[1] << ", without " << accuracy[0]);
    CHECK(accuracy[1] >= 0.88);
    CHECK(accuracy[0] >= 0.88);
}
