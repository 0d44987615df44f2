// Runs the real psrun binary with stand-in daemons (test/launcher/process_fixture.h) to check
// `psrun run`'s exec and `psrun local`'s supervision.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "launcher/ports.h"
#include "test/launcher/process_fixture.h"

using namespace psrun::test;

TEST_CASE("psrun run execs psd with the contracted flags", "[process]") {
    Fixture f;
    const int port = free_port_pair();
    auto env = step_env(f, port, 0);
    env["STANDIN_EXIT_NOW"] = std::string("7");  // exit code passes through: psrun exec'd, not forked
    const Proc p = spawn({"run", "--bin-dir", f.bin.string(), "--no-auth", "--", "--model-dir", "/m", "--steps", "3"},
                         env, f.dir.path);
    CHECK(wait_exit(p, 20) == 7);
    CHECK(f.argv_of("psd.0") == Args{(f.bin / "psd").string(), "--index", "0", "--ps",
                                     "tcp://localhost:" + std::to_string(port), "--num-workers", "1", "--model-dir",
                                     "/m", "--no-auth", "--threads", "2", "--run-id",
                                     "slurm-9"});  // every step of job 9 is one run of /m
}

TEST_CASE("psrun run execs workerd for the chief with training options", "[process]") {
    Fixture f;
    const int port = free_port_pair();
    auto env = step_env(f, port, 1);
    env["STANDIN_EXIT_NOW"] = std::string("0");
    const Proc p = spawn({"run", "--bin-dir", f.bin.string(), "--", "--steps", "3"}, env, f.dir.path);
    CHECK(wait_exit(p, 20) == 0);
    // The chief creates the job key file ($HOME/.psrun/<job id>.key, owner-only) and passes it.
    const std::string key = (f.dir.path / ".psrun" / "9.key").string();
    CHECK(f.argv_of("workerd.0") == Args{(f.bin / "workerd").string(), "--index", "0", "--ps",
                                         "tcp://localhost:" + std::to_string(port), "--num-workers", "1", "--chief",
                                         "--key-file", key, "--threads", "2", "--steps", "3"});
    REQUIRE(fs::exists(key));
    CHECK((fs::status(key).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
}

TEST_CASE("psrun run reports a ps port in use instead of hanging", "[process]") {
    Fixture f;
    const int port = free_port_pair();
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd, 1) == 0);
    const Proc p = spawn({"run", "--bin-dir", f.bin.string()}, step_env(f, port, 0), f.dir.path);
    CHECK(wait_exit(p, 20) == 1);
    ::close(fd);
    CHECK_THAT(slurp(p.err), Catch::Contains("already in use"));
    CHECK(f.count(".argv") == 0);
}

TEST_CASE("psrun usage and configuration errors exit 2 with a message", "[process]") {
    Fixture f;
    struct Case {
        Args args;
        const char* says;
    };
    const Case c =
        GENERATE(Case{{"run", "--bin-dir", "/nonexistent"}, "not found"},
                 Case{{"plan", "--nodelist", "n[1-", "--tasks-per-node", "2"}, "never closed"},
                 Case{{"plan", "--nodelist", "n[1-2]", "--tasks-per-node", "2(x"}, "2(x"},
                 Case{{"plan", "--tasks", "ps,worker", "--nodelist", "n1", "--tasks-per-node", "3"}, "--tasks has 2"},
                 Case{{"plan", "--tasks", "ps,worker", "--ps", "1"}, "excludes"},
                 Case{{"plan", "--placement", "scatter"}, "scatter"}, Case{{"frobnicate"}, "subcommand"},
                 Case{{"local", "--ps", "0", "--workers", "2", "--bin-dir", "/bin"}, "standalone"});
    auto env = c.args[0] == "run" ? step_env(f, 20000, 1) : base_env(f);
    const Proc p = spawn(c.args, env, f.dir.path);
    CHECK(wait_exit(p, 20) == 2);
    CHECK_THAT(slurp(p.err), Catch::Contains(c.says));
}

TEST_CASE("psrun run in a batch shell is refused with advice", "[process]") {
    Fixture f;
    auto env = base_env(f);
    env.insert({{"SLURM_JOB_ID", "5"}, {"SLURM_JOB_NODELIST", "n1"}, {"SLURM_NTASKS", "2"}});
    const Proc p = spawn({"run"}, env, f.dir.path);
    CHECK(wait_exit(p, 20) == 2);
    CHECK_THAT(slurp(p.err), Catch::Contains("srun"));
}

TEST_CASE("psrun plan --help lists every option", "[process]") {
    Fixture f;
    const Proc p = spawn({"plan", "--help"}, base_env(f), f.dir.path);
    CHECK(wait_exit(p, 20) == 0);
    const std::string help = slurp(p.out);
    for (const char* opt :
         {"--json", "--tasks", "--ps", "--placement", "--interface", "--no-ib", "--port-base", "--threads",
          "--nodelist", "--tasks-per-node", "--procid", "--ps_hosts", "--worker_hosts", "--job_name", "--task_index"})
        CHECK_THAT(help, Catch::Contains(opt));
}

TEST_CASE("psrun local runs every daemon and exits 0 when the workers succeed", "[process]") {
    Fixture f;
    auto env = base_env(f);
    env["STANDIN_WORKER_EXIT"] = std::string("0");
    const Proc p = spawn(
        {"local", "--ps", "1", "--workers", "2", "--grace", "0.5", "--bin-dir", f.bin.string(), "--", "--steps", "4"},
        env, f.dir.path);
    CHECK(wait_exit(p, 20) == 0);
    const Args chief = f.argv_of("workerd.0");
    REQUIRE(chief.size() == 16);
    CHECK(chief[5] == "--num-workers");
    CHECK(chief[7] == "--chief");
    CHECK(chief[8] == "--key-file");         // psrun local made a job key in its private dir
    CHECK(chief[10] == "--reconnect-wait");  // one host: 0, fail fast
    CHECK(chief[11] == "0");
    CHECK(chief[12] == "--threads");  // the default split of the cores (tested under taskset below)
    const Args ps = f.argv_of("psd.0");
    CHECK(std::find(ps.begin(), ps.end(), chief[9]) != ps.end());
    CHECK(Args(chief.end() - 2, chief.end()) == Args{"--steps", "4"});
    CHECK(f.argv_of("psd.0")[4] == chief[4]);
    for (pid_t pid : f.recorded_pids()) CHECK_FALSE(alive(pid));
}

TEST_CASE("psrun local: a failing daemon stops the others and is named", "[process]") {
    Fixture f;
    auto env = base_env(f);
    env["STANDIN_FAIL"] = std::string("workerd.1");
    const auto start = std::chrono::steady_clock::now();
    const Proc p =
        spawn({"local", "--ps", "2", "--workers", "2", "--grace", "2", "--bin-dir", f.bin.string()}, env, f.dir.path);
    CHECK(wait_exit(p, 20) == 1);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    CHECK_THAT(slurp(p.err), Catch::Contains("worker 1") && Catch::Contains("status 3"));
    CHECK(f.count(".pid") == 4);
    const auto pids = f.recorded_pids();
    CHECK(pids.size() == 8);  // 4 daemons + 4 grandchildren
    for (pid_t pid : pids) CHECK_FALSE(alive(pid));
}

TEST_CASE("psrun local: SIGTERM stops every daemon, no orphan survives", "[process]") {
    Fixture f;
    const Proc p = spawn({"local", "--ps", "1", "--workers", "2", "--grace", "2", "--bin-dir", f.bin.string()},
                         base_env(f), f.dir.path);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (f.count(".pid") < 3 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(f.count(".pid") == 3);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto pids = f.recorded_pids();
    for (pid_t pid : pids) CHECK(alive(pid));
    const std::string ps_endpoint = f.argv_of("psd.0")[4];
    CHECK(ps_endpoint.rfind("ipc://", 0) == 0);
    ::kill(p.pid, SIGTERM);
    CHECK(wait_exit(p, 20) == 1);
    for (pid_t pid : pids) CHECK_FALSE(alive(pid));
    // The private ipc directory is gone.
    CHECK_FALSE(fs::exists(fs::path(ps_endpoint.substr(6)).parent_path()));
}

TEST_CASE("psrun local --ps 0 --workers 1 runs workerd --standalone", "[process]") {
    Fixture f;
    auto env = base_env(f);
    env["STANDIN_WORKER_EXIT"] = std::string("0");
    const Proc p = spawn(
        {"local", "--ps", "0", "--workers", "1", "--threads", "3", "--bin-dir", f.bin.string(), "--", "--steps", "2"},
        env, f.dir.path);
    CHECK(wait_exit(p, 20) == 0);
    CHECK(f.argv_of("workerd.standalone") ==
          Args{(f.bin / "workerd").string(), "--standalone", "--threads", "3", "--steps", "2"});
}

TEST_CASE("psrun plan --json prints one parseable object per task", "[process]") {
    Fixture f;
    const Proc p = spawn({"plan", "--json", "--nodelist", "n[1-2]", "--tasks-per-node", "4(x2)", "--procid", "5",
                          "--tasks", "ps,worker,worker,worker,ps,worker,worker,worker"},
                         base_env(f), f.dir.path);
    CHECK(wait_exit(p, 20) == 0);
    const std::string out = slurp(p.out);
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);
    const auto j = nlohmann::json::parse(out, nullptr, false);
    REQUIRE_FALSE(j.is_discarded());
    CHECK(j["ps"].size() == 2);
    CHECK(j["worker"].size() == 6);
    CHECK(j["chief"] == j["worker"][0]);
    CHECK(j["self"]["rank"] == 5);
    CHECK(j["self"]["role"] == "worker");
    CHECK(j["self"]["index"] == 3);
    CHECK(j["self"]["node"] == "n2");
}

TEST_CASE("psrun addr prints node=IPv4 of an interface", "[process]") {
    Fixture f;
    auto env = base_env(f);
    env["SLURMD_NODENAME"] = std::string("n7");
    const Proc p = spawn({"addr", "--interface", "lo"}, env, f.dir.path);
    CHECK(wait_exit(p, 20) == 0);
    CHECK(slurp(p.out) == "n7=127.0.0.1\n");
    const Proc bad = spawn({"addr", "--interface", "no-such-if0"}, env, f.dir.path);
    CHECK(wait_exit(bad, 20) == 2);
    CHECK_THAT(slurp(bad.err), Catch::Contains("no-such-if0"));
}

TEST_CASE("psrun run with a TF_CONFIG evaluator task execs workerd --evaluator", "[process][evaluator]") {
    Fixture f;
    auto env = base_env(f);
    env["STANDIN_EXIT_NOW"] = std::string("0");
    env["TF_CONFIG"] = R"({"cluster": {"chief": ["127.0.0.1:2000"], "worker": ["127.0.0.1:2001"],)"
                       R"( "ps": ["127.0.0.1:2002"]}, "task": {"type": "evaluator", "index": 0}})";
    const Proc p = spawn({"run", "--bin-dir", f.bin.string(), "--no-auth", "--", "--model-dir", "/m", "--steps", "5"},
                         env, f.dir.path);
    CHECK(wait_exit(p, 20) == 0);
    INFO(slurp(p.err));
    // Not counted as a worker: --num-workers is the chief and the worker only.
    const Args argv = f.argv_of("evaluator.0");
    REQUIRE(argv.size() == 17);
    CHECK(Args(argv.begin(), argv.begin() + 9) == Args{(f.bin / "workerd").string(), "--index", "0", "--ps",
                                                       "tcp://127.0.0.1:2002", "--num-workers", "2", "--evaluator",
                                                       "--no-auth"});
    // No SLURM_CPUS_PER_TASK: the size of psrun's affinity mask (inherited from this test).
    CHECK(Args(argv.begin() + 9, argv.begin() + 11) ==
          Args{"--threads", std::to_string(psrun::launcher::affinity_cpu_count())});
    // The run id of a TF_CONFIG job: a hash of its map, the same in every task.
    CHECK(argv[11] == "--run-id");
    CHECK(argv[12].rfind("tf-", 0) == 0);
    CHECK(Args(argv.begin() + 13, argv.end()) == Args{"--model-dir", "/m", "--steps", "5"});
}

TEST_CASE("psrun local: a failing evaluator makes psrun exit 1 naming it", "[process][evaluator]") {
    Fixture f;
    auto env = base_env(f);
    env["STANDIN_FAIL"] = std::string("evaluator.0");
    const Proc p = spawn({"local", "--ps", "1", "--workers", "1", "--evaluators", "1", "--grace", "2", "--bin-dir",
                          f.bin.string(), "--", "--model-dir", (f.dir.path / "model").string()},
                         env, f.dir.path);
    CHECK(wait_exit(p, 20) == 1);
    CHECK_THAT(slurp(p.err), Catch::Contains("evaluator 0") && Catch::Contains("status 3"));
    const Args eval = f.argv_of("evaluator.0");
    CHECK(std::find(eval.begin(), eval.end(), "--evaluator") != eval.end());
    for (pid_t pid : f.recorded_pids()) CHECK_FALSE(alive(pid));
}

TEST_CASE("psrun local --evaluators without a model dir exits 2", "[process][evaluator]") {
    Fixture f;
    const Proc p = spawn({"local", "--ps", "1", "--workers", "1", "--evaluators", "1", "--bin-dir", f.bin.string(),
                          "--", "--steps", "5"},
                         base_env(f), f.dir.path);
    CHECK(wait_exit(p, 20) == 2);
    CHECK_THAT(slurp(p.err), Catch::Contains("--evaluators needs --model-dir"));
    CHECK(f.count(".argv") == 0);
}
