// A paused job is not a dead job (issue 14), with real psd and workerd processes on ipc
// endpoints and real MNIST:
//  - the whole job stopped (SIGSTOP to every daemon, as Slurm's `scontrol suspend` does) longer
//    than every timeout, then continued: training goes on where it stopped, nobody is declared
//    dead, every rank exits 0;
//  - one worker stopped longer than --worker-timeout (async through psrun local, and sync): psd
//    declares it dead and the others go on; when it wakes it is told, rejoins, and the run ends 0;
//  - psd stopped longer than --heartbeat-timeout with --reconnect-wait: the workers say the psd
//    stopped answering, wait for it, find the same psd process when it answers again and go on
//    from its parameters (nothing restored), and finish.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "test/integration/fault_util.h"
#include "test/integration/integration_util.h"

namespace fs = std::filesystem;
using namespace psrun::test;

namespace {

long last_step(const std::string& log) {
    long step = -1;
    const std::regex progress(R"(step (\d+)/\d+)");
    for (std::sregex_iterator it(log.begin(), log.end(), progress), end; it != end; ++it)
        step = std::max(step, std::stol((*it)[1]));
    return step;
}

// Seconds until the chief logs a step beyond `step`.
double seconds_to_progress(const ChildProcess& chief, long step, double limit) {
    const auto t0 = FaultClock::now();
    while (seconds_since(t0) < limit) {
        if (last_step(chief.output()) > step) return seconds_since(t0);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
}

std::string worker_log(const TempTree& tmp, int i) {
    std::string name = "w";  // not "w" + to_string(i): GCC 12 warns falsely (-Wrestrict)
    name += std::to_string(i);
    name += ".log";
    return (tmp.path / name).string();
}

// Waits for every worker (180 s) and then psd (30 s); each must exit 0 (the logs are shown otherwise).
void check_all_exit_zero(ChildProcess& psd, std::vector<std::unique_ptr<ChildProcess>>& workers) {
    std::vector<int> codes;
    for (auto& w : workers) codes.push_back(w->wait(180));
    const int p = psd.wait(30);
    std::string logs = psd.output();
    for (auto& w : workers) logs += w->output();
    INFO(logs);
    for (int c : codes) CHECK(c == 0);
    CHECK(p == 0);
}

}  // namespace

TEST_CASE("the whole job stopped longer than every timeout goes on where it stopped", "[integration][pause]") {
    TempTree tmp;
    const std::string ps = ipc_list(tmp.path, 1);
    const fs::path model = tmp.path / "model";
    ChildProcess psd(daemon_exe("psd/psd"), psd_args(0, ps, 3, {"--worker-timeout", "3"}),
                     (tmp.path / "psd.log").string());
    const std::vector<std::string> extra = {
        "--heartbeat-timeout", "2", "--step-timeout", "10", "--model-dir", model.string(), "--checkpoint-secs", "4"};
    std::vector<std::unique_ptr<ChildProcess>> workers;
    for (int i = 0; i < 3; ++i)
        workers.push_back(std::make_unique<ChildProcess>(daemon_exe("workerd/workerd"),
                                                         worker_args(i, ps, 3, 900, extra), worker_log(tmp, i)));
    REQUIRE(wait_for_step(*workers[0], 100, 120));
    // Slurm's suspend: every task gets SIGSTOP, in no particular order; resume: SIGCONT.
    psd.signal(SIGSTOP);
    for (auto& w : workers) w->signal(SIGSTOP);
    const long paused_at = last_step(workers[0]->output());
    // Longer than the worker, heartbeat, step and checkpoint timers. The step timeout stays generous: psd
    // writes a checkpoint inside its loop, which took over 5 s once on the loaded host after a resume.
    std::this_thread::sleep_for(std::chrono::seconds(12));
    for (auto& w : workers) w->signal(SIGCONT);
    psd.signal(SIGCONT);
    const double resume = seconds_to_progress(*workers[0], paused_at, 30);
    report_figure("job_pause_12s", "seconds_to_next_step", resume);
    CHECK(resume >= 0);
    check_all_exit_zero(psd, workers);
    CHECK(psd.output().find("declared dead") == std::string::npos);
    CHECK(psd.output().find("this process was stopped") != std::string::npos);
    for (auto& w : workers) CHECK(w->output().find("lost the connection") == std::string::npos);
    CHECK(workers[0]->output().find("done: global step 900") != std::string::npos);
    // Steps lost: none (no restore: training simply went on from the step it was stopped at).
    CHECK(workers[0]->output().find("restored") == std::string::npos);
    report_figure("job_pause_12s", "steps_lost", 0);
}

TEST_CASE("async psrun local: a worker stopped beyond --worker-timeout rejoins and the run ends 0",
          "[integration][pause]") {
    TempTree tmp;
    ChildProcess psrun(daemon_exe("launcher/psrun"),
                       {"local",
                        "--ps",
                        "1",
                        "--workers",
                        "3",
                        "--worker-timeout",
                        "3",
                        "--grace",
                        "20",
                        "--",
                        "--steps",
                        "1500",
                        "--batch-size",
                        "20",
                        "--threads",
                        "1",
                        "--log-every",
                        "10",
                        "--heartbeat-timeout",
                        "2"},
                       (tmp.path / "psrun.log").string());
    REQUIRE(wait_for_step(psrun, 50, 120));
    std::smatch m;
    const std::string started = psrun.output();
    REQUIRE(std::regex_search(started, m, std::regex(R"(started worker 2 \(pid (\d+)\))")));
    const pid_t pid = std::stoi(m[1]);
    REQUIRE(::kill(pid, SIGSTOP) == 0);
    REQUIRE(psrun.wait_for_output("worker 2 silent for more than 3000 ms: declared dead", 30));
    std::this_thread::sleep_for(std::chrono::seconds(3));  // stopped ~6.5 s in all
    REQUIRE(::kill(pid, SIGCONT) == 0);
    const auto woke = FaultClock::now();
    REQUIRE(psrun.wait_for_output("psd had declared this worker dead (this worker was stopped for", 30));
    report_figure("async_worker_sigstop", "rejoin_seconds", seconds_since(woke));
    const int code = psrun.wait(180);
    const std::string log = psrun.output();
    INFO(log);
    CHECK(code == 0);
    CHECK(log.find("worker 2 spoke again") != std::string::npos);
    CHECK(log.find("longer than --worker-timeout 3 s") != std::string::npos);
    CHECK(log.find("lost the connection") == std::string::npos);
    CHECK(log.find("done: global step 1500") != std::string::npos);
    CHECK(log.find("all 3 workers are done") != std::string::npos);
}

TEST_CASE("sync: a worker stopped beyond --worker-timeout is dropped from the steps, then rejoins",
          "[integration][pause]") {
    TempTree tmp;
    const std::string ps = ipc_list(tmp.path, 1);
    ChildProcess psd(daemon_exe("psd/psd"),
                     psd_args(0, ps, 3, {"--sync", "--replicas-to-aggregate", "3", "--worker-timeout", "2"}),
                     (tmp.path / "psd.log").string());
    std::vector<std::unique_ptr<ChildProcess>> workers;
    for (int i = 0; i < 3; ++i)
        workers.push_back(std::make_unique<ChildProcess>(daemon_exe("workerd/workerd"),
                                                         worker_args(i, ps, 3, 150, {"--heartbeat-timeout", "2"}),
                                                         worker_log(tmp, i)));
    REQUIRE(wait_for_step(*workers[0], 10, 120));
    workers[2]->signal(SIGSTOP);
    REQUIRE(psd.wait_for_output("worker 2 silent for more than 2000 ms: declared dead", 30));
    CHECK(psd.wait_for_output("sync: steps now aggregate 2 gradients", 5));
    std::this_thread::sleep_for(std::chrono::seconds(2));
    workers[2]->signal(SIGCONT);
    const auto woke = FaultClock::now();
    REQUIRE(workers[2]->wait_for_output("psd had declared this worker dead", 30));
    report_figure("sync_worker_sigstop", "rejoin_seconds", seconds_since(woke));
    CHECK(psd.wait_for_output("sync: steps now aggregate 3 gradients", 10));
    check_all_exit_zero(psd, workers);
    CHECK(workers[2]->output().find("joins the next sync step") != std::string::npos);
    CHECK(workers[0]->output().find("done: global step 150") != std::string::npos);
    CHECK(psd.output().find("already pushed for step") == std::string::npos);  // no gradient applied twice
}

TEST_CASE(
    "psd stopped beyond --heartbeat-timeout: workers say it stopped answering, wait (--reconnect-wait) and "
    "go on with the same psd once it answers again",
    "[integration][pause]") {
    TempTree tmp;
    const std::string ps = ipc_list(tmp.path, 1);
    const fs::path model = tmp.path / "model";
    ChildProcess psd(daemon_exe("psd/psd"), psd_args(0, ps, 2, {"--worker-timeout", "3"}),
                     (tmp.path / "psd.log").string());
    const std::vector<std::string> extra = {
        "--heartbeat-timeout", "2", "--reconnect-wait", "30", "--model-dir", model.string(),
        "--checkpoint-steps",  "20"};
    ChildProcess w0(daemon_exe("workerd/workerd"), worker_args(0, ps, 2, 500, extra), (tmp.path / "w0.log").string());
    ChildProcess w1(daemon_exe("workerd/workerd"), worker_args(1, ps, 2, 500, extra), (tmp.path / "w1.log").string());
    REQUIRE(wait_for_count(w0, "checkpoint at step", 2, 180));
    psd.signal(SIGSTOP);
    const auto t0 = FaultClock::now();
    const std::string who = "ps 0 (" + ipc_endpoint(tmp.path, 0) + ")";
    REQUIRE(w0.wait_for_output("no answer from " + who + " for ", 30));
    report_figure("psd_sigstop_reconnect", "detect_seconds", seconds_since(t0));
    CHECK(w0.output().find("s; waiting up to 30 s for it (network or psd?)") != std::string::npos);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    psd.signal(SIGCONT);
    const auto resumed = FaultClock::now();
    const bool again = w0.wait_for_output(who + " answers again after", 60);
    if (!again) {
        UNSCOPED_INFO(w0.output());
        UNSCOPED_INFO(w1.output());
        UNSCOPED_INFO(psd.output());
    }
    REQUIRE(again);
    report_figure("psd_sigstop_reconnect", "reconnected_after_sigcont_seconds", seconds_since(resumed));
    CHECK(w0.output().find("same instance, continuing") != std::string::npos);
    const int c0 = w0.wait(180);
    const int c1 = w1.wait(60);
    INFO(w0.output());
    INFO(psd.output());
    CHECK(c0 == 0);
    CHECK(c1 == 0);
    CHECK(w0.output().find("done: global step 500") != std::string::npos);
    CHECK(w0.output().find("restored every shard") == std::string::npos);  // the same psd: nothing restored
    CHECK(psd.wait(30) == 0);
    CHECK(psd.output().find("RESTORE") == std::string::npos);
    CHECK(psd.output().find("\"step\":500") != std::string::npos);  // every step applied
}

TEST_CASE("psrun local --restart-workers: a worker SIGKILLed twice is restarted twice and the run ends 0",
          "[integration][pause]") {
    TempTree tmp;
    const fs::path model = tmp.path / "model";
    ChildProcess psrun(daemon_exe("launcher/psrun"),
                       {"local",
                        "--ps",
                        "1",
                        "--workers",
                        "3",
                        "--worker-timeout",
                        "3",
                        "--restart-workers",
                        "2",
                        "--grace",
                        "20",
                        "--",
                        "--steps",
                        "1500",
                        "--batch-size",
                        "20",
                        "--threads",
                        "1",
                        "--log-every",
                        "10",
                        "--model-dir",
                        model.string(),
                        "--eval-every",
                        "0"},
                       (tmp.path / "psrun.log").string());
    REQUIRE(wait_for_step(psrun, 50, 120));
    const std::regex started(R"(started worker 2 \(pid (\d+)\))");
    auto pid_of_run = [&](int n) {  // pid of the n-th start of worker 2 (1-based)
        const std::string log = psrun.output();
        int i = 0;
        for (std::sregex_iterator it(log.begin(), log.end(), started), end; it != end; ++it)
            if (++i == n) return static_cast<pid_t>(std::stoi((*it)[1]));
        return pid_t{-1};
    };
    for (int kill = 1; kill <= 2; ++kill) {
        const pid_t pid = pid_of_run(kill);
        REQUIRE(pid > 0);
        // Let this incarnation train first: its "training from global step" line.
        REQUIRE(wait_for_count(psrun, "worker 2 of 3: training from global step", kill, 60));
        REQUIRE(::kill(pid, SIGKILL) == 0);
        REQUIRE(psrun.wait_for_output("(restart " + std::to_string(kill) + " of --restart-workers 2)", 30));
        REQUIRE(wait_for_count(psrun, "started worker 2 (pid", kill + 1, 30));
    }
    const int code = psrun.wait(240);
    const std::string log = psrun.output();
    INFO(log);
    CHECK(code == 0);
    CHECK(log.find("done: global step 1500") != std::string::npos);
    CHECK(log.find("all 3 workers are done") != std::string::npos);
    std::ifstream in(model / "summary.json");
    const auto summary = nlohmann::json::parse(in, nullptr, false);
    REQUIRE(summary.is_object());
    REQUIRE(summary.contains("restarts"));
    const auto& restarts = summary["restarts"];
    REQUIRE(restarts.size() == 2);
    for (const auto& r : restarts) {
        CHECK(r["worker"] == 2);
        CHECK(r["status"] == "was killed by Killed");
        CHECK(r["global_step"].is_number());
        CHECK(r["time"].get<std::string>().size() == 20);
    }
    CHECK(restarts[0]["global_step"].get<long>() <= restarts[1]["global_step"].get<long>());
    CHECK(log.find("restart: worker 2 at ") != std::string::npos);  // psrun's summary block names them
}
