// Fault injection, dead workers (issue 6): a non-chief worker SIGKILLed mid-run. In async mode
// (through `psrun local`) the others finish, psd exits 1 naming the dead rank and psrun reports
// it; in sync mode the survivors' steps complete once psd declares the worker dead (no hang).
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "test/integration/fault_util.h"
#include "test/integration/integration_util.h"

using namespace psrun::test;

TEST_CASE("sync mode: a SIGKILLed worker does not hang the step", "[integration][faults]") {
    TempTree tmp;
    const std::string ps = ipc_list(tmp.path, 1);
    ChildProcess psd(
        daemon_exe("psd/psd"),
        psd_args(0, ps, 3,
                 {"--sync", "--replicas-to-aggregate", "3", "--worker-timeout", "2", "--reconnect-wait", "2"}),
        (tmp.path / "psd.log").string());
    ChildProcess chief(daemon_exe("workerd/workerd"), worker_args(0, ps, 3, 60), (tmp.path / "w0.log").string());
    ChildProcess w1(daemon_exe("workerd/workerd"), worker_args(1, ps, 3, 60), (tmp.path / "w1.log").string());
    ChildProcess w2(daemon_exe("workerd/workerd"), worker_args(2, ps, 3, 60), (tmp.path / "w2.log").string());
    REQUIRE(wait_for_step(chief, 10, 120));
    w2.signal(SIGKILL);
    const auto killed = FaultClock::now();
    REQUIRE(w2.wait(10) == 128 + SIGKILL);
    INFO(psd.output());
    REQUIRE(psd.wait_for_output("worker 2 silent for more than 2000 ms: declared dead", 30));
    report_figure("sync_worker_sigkill", "detect_seconds", seconds_since(killed));
    CHECK(psd.wait_for_output("sync: steps now aggregate 2 gradients", 5));
    const int c = chief.wait(120);
    const int w = w1.wait(60);
    report_figure("sync_worker_sigkill", "survivors_done_seconds", seconds_since(killed));
    INFO(chief.output());
    CHECK(c == 0);
    CHECK(w == 0);
    CHECK(chief.output().find("done: global step 60") != std::string::npos);
    CHECK(psd.wait(30) == 1);
    CHECK(psd.output().find("remaining workers are done, but worker 2 died") != std::string::npos);
}

TEST_CASE("async psrun local: a SIGKILLed worker is reported, the others finish", "[integration][faults]") {
    TempTree tmp;
    ChildProcess psrun(daemon_exe("launcher/psrun"),
                       {"local", "--ps", "1", "--workers", "3", "--worker-timeout", "2", "--grace", "20", "--",
                        "--steps", "400", "--batch-size", "20", "--threads", "1", "--log-every", "10"},
                       (tmp.path / "psrun.log").string());
    // 400 steps: the workers (1 thread, batch 20) do ~100 global steps a second on this host, and
    // the kill must come well before the end of the run.
    REQUIRE(wait_for_step(psrun, 20, 120));
    std::smatch m;
    const std::string started = psrun.output();
    REQUIRE(std::regex_search(started, m, std::regex(R"(started worker 2 \(pid (\d+)\))")));
    const std::string pid = m[1];
    REQUIRE(::kill(std::stoi(pid), SIGKILL) == 0);
    const auto killed = FaultClock::now();
    REQUIRE(psrun.wait_for_output("worker 2 silent for more than 2000 ms: declared dead", 30));
    report_figure("async_worker_sigkill", "detect_seconds", seconds_since(killed));
    const int code = psrun.wait(180);
    const std::string log = psrun.output();
    INFO(log);
    CHECK(code == 1);
    CHECK(log.find("worker 2 (pid " + pid + ") was killed by Killed: the other workers go on") != std::string::npos);
    CHECK(log.find("done: global step 400") != std::string::npos);  // the chief finished the run
    CHECK(log.find("remaining workers are done, but worker 2 died: exiting with failure") != std::string::npos);
    CHECK(log.find("ps 0 (pid") != std::string::npos);
    CHECK(log.find("exited with status 1") != std::string::npos);
    CHECK(log.find("psrun local failed (exit code 1)") != std::string::npos);
}
