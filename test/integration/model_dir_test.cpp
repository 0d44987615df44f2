// The model dir is precious (docs/reliability.md "One run per model dir", "A shared model dir"),
// end to end with the real psrun, psd and workerd on real MNIST:
//  - two concurrent `psrun local` on one dir: the second exits 2 naming the holder; the first
//    finishes untouched (its checkpoints byte-identical to the same run alone);
//  - a holder killed with SIGKILL (psrun local and every daemon): the next run takes the dir over
//    and resumes from the newest valid checkpoint;
//  - a psd whose model dir is another directory than the chief's (two paths on one host stand for
//    two nodes' views of a node-local path): refused before step 1, psd and chief exit 2.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/exit_codes.h"
#include "common/model_dir_lock.h"
#include "common/result.h"
#include "test/integration/integration_util.h"
#include "test/psd/child_process.h"

namespace fs = std::filesystem;
using psrun::test::ChildProcess;
using Clock = std::chrono::steady_clock;

namespace {

fs::path exe(const char* rel) { return psrun::test::build_dir() / rel; }

std::vector<std::string> run_args(const fs::path& model, int steps) {
    return {"local",
            "--ps",
            "1",
            "--workers",
            "1",
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
            "1",
            "--checkpoint-steps",
            "100",
            "--checkpoint-secs",
            "0"};
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Every checkpoint's shard file by checkpoint name.
std::map<std::string, std::string> shard_files(const fs::path& model) {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::directory_iterator(model))
        if (e.path().filename().string().rfind("ckpt-", 0) == 0)
            out[e.path().filename().string()] = slurp(e.path() / "ps-0-of-1.tensors");
    return out;
}

// The direct children of `pid` (psrun local's daemons).
std::vector<pid_t> children_of(pid_t pid) {
    std::vector<pid_t> out;
    std::istringstream in(slurp("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
    for (pid_t c; in >> c;) out.push_back(c);
    return out;
}

void fetch_mnist(const fs::path& tmp) {
    ChildProcess fetch(exe("launcher/psrun"), {"data", "fetch"}, (tmp / "fetch.log").string());
    REQUIRE(fetch.wait(300) == 0);
}

}  // namespace

TEST_CASE("a second psrun local on a held model dir exits 2 naming the holder; the first is untouched",
          "[integration][model-dir]") {
    psrun::test::TempTree tmp;
    fetch_mnist(tmp.path);
    const fs::path alone = tmp.path / "alone", shared = tmp.path / "shared";
    ChildProcess solo(exe("launcher/psrun"), run_args(alone, 300), (tmp.path / "alone.log").string());
    REQUIRE(solo.wait(300) == 0);

    ChildProcess first(exe("launcher/psrun"), run_args(shared, 300), (tmp.path / "first.log").string());
    REQUIRE(first.wait_for_output("/300 ", 120));  // its first progress line
    const auto t0 = Clock::now();
    ChildProcess second(exe("launcher/psrun"), run_args(shared, 300), (tmp.path / "second.log").string());
    const int refused = second.wait(30);
    const double refuse_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const std::string why = second.output();
    INFO(why);
    CHECK(refused == psrun::kExitUsage);
    CHECK(refuse_seconds < 5);
    CHECK_THAT(why, Catch::Contains("is in use by another run local-" + psrun::this_host() + "-" +
                                    std::to_string(first.pid())));
    CHECK_THAT(why, Catch::Contains("psrun local pid " + std::to_string(first.pid())));
    CHECK_THAT(why, Catch::Contains("give this run another --model-dir, or stop that run"));
    CHECK(first.running());
    const int code = first.wait(300);
    INFO(first.output());
    REQUIRE(code == 0);
    const auto mine = shard_files(shared), reference = shard_files(alone);
    CHECK(mine.size() == 3);  // steps 100, 200, 300
    CHECK(mine == reference);
    CHECK_FALSE(fs::exists(shared / ".psrun" / "run.lock"));  // released at the end
    WARN("second run refused after " << refuse_seconds << " s; first run's checkpoints byte-identical to a run alone");
}

TEST_CASE("after SIGKILL of the whole holding run the next run takes the dir over and resumes",
          "[integration][model-dir]") {
    psrun::test::TempTree tmp;
    fetch_mnist(tmp.path);
    const fs::path model = tmp.path / "model";
    ChildProcess first(exe("launcher/psrun"), run_args(model, 100000), (tmp.path / "first.log").string());
    REQUIRE(first.wait_for_output("checkpoint at step 200 written", 240));
    // psrun local and its daemons die at once, as on a node failure: nothing releases the lock.
    const auto daemons = children_of(first.pid());
    REQUIRE(daemons.size() == 2);
    for (pid_t d : daemons) ::kill(d, SIGSTOP);  // no daemon may react to psrun's death
    first.signal(SIGKILL);
    CHECK(first.wait(10) == 128 + SIGKILL);
    for (pid_t d : daemons) ::kill(d, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // init (the subreaper's parent) reaps them
    REQUIRE(fs::exists(model / ".psrun" / "run.lock"));
    // The killed psrun could not remove its private socket directory: the test does.
    std::smatch sockets;
    const std::string first_log = first.output();
    if (std::regex_search(first_log, sockets, std::regex(R"(ipc://(/[^ ]*/psrun-local\.[A-Za-z0-9]+)/)")))
        fs::remove_all(sockets[1].str());

    ChildProcess next(exe("launcher/psrun"), run_args(model, 250), (tmp.path / "next.log").string());
    const int code = next.wait(300);
    const std::string log = next.output();
    INFO(log);
    CHECK(code == 0);
    CHECK_THAT(log, Catch::Contains("taking over from local-" + psrun::this_host() + "-" + std::to_string(first.pid()) +
                                    ", whose processes are all gone"));
    const std::regex restored(R"(restored global step (\d+) from)");
    std::smatch m;
    REQUIRE(std::regex_search(log, m, restored));
    CHECK(std::stol(m[1].str()) >= 200);
}

TEST_CASE("a psd that sees another model dir than the chief stops the job before step 1", "[integration][model-dir]") {
    psrun::test::TempTree tmp;
    fetch_mnist(tmp.path);
    const fs::path chief_view = tmp.path / "nodeA-scratch", ps_view = tmp.path / "nodeB-scratch";
    const std::string ps = "ipc://" + (tmp.path / "ps-0").string();
    ChildProcess psd(exe("psd/psd"),
                     {"--index", "0", "--ps", ps, "--num-workers", "1", "--no-auth", "--model-dir", ps_view.string()},
                     (tmp.path / "psd.log").string());
    ChildProcess chief(exe("workerd/workerd"),
                       {"--index", "0", "--chief", "--ps", ps, "--num-workers", "1", "--no-auth", "--model-dir",
                        chief_view.string(), "--steps", "50", "--threads", "1"},
                       (tmp.path / "chief.log").string());
    CHECK(chief.wait(120) == psrun::kExitUsage);
    CHECK(psd.wait(30) == psrun::kExitUsage);
    const std::string log = chief.output(), psd_log = psd.output();
    INFO(log);
    INFO(psd_log);
    const std::string message =
        "ps 0 on host " + psrun::this_host() + " does not see the chief's model dir " + chief_view.string();
    CHECK_THAT(log, Catch::Contains(message));
    CHECK_THAT(psd_log, Catch::Contains(message));
    CHECK_THAT(log, Catch::Contains("put --model-dir on a file system every node shares"));
    CHECK_THAT(log, !Catch::Contains("step 1/"));
    CHECK_FALSE(fs::exists(chief_view / "checkpoint"));
}
