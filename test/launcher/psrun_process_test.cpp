// Runs the real psrun binary with stand-in daemons (shell scripts written into a temp dir that
// record their argv and PID) to check `psrun run`'s exec and `psrun local`'s supervision.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "launcher/ports.h"
#include "launcher/thread_plan.h"

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

namespace {

const char* kStandIn = R"(#!/bin/sh
# Stand-in daemon: records argv and pid under $STANDIN_DIR, then behaves as told.
name=$(basename "$0"); idx=x; prev=
for a in "$@"; do [ "$prev" = "--index" ] && idx=$a; prev=$a; done
case " $* " in *" --standalone "*) idx=standalone;; esac
[ "$name" = workerd ] && case " $* " in *" --evaluator "*) name=evaluator;; esac
tag="$name.$idx"
printf '%s\n' "$0" "$@" > "$STANDIN_DIR/$tag.argv"
[ -n "$STANDIN_EXIT_NOW" ] && exit "$STANDIN_EXIT_NOW"
sleep 30 & echo $! > "$STANDIN_DIR/$tag.child"
echo $$ > "$STANDIN_DIR/$tag.pid"
[ "$STANDIN_FAIL" = "$tag" ] && { sleep 0.3; exit 3; }
[ "$name" != psd ] && [ -n "$STANDIN_WORKER_EXIT" ] && { sleep 0.2; exit "$STANDIN_WORKER_EXIT"; }
exec sleep 30
)";

struct TempDir {
    fs::path path;
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "psrun-test.XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

struct Fixture {
    TempDir dir;
    fs::path bin = dir.path / "bin";
    fs::path rec = dir.path / "rec";
    Fixture() {
        fs::create_directories(bin);
        fs::create_directories(rec);
        for (const char* name : {"psd", "workerd"}) {
            std::ofstream(bin / name) << kStandIn;
            fs::permissions(bin / name, fs::perms::owner_all);
        }
    }
    ~Fixture() {
        // Safety net: nothing a stand-in started may outlive the test, whatever it asserted.
        // Only processes that still carry this fixture's STANDIN_DIR, so a reused PID is safe.
        const std::string mark = "STANDIN_DIR=" + rec.string();
        for (pid_t pid : recorded_pids()) {
            std::ifstream environ_file("/proc/" + std::to_string(pid) + "/environ");
            std::stringstream env;
            env << environ_file.rdbuf();
            if (env.str().find(mark) != std::string::npos) ::kill(pid, SIGKILL);
        }
    }
    Fixture(const Fixture&) = delete;
    Fixture& operator=(const Fixture&) = delete;
    std::string read(const std::string& file) const {
        std::ifstream in(rec / file);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
    Args argv_of(const std::string& tag) const {
        Args out;
        std::istringstream in(read(tag + ".argv"));
        for (std::string line; std::getline(in, line);) out.push_back(line);
        return out;
    }
    std::vector<pid_t> recorded_pids() const {
        std::vector<pid_t> pids;
        for (const auto& e : fs::directory_iterator(rec)) {
            const auto ext = e.path().extension();
            if (ext == ".pid" || ext == ".child") {
                std::ifstream in(e.path());
                pid_t p = 0;
                if (in >> p) pids.push_back(p);
            }
        }
        return pids;
    }
    size_t count(const std::string& ext) const {
        size_t n = 0;
        for (const auto& e : fs::directory_iterator(rec)) n += e.path().extension() == ext;
        return n;
    }
};

// A live process (zombies waiting for init to reap them count as gone).
bool alive(pid_t pid) {
    if (::kill(pid, 0) != 0) return false;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

struct Proc {
    pid_t pid = -1;
    fs::path out, err;
};

// Starts psrun with `args`; a non-empty `prefix` (e.g. taskset -c 0) execs psrun in turn, so
// the PID is psrun's either way.
Proc spawn(const Args& args, const std::map<std::string, std::string>& env, const fs::path& dir,
           const Args& prefix = {}) {
    Proc p{-1, dir / "stdout", dir / "stderr"};
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> argv;
    for (const auto& a : prefix) argv.push_back(const_cast<char*>(a.c_str()));
    const char* program = prefix.empty() ? PSRUN_EXE : prefix[0].c_str();
    argv.push_back(const_cast<char*>(PSRUN_EXE));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    p.pid = ::fork();
    REQUIRE(p.pid >= 0);
    if (p.pid == 0) {
        const int o = ::open(p.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        const int e = ::open(p.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(o, 1);
        ::dup2(e, 2);
        ::execve(program, argv.data(), envp.data());
        ::_exit(126);
    }
    return p;
}

// Waits for exit; kills (and fails) after `seconds`. Returns the exit code, 128+sig if signalled.
int wait_exit(const Proc& p, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int status = 0;
    while (::waitpid(p.pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(p.pid, SIGKILL);
            ::waitpid(p.pid, &status, 0);
            FAIL("psrun did not exit within " << seconds << " s");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::map<std::string, std::string> base_env(const Fixture& f) {
    // HOME is the fixture's dir: the job key file psrun creates there is removed with it.
    return {{"PATH", "/usr/bin:/bin"}, {"STANDIN_DIR", f.rec.string()}, {"HOME", f.dir.path.string()}};
}

std::map<std::string, std::string> step_env(const Fixture& f, int port, int procid) {
    auto env = base_env(f);
    env.insert({{"SLURM_JOB_ID", "9"},
                {"SLURM_STEP_ID", "0"},
                {"SLURM_STEP_NODELIST", "localhost"},
                {"SLURM_STEP_TASKS_PER_NODE", "2"},
                {"SLURM_STEP_NUM_TASKS", "2"},
                {"SLURM_PROCID", std::to_string(procid)},
                {"SLURM_NODEID", "0"},
                {"SLURM_LOCALID", std::to_string(procid)},
                {"SLURM_CPUS_PER_TASK", "2"},
                {"SLURM_STEP_RESV_PORTS", std::to_string(port) + "-" + std::to_string(port + 1)}});
    return env;
}

int free_port_pair() {
    // Two consecutive free ports (resv ports are a range); retry a few kernel picks.
    for (int i = 0; i < 50; ++i) {
        const int p = (*psrun::launcher::free_local_ports(1))[0];
        if (p < 65535 && psrun::launcher::check_port_free("127.0.0.1", p + 1)) return p;
    }
    FAIL("no free port pair");
    return 0;
}

}  // namespace

TEST_CASE("psrun run execs psd with the contracted flags", "[process]") {
    Fixture f;
    const int port = free_port_pair();
    auto env = step_env(f, port, 0);
    env["STANDIN_EXIT_NOW"] =
        std::string("7");  // exit code passes through: psrun exec'd, not forked
    const Proc p = spawn({"run", "--bin-dir", f.bin.string(), "--no-auth", "--", "--model-dir",
                          "/m", "--steps", "3"},
                         env, f.dir.path);
    CHECK(wait_exit(p, 20) == 7);
    CHECK(f.argv_of("psd.0") == Args{(f.bin / "psd").string(), "--index", "0", "--ps",
                                     "tcp://localhost:" + std::to_string(port), "--num-workers",
                                     "1", "--model-dir", "/m", "--no-auth", "--threads", "2", "--run-id",
                                     "slurm-9"});  // every step of job 9 is one run of /m
}

TEST_CASE("psrun run execs workerd for the chief with training options", "[process]") {
    Fixture f;
    const int port = free_port_pair();
    auto env = step_env(f, port, 1);
    env["STANDIN_EXIT_NOW"] = std::string("0");
    const Proc p =
        spawn({"run", "--bin-dir", f.bin.string(), "--", "--steps", "3"}, env, f.dir.path);
    CHECK(wait_exit(p, 20) == 0);
    // The chief creates the job key file ($HOME/.psrun/<job id>.key, owner-only) and passes it.
    const std::string key = (f.dir.path / ".psrun" / "9.key").string();
    CHECK(f.argv_of("workerd.0") == Args{(f.bin / "workerd").string(), "--index", "0", "--ps",
                                         "tcp://localhost:" + std::to_string(port), "--num-workers",
                                         "1", "--chief", "--key-file", key, "--threads", "2",
                                         "--steps", "3"});
    REQUIRE(fs::exists(key));
    CHECK((fs::status(key).permissions() & (fs::perms::group_all | fs::perms::others_all)) ==
          fs::perms::none);
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
    const Case c = GENERATE(
        Case{{"run", "--bin-dir", "/nonexistent"}, "not found"},
        Case{{"plan", "--nodelist", "n[1-", "--tasks-per-node", "2"}, "never closed"},
        Case{{"plan", "--nodelist", "n[1-2]", "--tasks-per-node", "2(x"}, "2(x"},
        Case{{"plan", "--tasks", "ps,worker", "--nodelist", "n1", "--tasks-per-node", "3"},
             "--tasks has 2"},
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
         {"--json", "--tasks", "--ps", "--placement", "--interface", "--no-ib", "--port-base",
          "--threads", "--nodelist", "--tasks-per-node", "--procid", "--ps_hosts", "--worker_hosts",
          "--job_name", "--task_index"})
        CHECK_THAT(help, Catch::Contains(opt));
}

TEST_CASE("psrun local runs every daemon and exits 0 when the workers succeed", "[process]") {
    Fixture f;
    auto env = base_env(f);
    env["STANDIN_WORKER_EXIT"] = std::string("0");
    const Proc p = spawn({"local", "--ps", "1", "--workers", "2", "--grace", "0.5", "--bin-dir",
                          f.bin.string(), "--", "--steps", "4"},
                         env, f.dir.path);
    CHECK(wait_exit(p, 20) == 0);
    const Args chief = f.argv_of("workerd.0");
    REQUIRE(chief.size() == 14);
    CHECK(chief[5] == "--num-workers");
    CHECK(chief[7] == "--chief");
    CHECK(chief[8] == "--key-file");  // psrun local made a job key in its private dir
    CHECK(chief[10] == "--threads");  // the default split of the cores (tested under taskset below)
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
        spawn({"local", "--ps", "2", "--workers", "2", "--grace", "2", "--bin-dir", f.bin.string()},
              env, f.dir.path);
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
    const Proc p = spawn({"local", "--ps", "1", "--workers", "2", "--grace", "2",
                          "--bin-dir", f.bin.string()},
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
    const Proc p = spawn({"local", "--ps", "0", "--workers", "1", "--threads", "3", "--bin-dir",
                          f.bin.string(), "--", "--steps", "2"},
                         env, f.dir.path);
    CHECK(wait_exit(p, 20) == 0);
    CHECK(f.argv_of("workerd.standalone") ==
          Args{(f.bin / "workerd").string(), "--standalone", "--threads", "3", "--steps", "2"});
}

TEST_CASE("psrun plan --json prints one parseable object per task", "[process]") {
    Fixture f;
    const Proc p =
        spawn({"plan", "--json", "--nodelist", "n[1-2]", "--tasks-per-node", "4(x2)", "--procid",
               "5", "--tasks", "ps,worker,worker,worker,ps,worker,worker,worker"},
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
                                    " in this process's affinity mask: " + (c.cores / c.workers == 1 ? "1 thread" : "2 threads") +
                                    " per worker") &&
                        Catch::Contains("--threads T overrides"));
    CHECK_THAT(err, !Catch::Contains("oversubscribed"));
    for (pid_t pid : f.recorded_pids()) CHECK_FALSE(alive(pid));
}

TEST_CASE("psrun local: --threads wins, and a --threads among the training options wins for workerd",
          "[process][threads]") {
    Fixture f;
    const Proc p = local_under_taskset(f, "0", {"--ps", "1", "--workers", "1", "--threads", "3", "--", "--threads", "1"});
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
        Case{{"local", "--frobnicate"},
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
