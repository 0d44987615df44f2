// --wire-precision bf16 end to end: `psrun local --tcp` with shared memory off, so that every
// gradient and parameter crosses the loopback as bf16 payload frames; the workers learn real MNIST
// and psd (f32 master weights) reports the bf16 copies it sent. Uses both cores: not parallel.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "test/integration/integration_util.h"
#include "test/psd/child_process.h"

namespace fs = std::filesystem;
using psrun::test::ChildProcess;

namespace {

long stat_of(const std::string& log, const std::string& name) {
    std::smatch m;
    if (!std::regex_search(log, m, std::regex("\"" + name + "\":([0-9]+)"))) return -1;
    return std::stol(m[1]);
}

}  // namespace

TEST_CASE("workers with --wire-precision bf16 over tcp learn MNIST; psd sends bf16 parameters",
          "[integration][mnist][bf16]") {
    psrun::test::TempTree tmp;
    const fs::path model = tmp.path / "model";
    ChildProcess fetch(psrun::test::build_dir() / "launcher/psrun", {"data", "fetch"},
                       (tmp.path / "fetch.log").string());
    REQUIRE(fetch.wait(300) == 0);  // a no-op once MNIST is in the cache
    const std::vector<std::string> args = {"local",
                                           "--tcp",
                                           "--ps",
                                           "1",
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
                                           "300",
                                           "--eval-every",
                                           "0",
                                           "--log-every",
                                           "100",
                                           "--threads",
                                           "1",
                                           "--wire-precision",
                                           "bf16",
                                           "--shared-memory",
                                           "off"};
    ChildProcess psrun(psrun::test::build_dir() / "launcher/psrun", args, (tmp.path / "psrun.log").string());
    const int code = psrun.wait(400);
    const std::string log = psrun.output();
    INFO(log);
    REQUIRE(code == 0);
    std::ifstream in(model / "summary.json");
    REQUIRE(in);
    const auto summary = nlohmann::json::parse(in);
    CHECK(summary["global_step"].get<int>() == 300);
    CHECK(summary["test_accuracy"].get<double>() >= 0.90);
    // psd's exit line: every push applied, and the parameters went out as bf16 (one conversion per
    // update version at most, at least one per worker's reply of a new version).
    CHECK(stat_of(log, "applied") == 300);
    CHECK(stat_of(log, "bf16_param_conversions") >= 300);
}
