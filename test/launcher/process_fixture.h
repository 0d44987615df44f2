// Test helpers of the psrun process tests: stand-in daemons (shell scripts written into a temp
// dir that record their argv and PID), psrun spawned with a chosen environment, waits by PID.
#pragma once

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

namespace psrun::test {

namespace fs = std::filesystem;
using Args = std::vector<std::string>;

inline const char* kStandIn = R"(#!/bin/sh
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
inline bool alive(pid_t pid) {
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
inline Proc spawn(const Args& args, const std::map<std::string, std::string>& env, const fs::path& dir,
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
inline int wait_exit(const Proc& p, double seconds) {
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

inline std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline std::map<std::string, std::string> base_env(const Fixture& f) {
    // HOME is the fixture's dir: the job key file psrun creates there is removed with it.
    return {{"PATH", "/usr/bin:/bin"}, {"STANDIN_DIR", f.rec.string()}, {"HOME", f.dir.path.string()}};
}

inline std::map<std::string, std::string> step_env(const Fixture& f, int port, int procid) {
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

inline int free_port_pair() {
    // Two consecutive free ports (resv ports are a range); retry a few kernel picks.
    for (int i = 0; i < 50; ++i) {
        const int p = (*psrun::launcher::free_local_ports(1))[0];
        if (p < 65535 && psrun::launcher::check_port_free("127.0.0.1", p + 1)) return p;
    }
    FAIL("no free port pair");
    return 0;
}

}  // namespace psrun::test
