// Preemption and chief failures end to end (real psrun, psd and workerd, real MNIST):
//  - SIGTERM to `psrun local` mid-training: a coordinated checkpoint of every shard (optimizer
//    slots, global step, data position) within 10 s of the signal, every process exits, psrun
//    exits 75; the same command with more steps resumes from exactly that step;
//  - SIGKILL of the chief while psd lives: a restarted chief continues from psd's parameters;
//  - SIGKILL of the chief under `psrun local` (the whole job stops): the rerun resumes from the
//    last periodic checkpoint, losing at most one checkpoint interval.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/checkpoint_store.h"
#include "common/exit_codes.h"
#include "common/job_keys.h"
#include "common/result.h"
#include "common/tensor_file.h"
#include "test/integration/integration_util.h"
#include "test/psd/child_process.h"

namespace fs = std::filesystem;
using psrun::test::ChildProcess;
using Clock = std::chrono::steady_clock;

namespace {

fs::path exe(const char* rel) { return psrun::test::build_dir() / rel; }

std::vector<std::string> local_args(int ps, int workers, const fs::path& model, int steps,
                                    std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"local",
                                  "--ps",
                                  std::to_string(ps),
                                  "--workers",
                                  std::to_string(workers),
                                  "--grace",
                                  "20",
                                  "--",
                                  "--model-dir",
                                  model.string(),
                                  "--batch-size",
                                  "50",
                                  "--learning-rate",
                                  "1e-3",
                                  "--steps",
                                  std::to_string(steps),
                                  "--eval-every",
                                  "0",
                                  "--log-every",
                                  "10",
                                  "--threads",
                                  "1"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

// All integers captured by the first group of `pattern` in `text`, in order.
std::vector<long> capture_all(const std::string& text, const std::string& pattern) {
    std::vector<long> out;
    const std::regex re(pattern);
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
        out.push_back(std::stol((*it)[1].str()));
    return out;
}

// Waits until the chief's progress lines ("step G/LAST") reach global step `min_step`.
bool wait_for_step(const ChildProcess& p, long min_step, long last, double seconds) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    const std::string pattern = R"(step (\d+)/)" + std::to_string(last) + " ";
    while (Clock::now() < deadline) {
        const auto steps = capture_all(p.output(), pattern);
        if (!steps.empty() && steps.back() >= min_step) return true;
        if (!p.running()) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
}

nlohmann::json latest_manifest(const fs::path& model) {
    auto latest = psrun::CheckpointStore(model.string(), 100).latest_valid(nullptr);
    REQUIRE(latest);
    auto manifest = psrun::CheckpointStore::read_manifest(*latest);
    REQUIRE(manifest);
    return *manifest;
}

void fetch_mnist(const fs::path& tmp) {
    ChildProcess fetch(exe("launcher/psrun"), {"data", "fetch"}, (tmp / "fetch.log").string());
    REQUIRE(fetch.wait(300) == 0);
}

}  // namespace

TEST_CASE("SIGTERM to psrun local: checkpoint of every shard within 10 s, exit 75, rerun resumes",
          "[integration][preemption]") {
    // Overlapped (workerd/step_loop.h): the exchange in flight is settled before the checkpoint.
    // With one psd only: each psd starts draining on its own SIGTERM, so an exchange in flight
    // then can reach one shard before its signal and another after (shards one update apart);
    // the overlapped worker almost always has one in flight (known, psd side: see docs/workerd.md).
    const std::string overlap = GENERATE(as<std::string>{}, "off", "on");
    const int shards = overlap == "on" ? 1 : 2;
    psrun::test::TempTree tmp;
    fetch_mnist(tmp.path);
    const fs::path model = tmp.path / "model";
    ChildProcess first(exe("launcher/psrun"), local_args(shards, 2, model, 100000, {"--overlap", overlap}),
                       (tmp.path / "first.log").string());
    REQUIRE(wait_for_step(first, 30, 100000, 180));
    const auto t0 = Clock::now();
    first.signal(SIGTERM);
    const int code = first.wait(30);
    const double exit_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::string log = first.output();
    INFO(log);
    CHECK(code == psrun::kExitPreempted);
    CHECK(exit_seconds < 12);
    // The chief measured signal -> checkpoint committed.
    const auto committed = capture_all(log, R"(committed (\d+) ms after the signal)");
    REQUIRE(committed.size() == 1);
    CHECK(committed[0] < 10000);
    WARN("signal to checkpoint committed: " << committed[0] << " ms; signal to psrun exit: " << exit_seconds << " s");

    const auto manifest = latest_manifest(model);
    const auto step = manifest["global_step"].get<long>();
    CHECK(step >= 30);
    CHECK(manifest["extra"]["preempted"] == true);
    CHECK(manifest["extra"]["signal"] == SIGTERM);
    CHECK(manifest["extra"]["data_position"]["examples"].get<long>() > 0);
    // Every psd drained and holds exactly the checkpointed step: no applied update is lost, and the
    // shards agree (a draining psd still applies pushes; the chief checkpoints once the others stopped).
    const auto final_steps = capture_all(log, R"(preempted at step (\d+): the last checkpoint holds)");
    CHECK(final_steps == std::vector<long>(static_cast<std::size_t>(shards), step));
    // Every shard file holds the parameters and Adam's two slots.
    char name[32];
    std::snprintf(name, sizeof name, "ckpt-%010ld", step);
    const std::string dir = (model / name).string();
    for (int shard = 0; shard < shards; ++shard) {
        const std::string file = "ps-" + std::to_string(shard) + "-of-" + std::to_string(shards) + ".tensors";
        auto tensors = psrun::read_tensor_file(dir + "/" + file);
        REQUIRE(tensors);
        int params = 0, slots = 0;
        for (const auto& t : *tensors) {
            params += t.name.ends_with("/param");
            slots += t.name.ends_with("/slot0") || t.name.ends_with("/slot1");
        }
        CHECK(params > 0);
        CHECK(slots == 2 * params);
    }

    // The same job with a later last step resumes from the checkpoint with its optimizer state.
    ChildProcess second(exe("launcher/psrun"), local_args(shards, 2, model, static_cast<int>(step) + 30),
                        (tmp.path / "second.log").string());
    const int code2 = second.wait(300);
    const std::string log2 = second.output();
    INFO(log2);
    CHECK(code2 == 0);
    CHECK_THAT(log2, Catch::Contains("restored global step " + std::to_string(step)));
    CHECK_THAT(log2, Catch::Contains("RESTORE: adam at step " + std::to_string(step)));
    CHECK_THAT(log2, Catch::Contains("data position: resuming at epoch 0 offset"));
    std::ifstream in(model / "summary.json");
    REQUIRE(in);
    const auto summary = nlohmann::json::parse(in);
    CHECK(summary["global_step"].get<long>() == step + 30);
    CHECK(summary["start_step"].get<long>() == step);
    CHECK(summary["test_accuracy"].get<double>() > 0.5);
}

TEST_CASE("SIGKILL of the chief while psd lives: the restarted chief continues from psd's parameters",
          "[integration][preemption]") {
    psrun::test::TempTree tmp;
    fetch_mnist(tmp.path);
    auto keys = psrun::generate_job_keys();
    REQUIRE(keys);
    const std::string key = (tmp.path / "job.key").string();
    REQUIRE(psrun::write_job_key_file(key, *keys));
    const std::string ps = "ipc://" + (tmp.path / "ps-0").string();
    ChildProcess psd(exe("psd/psd"), {"--index", "0", "--ps", ps, "--num-workers", "1", "--key-file", key},
                     (tmp.path / "psd.log").string());
    const std::vector<std::string> chief_args = {"--index", "0",
                                                 "--chief", "--ps",
                                                 ps,        "--num-workers",
                                                 "1",       "--key-file",
                                                 key,       "--batch-size",
                                                 "50",      "--steps",
                                                 "150",     "--learning-rate",
                                                 "1e-3",    "--eval-every",
                                                 "0",       "--threads",
                                                 "1",       "--log-every",
                                                 "10"};
    ChildProcess chief(exe("workerd/workerd"), chief_args, (tmp.path / "chief1.log").string());
    REQUIRE(wait_for_step(chief, 40, 150, 180));
    chief.signal(SIGKILL);
    CHECK(chief.wait(10) == 128 + SIGKILL);
    const auto seen = capture_all(chief.output(), R"(step (\d+)/150)");
    REQUIRE(!seen.empty());

    ChildProcess again(exe("workerd/workerd"), chief_args, (tmp.path / "chief2.log").string());
    const int code = again.wait(300);
    const std::string log = again.output();
    INFO(log);
    CHECK(code == 0);
    CHECK_THAT(log, Catch::Contains("psd already holds parameters: continuing from them"));
    const auto start = capture_all(log, R"(training from global step (\d+))");
    REQUIRE(start.size() == 1);
    CHECK(start[0] >= seen.back());  // nothing psd applied is lost
    WARN("chief SIGKILL, psd alive: last step logged " << seen.back() << ", restarted chief continues at " << start[0]
                                                       << " (0 steps lost)");
    CHECK(psd.wait(30) == 0);
}

TEST_CASE("SIGKILL of the chief under psrun local: the rerun resumes from the newest committed checkpoint",
          "[integration][preemption]") {
    psrun::test::TempTree tmp;
    fetch_mnist(tmp.path);
    const fs::path model = tmp.path / "model";
    const int interval = 20;
    ChildProcess first(exe("launcher/psrun"),
                       local_args(1, 2, model, 100000, {"--checkpoint-steps", std::to_string(interval)}),
                       (tmp.path / "first.log").string());
    REQUIRE(wait_for_step(first, 50, 100000, 180));
    const auto pids = capture_all(first.output(), R"(started worker 0 \(pid (\d+)\))");
    REQUIRE(pids.size() == 1);
    REQUIRE(::kill(static_cast<pid_t>(pids[0]), SIGKILL) == 0);
    const int code = first.wait(60);
    const std::string log = first.output();
    INFO(log);
    CHECK(code == 1);  // a crash, not a preemption
    // psd drains when the supervisor stops it; its final step is what the job had reached.
    const auto reached = capture_all(log, R"(draining at step (\d+))");
    REQUIRE(reached.size() == 1);
    const auto saved = latest_manifest(model)["global_step"].get<long>();
    const long lost = reached[0] - saved;
    WARN("chief SIGKILL, whole job rerun: psd at step " << reached[0] << ", last checkpoint " << saved << ", " << lost
                                                        << " steps lost (interval " << interval << ")");
    CHECK(lost >= 0);
    // Checkpoints are written in the background (psd forks a writer; the chief commits the manifest
    // once every shard is done) while training goes on, so the newest one may still be in flight when
    // the chief dies. What was committed is never lost: the rerun's checkpoint is at least the newest
    // the chief logged as written. What is lost is one interval plus the steps of one write (a bound
    // of 3 intervals: a write of this 13 MB shard takes ~0.3-0.5 s, ~10 steps, on 2 loaded cores).
    const auto committed = capture_all(log, R"(\[workerd:0\] checkpoint at step (\d+) written)");
    REQUIRE_FALSE(committed.empty());
    CHECK(saved >= committed.back());
    CHECK(lost <= 3 * interval);

    ChildProcess second(exe("launcher/psrun"), local_args(1, 2, model, static_cast<int>(saved) + 20),
                        (tmp.path / "second.log").string());
    const int code2 = second.wait(300);
    INFO(second.output());
    CHECK(code2 == 0);
    CHECK_THAT(second.output(), Catch::Contains("restored global step " + std::to_string(saved)));
}
