// `psrun bench cluster`: the steady-state window read from a chief's metrics.jsonl, and one real
// run (psd + 2 workerd on real MNIST, tiny --steps) whose JSON line has every key, positive.
#include "launcher/cmd_bench_cluster.h"
#include "launcher/steady_rate.h"

#include <algorithm>
#include <vector>

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "test/psd/child_process.h"

namespace fs = std::filesystem;
using psrun::launcher::steady_rate_from_metrics;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "psrun-bench-test.XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

}  // namespace

TEST_CASE("the steady window skips warm-up and the last step's record", "[bench_cluster]") {
    TempDir dir;
    const fs::path metrics = dir.path / "metrics.jsonl";
    {
        std::ofstream out(metrics);
        // Start barrier and warm-up are slow (steps 0..10 took 5 s), the final record includes
        // the last checkpoint (+3 s); in between, 10 steps per second.
        out << R"({"step": 10, "time": 1005.0, "loss": 2.0, "images_per_sec": 1})"
            << "\n";
        out << R"({"step": 20, "time": 1006.0, "loss": 1.0, "images_per_sec": 1})"
            << "\n";
        out << R"({"step": 20, "time": 1006.5, "checkpoint": "/m/ckpt-20"})"
            << "\n";  // not progress
        out << R"({"step": 30, "time": 1007.0, "test_accuracy": 0.9})"
            << "\n";  // not progress
        out << R"({"step": 40, "time": 1008.0, "loss": 0.5, "images_per_sec": 1})"
            << "\n";
        out << "not json\n";
        out << R"({"step": 50, "time": 1012.0, "loss": 0.4, "images_per_sec": 1})"
            << "\n";
    }
    auto rate = steady_rate_from_metrics(metrics.string(), 100, 20, 50);
    REQUIRE(rate);
    CHECK(rate->first_step == 20);
    CHECK(rate->last_step == 40);
    CHECK(rate->seconds == Approx(2.0));
    CHECK(rate->images_per_sec == Approx(1000.0));  // 20 steps x 100 images / 2 s

    auto too_short = steady_rate_from_metrics(metrics.string(), 100, 40, 50);
    REQUIRE_FALSE(too_short);
    CHECK_THAT(too_short.error().message, Catch::Contains("raise --steps"));
    CHECK_FALSE(steady_rate_from_metrics((dir.path / "none.jsonl").string(), 100, 0, 50));
}

TEST_CASE("psrun bench cluster prints one JSON line with positive throughputs", "[bench_cluster][mnist]") {
    TempDir dir;
    const auto psrun = psrun::test::build_dir() / "launcher/psrun";
    psrun::test::ChildProcess fetch(psrun, {"data", "fetch"}, (dir.path / "fetch.log").string());
    REQUIRE(fetch.wait(300) == 0);
    psrun::test::ChildProcess bench(
        psrun,
        {"bench", "cluster", "--ps", "1", "--workers", "2", "--steps", "40", "--batch-size", "20", "--repeat", "3"},
        (dir.path / "bench.log").string());
    const int code = bench.wait(240);
    const std::string out = bench.output();
    INFO(out);
    REQUIRE(code == 0);
    // stdout and stderr share the log here: the JSON line is the one starting with '{'.
    std::istringstream lines(out);
    int json_lines = 0;
    nlohmann::json j;
    for (std::string line; std::getline(lines, line);)
        if (!line.empty() && line[0] == '{') {
            j = nlohmann::json::parse(line);
            ++json_lines;
        }
    REQUIRE(json_lines == 1);
    for (const char* key : {"images_per_sec", "single_process_images_per_sec", "ratio"})
        CHECK(j.at(key).get<double>() > 0);
    CHECK(j.at("loadavg_1m").get<double>() >= 0);
    CHECK(j["ratio"].get<double>() ==
          Approx(j["images_per_sec"].get<double>() / j["single_process_images_per_sec"].get<double>()));
    CHECK(j["ps"] == 1);
    CHECK(j["workers"] == 2);
    CHECK(j["batch_size"] == 20);
    CHECK(j["steps"] == 40);
    CHECK(j["threads_per_worker"] == 1);
    CHECK(j["single_process_threads"] == 2);
    CHECK(j["cluster"]["measured_from_step"].get<int>() >= j["warmup_steps"].get<int>());
    CHECK(j["cluster"]["measured_to_step"].get<int>() < 40);
    CHECK(j["single_process"]["measured_steps"].get<int>() == 40 - j["warmup_steps"].get<int>());
    // --repeat 3: three alternating pairs; the top-level figures are the medians of each side.
    CHECK(j["repeat"] == 3);
    REQUIRE(j["pairs"].size() == 3);
    std::vector<double> cluster, single;
    for (const auto& pair : j["pairs"]) {
        cluster.push_back(pair["images_per_sec"].get<double>());
        single.push_back(pair["single_process_images_per_sec"].get<double>());
        CHECK(pair["ratio"].get<double>() == Approx(cluster.back() / single.back()));
    }
    std::sort(cluster.begin(), cluster.end());
    std::sort(single.begin(), single.end());
    CHECK(j["images_per_sec"].get<double>() == cluster[1]);
    CHECK(j["single_process_images_per_sec"].get<double>() == single[1]);
    // Against this host's f32 peak (common/peak_flops.h): the cluster's 2 x 1 compute threads and
    // the single process's 2, at mnist_deep's 82.05 MFLOP per trained image.
    const auto& peak = j.at("peak");
    CHECK(j["cpu_model"] == peak["cpu_model"]);
    // Sampled 3 times before the first run and after each of the 6: the median of 21.
    CHECK(peak["statistic"] == "median");
    CHECK(peak["samples"] == 21);
    REQUIRE(peak["f32_gflops"].get<double>() > 0);
    CHECK(j["mflop_per_image"].get<double>() == Approx(82.049024));
    CHECK(j["gflops"].get<double>() == Approx(j["images_per_sec"].get<double>() * 82.049024 / 1000));
    const double per_thread = peak["f32_gflops"].get<double>() / peak["threads"].get<double>();
    const double cores = std::min(2.0, peak["cpus"].get<double>());
    CHECK(j["peak_gflops"].get<double>() == Approx(per_thread * cores));
    CHECK(j["fraction_of_peak"].get<double>() == Approx(j["gflops"].get<double>() / j["peak_gflops"].get<double>()));
    CHECK(j["single_process_fraction_of_peak"].get<double>() ==
          Approx(j["single_process_gflops"].get<double>() / j["single_process_peak_gflops"].get<double>()));
    for (const auto& pair : j["pairs"]) {
        CHECK(pair["fraction_of_peak"].get<double>() > 0);
        CHECK(pair["single_process_fraction_of_peak"].get<double>() > 0);
    }
}

TEST_CASE("psrun bench cluster refuses a run too short to measure", "[bench_cluster]") {
    TempDir dir;
    psrun::test::ChildProcess bench(psrun::test::build_dir() / "launcher/psrun",
                                    {"bench", "cluster", "--steps", "10", "--warmup-steps", "9"},
                                    (dir.path / "bench.log").string());
    CHECK(bench.wait(30) == 2);
    CHECK_THAT(bench.output(), Catch::Contains("too little to measure"));
}
