// Checkpoints end to end: the chief of a real `psrun local` job saves coordinated checkpoints of
// the psd shards into the model dir, keeps --keep-checkpoints of them, and a second job with a
// higher --steps in the same model dir resumes from the newest one instead of starting over.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/checkpoint_store.h"
#include "test/integration/integration_util.h"
#include "test/psd/child_process.h"

namespace fs = std::filesystem;
using psrun::test::ChildProcess;

namespace {

std::string run_job(const fs::path& tmp, const fs::path& model, int steps, const std::string& name) {
    ChildProcess psrun(psrun::test::build_dir() / "launcher/psrun",
                       {"local",
                        "--ps",
                        "2",
                        "--workers",
                        "2",
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
                        std::to_string(steps),
                        "--checkpoint-steps",
                        "20",
                        "--keep-checkpoints",
                        "2",
                        "--log-every",
                        "20",
                        "--threads",
                        "1"},
                       (tmp / (name + ".log")).string());
    const int code = psrun.wait(300);
    const std::string log = psrun.output();
    INFO(log);
    REQUIRE(code == 0);
    return log;
}

std::vector<std::int64_t> checkpoint_steps(const fs::path& model) {
    std::vector<std::int64_t> steps;
    for (const auto& c : psrun::CheckpointStore(model.string(), 100).list()) steps.push_back(c.step);
    return steps;
}

}  // namespace

TEST_CASE("the chief checkpoints every shard and a later job resumes from the newest checkpoint",
          "[integration][checkpoint]") {
    psrun::test::TempTree tmp;
    const fs::path model = tmp.path / "model";
    ChildProcess fetch(psrun::test::build_dir() / "launcher/psrun", {"data", "fetch"},
                       (tmp.path / "fetch.log").string());
    REQUIRE(fetch.wait(300) == 0);

    run_job(tmp.path, model, 60, "first");
    auto steps = checkpoint_steps(model);
    INFO("checkpoints after the first job: " << steps.size());
    REQUIRE(steps.size() == 2);  // --keep-checkpoints 2 pruned the older ones
    CHECK(steps.back() == 60);   // always saved at the last step
    CHECK(steps.front() >= 20);
    std::ifstream state(model / "checkpoint");
    CHECK(nlohmann::json::parse(state)["latest"] == "ckpt-0000000060");
    std::vector<std::string> warnings;
    auto latest = psrun::CheckpointStore(model.string(), 2).latest_valid(&warnings);
    REQUIRE(latest);
    auto manifest = psrun::CheckpointStore::read_manifest(*latest);
    REQUIRE(manifest);
    CHECK((*manifest)["files"].size() == 2);  // one tensor file per psd shard

    const std::string log = run_job(tmp.path, model, 100, "second");
    CHECK_THAT(log, Catch::Contains("restored global step 60"));
    std::ifstream in(model / "summary.json");
    REQUIRE(in);
    const auto summary = nlohmann::json::parse(in);
    CHECK(summary["global_step"].get<int>() == 100);
    steps = checkpoint_steps(model);
    REQUIRE(!steps.empty());
    CHECK(steps.back() == 100);
}
