// The evaluator role end to end with the real binaries on real MNIST: `psrun local --evaluators 1`
// runs `workerd --evaluator` next to the training; it evaluates the chief's checkpoints into
// <model-dir>/eval/ and exits 0 after the last step's one, and psrun exits 0. Then the same model
// dir drives the evaluator's other rules: nothing evaluated twice, a damaged checkpoint skipped,
// --eval-timeout, SIGTERM; and a real psd that goes away ends the wait.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/event_writer.h"
#include "common/tfrecord.h"
#include "test/integration/integration_util.h"
#include "test/psd/child_process.h"

namespace fs = std::filesystem;
using psrun::test::ChildProcess;

namespace {

// step -> test_accuracy of every evaluation record in <model>/eval/metrics.jsonl.
std::multimap<int, double> evaluations(const fs::path& model) {
    std::multimap<int, double> out;
    std::ifstream in(model / "eval" / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
        const auto j = nlohmann::json::parse(line);
        if (j.contains("test_accuracy")) out.emplace(j["step"].get<int>(), j["test_accuracy"].get<double>());
    }
    return out;
}

std::vector<int> scalar_steps(const fs::path& dir, const std::string& tag) {
    std::vector<int> steps;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().filename().string().rfind("events.out.tfevents.", 0) != 0) continue;
        auto records = psrun::read_tfrecords(e.path().string());
        REQUIRE(records);
        for (const auto& r : *records)
            if (auto ev = psrun::decode_scalar_event(r); ev && ev->tag == tag)
                steps.push_back(static_cast<int>(ev->step));
    }
    return steps;
}

ChildProcess evaluator(const fs::path& tmp, const fs::path& model, int steps, const std::vector<std::string>& extra,
                       const std::string& name) {
    std::vector<std::string> args = {
        "--evaluator", "--model-dir", model.string(), "--steps", std::to_string(steps), "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return ChildProcess(psrun::test::build_dir() / "workerd/workerd", args, (tmp / (name + ".log")).string());
}

}  // namespace

TEST_CASE("psrun local --evaluators 1 evaluates every checkpoint and exits 0 after the last",
          "[integration][evaluator]") {
    psrun::test::TempTree tmp;
    const fs::path model = tmp.path / "model";
    ChildProcess fetch(psrun::test::build_dir() / "launcher/psrun", {"data", "fetch"},
                       (tmp.path / "fetch.log").string());
    REQUIRE(fetch.wait(300) == 0);

    ChildProcess psrun(psrun::test::build_dir() / "launcher/psrun",
                       {"local",
                        "--ps",
                        "1",
                        "--workers",
                        "2",
                        "--evaluators",
                        "1",
                        "--grace",
                        "30",
                        "--",
                        "--model-dir",
                        model.string(),
                        "--batch-size",
                        "50",
                        "--learning-rate",
                        "1e-3",
                        "--steps",
                        "300",
                        "--checkpoint-steps",
                        "150",
                        "--log-every",
                        "100",
                        "--threads",
                        "1"},
                       (tmp.path / "psrun.log").string());
    const int code = psrun.wait(240);
    const std::string log = psrun.output();
    INFO(log);
    REQUIRE(code == 0);
    CHECK(log.find("evaluator 0 (pid") != std::string::npos);
    CHECK(log.find("evaluated the last step's checkpoint (step 300)") != std::string::npos);
    // psd counted only the two workers in its done-queue, not the evaluator.
    CHECK(log.find("all 2 workers are done") != std::string::npos);

    // Async workers: the chief checkpoints at the first global step >= 150 it sees, and at 300.
    const auto evals = evaluations(model);
    REQUIRE(evals.count(300) == 1);  // the last step's checkpoint, exactly once
    CHECK(evals.size() >= 1);
    CHECK(evals.size() <= 2);
    for (const auto& [step, accuracy] : evals) {
        CHECK(step >= 150);
        CHECK(step <= 300);
        CHECK(evals.count(step) == 1);
        CHECK(accuracy > 0.0);
        CHECK(accuracy <= 1.0);
    }
    CHECK(evals.find(300)->second >= 0.9);
    // The chief's own final evaluation of the same parameters agrees with the evaluator's.
    std::ifstream summary_in(model / "summary.json");
    const auto summary = nlohmann::json::parse(summary_in);
    CHECK(summary["global_step"].get<int>() == 300);
    CHECK(summary["test_accuracy"].get<double>() == Approx(evals.find(300)->second).margin(1e-9));
    // TensorBoard: an "eval" run next to the chief's.
    auto tb_steps = scalar_steps(model / "eval", "test_accuracy");
    CHECK(tb_steps.size() == evals.size());
    CHECK(std::count(tb_steps.begin(), tb_steps.end(), 300) == 1);

    // A second evaluator of the finished model dir has nothing left to do.
    {
        auto again = evaluator(tmp.path, model, 300, {}, "again");
        CHECK(again.wait(60) == 0);
        CHECK_THAT(again.output(), Catch::Contains("nothing left to evaluate"));
        CHECK(evaluations(model).size() == evals.size());
    }
    // A copy with a damaged last checkpoint: it is skipped with a warning naming the file, and
    // with no further checkpoint --eval-timeout ends the wait with exit 1.
    const fs::path damaged = tmp.path / "damaged";
    fs::create_directories(damaged);
    fs::copy(model / "ckpt-0000000300", damaged / "ckpt-0000000300", fs::copy_options::recursive);
    psrun::test::flip_byte(damaged / "ckpt-0000000300" / "ps-0-of-1.tensors", 4096);
    {
        auto run = evaluator(tmp.path, damaged, 300, {"--eval-timeout", "2"}, "damaged");
        CHECK(run.wait(60) == 1);
        const std::string out = run.output();
        INFO(out);
        CHECK_THAT(out, Catch::Contains("skipping checkpoint") && Catch::Contains("ps-0-of-1.tensors"));
        CHECK_THAT(out, Catch::Contains("no new checkpoint"));
        CHECK(evaluations(damaged).empty());
    }
    // SIGTERM while waiting for a checkpoint that never comes: a final look, then exit 0.
    {
        auto run = evaluator(tmp.path, damaged, 1000, {"--eval-timeout", "120"}, "sigterm");
        REQUIRE(run.wait_for_output("watching", 60));
        run.signal(SIGTERM);
        CHECK(run.wait(30) == 0);
        CHECK_THAT(run.output(), Catch::Contains("skipping checkpoint"));
        CHECK(evaluations(damaged).empty());
    }
}

TEST_CASE("workerd --evaluator without --model-dir exits 2 and says what to give", "[integration][evaluator]") {
    psrun::test::TempTree tmp;
    ChildProcess run(psrun::test::build_dir() / "workerd/workerd", {"--evaluator", "--steps", "10"},
                     (tmp.path / "out.log").string());
    CHECK(run.wait(30) == 2);
    CHECK_THAT(run.output(), Catch::Contains("--evaluator needs --model-dir"));
}

TEST_CASE("the evaluator waits while the job's psd answer and gives up when they are gone",
          "[integration][evaluator]") {
    psrun::test::TempTree tmp;
    ChildProcess fetch(psrun::test::build_dir() / "launcher/psrun", {"data", "fetch"},
                       (tmp.path / "fetch.log").string());
    REQUIRE(fetch.wait(300) == 0);
    const std::string endpoint = "ipc://" + (tmp.path / "ps-0").string();
    ChildProcess psd(psrun::test::build_dir() / "psd/psd",
                     {"--index", "0", "--ps", endpoint, "--num-workers", "1", "--no-auth"},
                     (tmp.path / "psd.log").string());
    // --eval-timeout 9: probes every 3 s; no checkpoint ever comes.
    auto run = evaluator(tmp.path, tmp.path / "model", 100,
                         {"--ps", endpoint, "--num-workers", "1", "--no-auth", "--eval-timeout", "9"}, "gone");
    REQUIRE(run.wait_for_output("when the psd are gone", 60));
    // A job whose psd answer is waited for beyond --eval-timeout.
    CHECK(run.wait(14) == -1);
    REQUIRE(psd.running());
    psd.signal(SIGTERM);
    CHECK(psd.wait(30) >= 0);
    const auto stopped = std::chrono::steady_clock::now();
    CHECK(run.wait(60) == 1);
    // Two unanswered probes (3 s apart, 3 s each).
    CHECK(std::chrono::steady_clock::now() - stopped < std::chrono::seconds(30));
    INFO(run.output());
    CHECK_THAT(run.output(), Catch::Contains("stopped answering") && Catch::Contains(endpoint));
}
