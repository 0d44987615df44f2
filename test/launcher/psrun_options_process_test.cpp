// psrun local and run with the real psrun binary and stand-in daemons (process_fixture.h): thread
// defaults from the affinity mask, the oversubscription warning, misplaced and misspelled options.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "launcher/ports.h"
#include "test/launcher/process_fixture.h"

using namespace psrun::test;
#include "launcher/thread_plan.h"

using namespace psrun::test;

namespace {

// Every value that follows "--threads" in `argv`, in order.
std::vector<int> threads_values(const Args& argv) {
    std::vector<int> out;
    for (size_t i = 0; i + 1 < argv.size(); ++i)
        if (argv[i] == "--threads") out.push_back(std::stoi(argv[i + 1]));
    return out;
}

bool cpu_allowed(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    return ::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_ISSET(cpu, &set);
}

// psrun local under `taskset -c cpus` with stand-in daemons; the workers exit 0 at once.
Proc local_under_taskset(const Fixture& f, const std::string& cpus, const Args& args) {
    auto env = base_env(f);
    env["STANDIN_WORKER_EXIT"] = std::string("0");
    Args all{"local", "--grace", "0.5", "--bin-dir", f.bin.string()};
    all.insert(all.end(), args.begin(), args.end());
    return spawn(all, env, f.dir.path, {"/usr/bin/taskset", "-c", cpus});
}

}  // namespace

TEST_CASE("psrun local without --threads splits the cores of its affinity mask", "[process][threads]") {
    struct Case {
        const char* cpus;
        int cores, workers;
    };
    const Case c = GENERATE(Case{"0", 1, 1}, Case{"0,1", 2, 2}, Case{"0,1", 2, 1});
    if (c.cores == 2 && !cpu_allowed(1)) {
        WARN("not run: CPU 1 is not in this test's affinity mask");
        return;
    }
    Fixture f;
    const Proc p = local_under_taskset(f, c.cpus, {"--ps", "1", "--workers", std::to_string(c.workers)});
    CHECK(wait_exit(p, 20) == 0);
    const std::string err = slurp(p.err);
    INFO(err);
    int worker_threads = 0;
    for (int i = 0; i < c.workers; ++i) {
        const auto t = threads_values(f.argv_of("workerd." + std::to_string(i)));
        REQUIRE(t.size() == 1);
        CHECK(t[0] == c.cores / c.workers);
        worker_threads += t[0];
    }
    CHECK(worker_threads == c.cores);  // the split adds up to the cores psrun was given
    CHECK(threads_values(f.argv_of("psd.0")) == std::vector<int>{1});
    CHECK_THAT(err, Catch::Contains(std::to_string(c.cores) + (c.cores == 1 ? " core" : " cores") +
                                    " in this process's affinity mask: " +
                                    (c.cores / c.workers == 1 ? "1 thread" : "2 threads") + " per worker") &&
                        Catch::Contains("--threads T overrides"));
    CHECK_THAT(err, !Catch::Contains("oversubscribed"));
    for (pid_t pid : f.recorded_pids()) CHECK_FALSE(alive(pid));
}

TEST_CASE("psrun local: --threads wins, and a --threads among the training options wins for workerd",
          "[process][threads]") {
    Fixture f;
    const Proc p =
        local_under_taskset(f, "0", {"--ps", "1", "--workers", "1", "--threads", "3", "--", "--threads", "1"});
    CHECK(wait_exit(p, 20) == 0);
    const std::string err = slurp(p.err);
    INFO(err);
    CHECK(threads_values(f.argv_of("psd.0")) == std::vector<int>{3});
    CHECK(threads_values(f.argv_of("workerd.0")) == std::vector<int>{3, 1});  // workerd takes the last
    CHECK_THAT(err, Catch::Contains("--threads 3 for every daemon"));
    CHECK_THAT(err, Catch::Contains("--threads 1 among the training options"));
    // 1 worker x 1 thread + psd's 2 team threads beyond its poll loop on 1 core.
    CHECK_THAT(err, Catch::Contains("oversubscribed: 1 worker x 1 thread + 1 psd x 2 beyond the poll loop = 3"));
    for (pid_t pid : f.recorded_pids()) CHECK_FALSE(alive(pid));
}

TEST_CASE("psrun local warns when the threads oversubscribe the cores", "[process][threads]") {
    Fixture f;
    const Proc p = local_under_taskset(f, "0", {"--ps", "1", "--workers", "2", "--threads", "2"});
    CHECK(wait_exit(p, 20) == 0);
    const std::string err = slurp(p.err);
    CHECK_THAT(err, Catch::Contains("oversubscribed: 2 workers x 2 threads + 1 psd x 1 beyond the poll loop = 5 "
                                    "compute threads on 1 core in this process's affinity mask") &&
                        Catch::Contains("use --workers 1"));
    CHECK(threads_values(f.argv_of("workerd.1")) == std::vector<int>{2});
    for (pid_t pid : f.recorded_pids()) CHECK_FALSE(alive(pid));
}

TEST_CASE("a psrun option after -- and a misspelled option name the right place and option", "[process][cli]") {
    Fixture f;
    struct Case {
        Args args;
        std::string says;
    };
    const Case c = GENERATE(
        Case{{"local", "--", "--worker-timeout", "10"},
             "psrun: error: `--worker-timeout` is a psrun option: put it before `--`: psrun local [psrun options] -- "
             "[training options]"},
        Case{{"local", "--workers", "2", "--", "--steps", "5", "--grace=3"},
             "`--grace` is a psrun option: put it before `--`: psrun local"},
        Case{{"run", "--", "--key-file", "/k"},
             "`--key-file` is a psrun option: put it before `--`: psrun run [psrun options] -- [training options]"},
        Case{{"local", "--wroker-timeout", "10"},
             "psrun: error: unknown option `--wroker-timeout` for psrun local; did you mean `--worker-timeout`? "
             "Usage: psrun local [psrun options] -- [training options]"},
        Case{{"run", "--ps", "1", "--thread", "2"},
             "unknown option `--thread` for psrun run; did you mean `--threads`? Usage: psrun run [psrun options]"},
        Case{
            {"local", "--frobnicate"},
            "unknown option `--frobnicate` for psrun local. Usage: psrun local [psrun options] -- [training options]"});
    auto args = c.args;
    args.insert(args.begin() + 1, {"--bin-dir", f.bin.string()});
    const Proc p = spawn(args, base_env(f), f.dir.path);
    CHECK(wait_exit(p, 20) == 2);
    CHECK_THAT(slurp(p.err), Catch::Contains(c.says));
    CHECK(f.count(".argv") == 0);  // no daemon started
}

TEST_CASE("training options psrun also has (--threads, --log-level) stay after --", "[process][cli]") {
    Fixture f;
    const Proc p = spawn({"local", "--ps", "0", "--bin-dir", f.bin.string(), "--dry-run", "--", "--threads", "1",
                          "--log-level", "debug"},
                         base_env(f), f.dir.path);
    CHECK(wait_exit(p, 20) == 0);
    CHECK_THAT(slurp(p.out), Catch::EndsWith("--threads 1 --log-level debug\n"));
}

TEST_CASE("psrun bench scale runs bench/scale.py with this psrun; a missing script exits 2", "[process][cli]") {
    Fixture f;
    auto help = spawn({"bench", "scale", "--help"}, base_env(f), f.dir.path);
    REQUIRE(wait_exit(help, 30) == 0);
    const std::string usage = slurp(help.out);
    CHECK_THAT(usage, Catch::Contains("--workers") && Catch::Contains("--placements") && Catch::Contains("--auth"));

    auto env = base_env(f);
    env["PSRUN_BENCH_DIR"] = f.dir.path.string();  // holds no scale.py
    auto missing = spawn({"bench", "scale", "--workers", "1"}, env, f.dir.path);
    REQUIRE(wait_exit(missing, 30) == 2);
    CHECK_THAT(slurp(missing.err), Catch::Contains("no scale.py in $PSRUN_BENCH_DIR"));
}

TEST_CASE("psrun local: --reconnect-wait 0 by default; the old name --ps-restart-wait still sets it, with a warning",
          "[process][reconnect]") {
    // Value after "--reconnect-wait" in a recorded command line, or "" without one.
    auto wait_of = [](const Args& argv) {
        for (size_t i = 0; i + 1 < argv.size(); ++i)
            if (argv[i] == "--reconnect-wait") return argv[i + 1];
        return std::string();
    };
    {
        Fixture f;
        const Proc p = local_under_taskset(f, "0", {"--ps", "1", "--workers", "1"});
        CHECK(wait_exit(p, 20) == 0);
        CHECK(wait_of(f.argv_of("psd.0")) == "0");  // one host: fail fast
        CHECK(wait_of(f.argv_of("workerd.0")) == "0");
    }
    {
        Fixture f;
        const Proc p = local_under_taskset(f, "0", {"--ps", "1", "--workers", "1", "--ps-restart-wait", "30"});
        CHECK(wait_exit(p, 20) == 0);
        const std::string err = slurp(p.err);
        INFO(err);
        CHECK(wait_of(f.argv_of("psd.0")) == "30");
        CHECK(wait_of(f.argv_of("workerd.0")) == "30");
        CHECK_THAT(err, Catch::Contains("--ps-restart-wait is the old name of --reconnect-wait"));
    }
}
