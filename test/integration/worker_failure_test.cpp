// workerd against real psd processes on ipc endpoints: the start barrier waits for every worker,
// and a worker with another job's key or without a reachable psd fails with exit 1 and a
// message naming the endpoint, in bounded time.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "common/job_keys.h"
#include "test/integration/integration_util.h"
#include "test/psd/child_process.h"

namespace fs = std::filesystem;
using psrun::test::ChildProcess;

namespace {

fs::path exe(const char* rel) { return psrun::test::build_dir() / rel; }

std::string write_keys(const fs::path& path) {
    auto keys = psrun::generate_job_keys();
    REQUIRE(keys);
    REQUIRE(psrun::write_job_key_file(path.string(), *keys));
    return path.string();
}

std::vector<std::string> worker_args(int index, const std::string& ps, const std::string& key) {
    std::vector<std::string> a = {"--index",
                                  std::to_string(index),
                                  "--ps",
                                  ps,
                                  "--num-workers",
                                  "2",
                                  "--key-file",
                                  key,
                                  "--connect-timeout",
                                  "5",
                                  "--barrier-timeout",
                                  "60",
                                  "--batch-size",
                                  "50",
                                  "--steps",
                                  "40",
                                  "--threads",
                                  "1",
                                  "--log-every",
                                  "10"};
    if (index == 0) a.push_back("--chief");
    return a;
}

}  // namespace

TEST_CASE("the chief waits at the start barrier until every worker said HELLO", "[integration]") {
    psrun::test::TempTree tmp;
    const std::string key = write_keys(tmp.path / "job.key");
    const std::string ps = "ipc://" + (tmp.path / "ps-0").string();
    ChildProcess psd(exe("psd/psd"), {"--index", "0", "--ps", ps, "--num-workers", "2", "--key-file", key},
                     (tmp.path / "psd.log").string());
    ChildProcess chief(exe("workerd/workerd"), worker_args(0, ps, key), (tmp.path / "w0.log").string());
    REQUIRE(chief.wait_for_output("start barrier: waiting for all 2 workers", 60));
    // Alone, the chief must not start: psd never receives INIT.
    std::this_thread::sleep_for(std::chrono::seconds(2));
    INFO(psd.output());
    CHECK(psd.output().find("INIT") == std::string::npos);
    CHECK(chief.running());
    ChildProcess worker(exe("workerd/workerd"), worker_args(1, ps, key), (tmp.path / "w1.log").string());
    const int w = worker.wait(120);
    const int c = chief.wait(120);
    INFO(chief.output());
    INFO(worker.output());
    CHECK(w == 0);
    CHECK(c == 0);
    CHECK(psd.wait(30) == 0);
    CHECK(psd.output().find("INIT: adam from step 0, last step 40") != std::string::npos);
    CHECK(psd.output().find("all 2 workers are done") != std::string::npos);
}

TEST_CASE("a worker with another job's key fails with exit 1 naming psd", "[integration]") {
    psrun::test::TempTree tmp;
    const std::string key = write_keys(tmp.path / "job.key");
    const std::string other = write_keys(tmp.path / "other.key");
    const std::string ps = "ipc://" + (tmp.path / "ps-0").string();
    ChildProcess psd(exe("psd/psd"), {"--index", "0", "--ps", ps, "--num-workers", "2", "--key-file", key},
                     (tmp.path / "psd.log").string());
    ChildProcess worker(exe("workerd/workerd"), worker_args(1, ps, other), (tmp.path / "w1.log").string());
    const auto t0 = std::chrono::steady_clock::now();
    const int code = worker.wait(60);
    INFO(worker.output());
    CHECK(code == 1);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
    CHECK(worker.output().find("wrong job token") != std::string::npos);
    CHECK(worker.output().find(ps) != std::string::npos);
    psd.signal(SIGTERM);
    CHECK(psd.wait(30) >= 0);
}

TEST_CASE("a worker whose psd is unreachable fails with exit 1 naming the endpoint", "[integration]") {
    psrun::test::TempTree tmp;
    const std::string ps = "ipc://" + (tmp.path / "nobody").string();
    ChildProcess worker(exe("workerd/workerd"),
                        {"--index", "0", "--chief", "--ps", ps, "--num-workers", "1", "--no-auth", "--connect-timeout",
                         "2", "--steps", "10", "--threads", "1"},
                        (tmp.path / "w0.log").string());
    const int code = worker.wait(60);
    INFO(worker.output());
    CHECK(code == 1);
    CHECK(worker.output().find("no reply from ps 0 (" + ps + ")") != std::string::npos);
}

TEST_CASE("SIGTERM stops a worker promptly even when its psd hangs mid-step", "[integration]") {
    psrun::test::TempTree tmp;
    const std::string key = write_keys(tmp.path / "job.key");
    const std::string ps = "ipc://" + (tmp.path / "ps-0").string();
    ChildProcess psd(exe("psd/psd"), {"--index", "0", "--ps", ps, "--num-workers", "1", "--key-file", key},
                     (tmp.path / "psd.log").string());
    ChildProcess chief(exe("workerd/workerd"),
                       {"--index", "0", "--chief", "--ps", ps, "--num-workers", "1", "--key-file", key, "--batch-size",
                        "20", "--steps", "1000000", "--threads", "1", "--log-every", "10"},
                       (tmp.path / "w0.log").string());
    REQUIRE(chief.wait_for_output("step 20/1000000", 120));
    // psd hangs: the worker's next PUSH_PULL gets no reply. (A psd that dies is seen at once, and
    // a hung one after --heartbeat-timeout, 10 s here: test/integration/ps_fault_test.cpp.)
    psd.signal(SIGSTOP);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    chief.signal(SIGTERM);
    const auto t0 = std::chrono::steady_clock::now();
    const int code = chief.wait(30);
    INFO(chief.output());
    CHECK(code == 1);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(15));
    CHECK(chief.output().find("signal 15") != std::string::npos);
    psd.signal(SIGKILL);
    CHECK(psd.wait(10) == 128 + SIGKILL);
}
