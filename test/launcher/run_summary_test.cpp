#include "launcher/run_summary.h"

#include <stdlib.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

using namespace psrun::launcher;
using Lines = std::vector<std::string>;

namespace {

nlohmann::json summary_with(nlohmann::json evaluations) {
    return {{"global_step", 5000},
            {"test_accuracy", 0.9916},
            {"images_per_sec", 3668.4},
            {"train_seconds", 136.3},
            {"workers", 2},
            {"start_step", 0},
            {"dataset", "mnist"},
            {"evaluations", std::move(evaluations)}};
}

}  // namespace

TEST_CASE("summary_lines on MNIST: final, best, time to 99.0% and 99.2%, img/s and where the files are", "[summary]") {
    const auto s = summary_with({{{"global_step", 500}, {"test_accuracy", 0.97}, {"elapsed_seconds", 14.2}},
                                 {{"global_step", 2500}, {"test_accuracy", 0.9903}, {"elapsed_seconds", 70.4}},
                                 {{"global_step", 4500}, {"test_accuracy", 0.992}, {"elapsed_seconds", 125.9}},
                                 {{"global_step", 5000}, {"test_accuracy", 0.9916}, {"elapsed_seconds", 140.0}}});
    CHECK(summary_lines(s, "runs/local", {true, true, true}) ==
          Lines{"final test accuracy 99.16% at global step 5000",
                "best test accuracy 99.20% at global step 4500 (4 evaluations)",
                "time to 99.0% in 70 s (global step 2500); 99.2% in 126 s (global step 4500) (seconds since "
                "training started)",
                "3668 img/s over 136.3 s of training (2 workers)", "model dir runs/local (summary.json, metrics.jsonl)",
                "curves: runs/local/curves.png", "TensorBoard: tensorboard --logdir runs/local"});
}

TEST_CASE("summary_lines says what is missing instead of inventing it", "[summary]") {
    auto s = summary_with({{{"global_step", 5000}, {"test_accuracy", 0.9916}}});
    s["start_step"] = 3000;
    const Lines lines = summary_lines(s, "/m", {false, false, false});
    CHECK(lines[1] == "best test accuracy 99.16% at global step 5000 (1 evaluation)");
    CHECK(lines[2] == "time to 99.0%/99.2%: unknown, no evaluation record carries a time");
    CHECK(lines[4] == "model dir /m (summary.json)");
    CHECK(lines[5] == "curves: no curves.png (gnuplot missing?)");
    CHECK(lines[6] == "TensorBoard: no events.out.tfevents.* in the model dir");

    s["evaluations"] = {{{"global_step", 5000}, {"test_accuracy", 0.9916}, {"elapsed_seconds", 50.0}}};
    CHECK(summary_lines(s, "/m", {})[2] ==
          "time to 99.0% in 50 s (global step 5000); 99.2% not reached (seconds since training resumed at global "
          "step 3000)");

    s["evaluations"] = {{{"global_step", 300}, {"test_accuracy", 0.959}, {"elapsed_seconds", 8.2}}};
    CHECK(summary_lines(s, "/m", {})[2] == "time to 99.0% and 99.2% test accuracy: neither reached");

    s.erase("evaluations");
    s.erase("images_per_sec");
    const Lines bare = summary_lines(s, "/m", {});
    CHECK(bare[1] == "no per-evaluation records: best test accuracy and time to targets unknown");
    CHECK(bare.size() == 5);  // no img/s line
}

TEST_CASE("read_run_summary reads the model dir and refuses a missing summary", "[summary]") {
    namespace fs = std::filesystem;
    std::string pattern = (fs::temp_directory_path() / "psrun-summary.XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    const fs::path dir = pattern;
    CHECK_FALSE(read_run_summary(dir.string()));
    std::ofstream(dir / "summary.json") << summary_with(nlohmann::json::array()).dump();
    std::ofstream(dir / "events.out.tfevents.1.host") << "x";
    const auto lines = read_run_summary(dir.string());
    REQUIRE(lines);
    CHECK(lines->back() == "TensorBoard: tensorboard --logdir " + dir.string());
    CHECK((*lines)[lines->size() - 2] == "curves: no curves.png (gnuplot missing?)");
    fs::remove_all(dir);
}

TEST_CASE("read_run_summary reports the test loss of a model without accuracy (a loss in the graph)", "[summary]") {
    namespace fs = std::filesystem;
    std::string pattern = (fs::temp_directory_path() / "psrun-summary.XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    const fs::path dir = pattern;
    auto s = summary_with({{{"global_step", 300}, {"test_accuracy", -1.0}, {"test_loss", 0.25}},
                           {{"global_step", 600}, {"test_accuracy", -1.0}, {"test_loss", 0.1023}}});
    s["global_step"] = 600;
    s["test_accuracy"] = -1.0;
    s["test_loss"] = 0.1023;
    std::ofstream(dir / "summary.json") << s.dump();
    const auto lines = read_run_summary(dir.string());
    REQUIRE(lines);
    CHECK((*lines)[0] == "final test loss 0.1023 at global step 600");
    CHECK((*lines)[1] == "best test loss 0.1023 at global step 600 (2 evaluations)");
    fs::remove_all(dir);
}

TEST_CASE("summary_lines elsewhere than MNIST: time to the best accuracy and to within 1 point of it", "[summary]") {
    auto s = summary_with({{{"global_step", 500}, {"test_accuracy", 0.8455}, {"elapsed_seconds", 14.2}},
                           {{"global_step", 1000}, {"test_accuracy", 0.8881}, {"elapsed_seconds", 28.0}},
                           {{"global_step", 1500}, {"test_accuracy", 0.8973}, {"elapsed_seconds", 41.9}},
                           {{"global_step", 2000}, {"test_accuracy", 0.8969}, {"elapsed_seconds", 55.0}}});
    s["dataset"] = "fashion-mnist";
    s["test_accuracy"] = 0.8969;
    const Lines lines = summary_lines(s, "/m", {});
    CHECK(lines[1] == "best test accuracy 89.73% at global step 1500 (4 evaluations)");
    CHECK(lines[2] ==
          "time to the best test accuracy (89.73%) in 42 s (global step 1500); to within 1 point of it (88.73%) in "
          "28 s (global step 1000) (seconds since training started)");
    // The thresholds the run was given (--target-accuracy, recorded by the chief) win.
    s["targets"] = {{"targets", {{{"kind", "given"}, {"threshold", 0.88}}, {{"kind", "given"}, {"threshold", 0.9}}}}};
    CHECK(summary_lines(s, "/m", {})[2] ==
          "time to 88.0% in 28 s (global step 1000); 90.0% not reached (seconds since training started)");
    // So do thresholds given to run_targets (psrun eval --target-accuracy).
    const auto targets = run_targets(s, {0.85});
    REQUIRE(targets);
    CHECK(targets->line == "time to 85.0% in 28 s (global step 1000) (seconds since training started)");
    CHECK(targets->json["targets"][0]["kind"] == "given");
    CHECK(targets->json["targets"][0]["global_step"] == 1000);
    s.erase("evaluations");
    CHECK_FALSE(run_targets(s, {0.85}));
}
