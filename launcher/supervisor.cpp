#include "launcher/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/exit_codes.h"
#include "common/result.h"
#include "common/unique_fd.h"

namespace psrun::launcher {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

bool Supervisor::start(Child& child) {
    const std::vector<std::string>& args = child.command.argv;
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        spdlog::error("cannot start {}: fork: {}", child.command.label, std::strerror(errno));
        return false;
    }
    if (pid == 0) {
        // Child: async-signal-safe calls only until exec.
        ::setpgid(0, group_);
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != parent) ::_exit(127);
        const int null_fd = ::open("/dev/null", O_RDONLY);
        if (null_fd >= 0) ::dup2(null_fd, 0);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        ::execv(child.command.path.c_str(), argv.data());
        const char msg[] = "psrun: exec of a daemon failed\n";
        [[maybe_unused]] ssize_t n = ::write(2, msg, sizeof msg - 1);
        ::_exit(127);
    }
    ::setpgid(pid, group_);  // also in the parent, so the group exists before we signal it
    if (group_ == 0) group_ = pid;
    child.pid = pid;
    child.running = true;
    spdlog::info("started {} (pid {}): {}", child.command.label, pid, render_argv(child.command.argv));
    return true;
}

void Supervisor::signal_group(int sig) {
    if (group_ > 0) ::kill(-group_, sig);
}

bool Supervisor::tolerated_death(const Child& c, int status) {
    // A non-chief worker killed by a signal (OOM killer, kill -9): training goes on without it,
    // as under Slurm; psd declares it dead after --worker-timeout. Deliberate failures (exit 1
    // with a message, exit 2) stop the job.
    const auto& argv = c.command.argv;
    const bool chief = std::find(argv.begin(), argv.end(), "--chief") != argv.end();
    const bool standalone = std::find(argv.begin(), argv.end(), "--standalone") != argv.end();
    const bool evaluator = std::find(argv.begin(), argv.end(), "--evaluator") != argv.end();
    return c.command.program == "workerd" && !chief && !standalone && !evaluator && WIFSIGNALED(status);
}

void Supervisor::reap(bool stopping, bool draining) {
    while (true) {
        int status = 0;
        const pid_t pid = ::waitpid(-1, &status, WNOHANG);
        if (pid <= 0) return;
        for (Child& c : children_) {
            if (c.pid != pid || !c.running) continue;
            c.running = false;
            c.status = status;
            const bool preempted = WIFEXITED(status) && WEXITSTATUS(status) == kExitPreempted;
            preempted_ = preempted_ || preempted;
            const bool ok = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || preempted);
            const bool stopped_by_us =
                stopping && WIFSIGNALED(status) && (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGKILL);
            if (ok || stopped_by_us) {
                spdlog::info("{} (pid {}) {}", c.command.label, pid, describe_wait_status(status));
            } else if (!stopping && !draining && restarts_ && restarts_->may_restart(c.command, status)) {
                const DaemonRestart& r = restarts_->record(c.command, status);
                spdlog::warn("{} (pid {}) {} at global step {}: starting it again (restart {} of {} {}); {}",
                             c.command.label, pid, r.status,
                             r.global_step ? std::to_string(*r.global_step) : std::string("(psd did not say)"),
                             restarts_->used(c.command), DaemonRestarts::option(c.command), restarts_->max(c.command),
                             c.is_ps ? "the chief restores it from the newest checkpoint" : "it rejoins the run");
                if (!start(c)) {
                    failed_ = true;
                    must_stop_ = true;
                }
            } else if (WIFEXITED(status) && WEXITSTATUS(status) == kExitNoFinalCheckpoint) {
                // Training is over (the others finish by themselves); only the final checkpoint is missing.
                spdlog::error("{} (pid {}) {}: the final checkpoint was not written (summary.json says why)",
                              c.command.label, pid, describe_wait_status(status));
                if (!failed_) checkpoint_lost_ = true;
                failed_ = true;
            } else if (tolerated_death(c, status) && elastic_) {
                // Elastic (--min-workers): psd drops it and decides the run's outcome by its own exit code.
                spdlog::warn(
                    "{} (pid {}) {}: the other workers go on without it (elastic: psd drops it after "
                    "--worker-timeout; the run can still end 0)",
                    c.command.label, pid, describe_wait_status(status));
            } else if (tolerated_death(c, status)) {
                spdlog::error(
                    "{} (pid {}) {}: the other workers go on without it (the ps report it and exit "
                    "non-zero at the end)",
                    c.command.label, pid, describe_wait_status(status));
                failed_ = true;
            } else {
                spdlog::error("{} (pid {}) {}", c.command.label, pid, describe_wait_status(status));
                // The first failure decides the exit code: a daemon's usage/config error stays 2.
                if (!failed_ && WIFEXITED(status) && WEXITSTATUS(status) == kExitUsage) usage_error_ = true;
                failed_ = true;
                must_stop_ = true;
            }
        }
    }
}

void Supervisor::reap_descendants() {
    // psrun is a child subreaper, so orphaned grandchildren become its children: kill the group,
    // kill any child that left the group, and reap until none is left (bounded).
    signal_group(SIGKILL);
    const auto deadline = Clock::now() + std::chrono::seconds(3);
    const std::string self = std::to_string(::getpid());
    while (true) {
        int status = 0;
        const pid_t pid = ::waitpid(-1, &status, WNOHANG);
        if (pid > 0) continue;
        if (pid < 0 && errno == ECHILD) return;
        if (Clock::now() > deadline) {
            spdlog::warn("some processes started by the daemons did not exit");
            return;
        }
        std::error_code ec;
        for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
            std::ifstream stat(entry.path() / "stat");
            std::string line;
            if (!std::getline(stat, line)) continue;
            const size_t close = line.rfind(')');
            if (close == std::string::npos) continue;
            std::istringstream rest(line.substr(close + 2));
            std::string state, ppid;
            rest >> state >> ppid;
            if (ppid == self && state != "Z")
                ::kill(static_cast<pid_t>(std::stol(entry.path().filename().string())), SIGKILL);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

int Supervisor::run(const std::vector<DaemonCommand>& commands) {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
    sigset_t old;
    ::sigprocmask(SIG_BLOCK, &set, &old);
    UniqueFd sfd(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);

    children_.clear();
    for (const DaemonCommand& cmd : commands) {
        children_.push_back(Child{cmd, -1, false, cmd.program == "psd", 0});
    }
    bool stopping = false;  // SIGTERM sent to the group
    bool draining = false;  // workers done, waiting for ps to exit by themselves
    bool interrupted = false;
    Clock::time_point deadline{};
    for (Child& c : children_) {
        if (!start(c)) {
            failed_ = true;
            break;
        }
    }
    auto begin_stop = [&](const char* why) {
        if (stopping) return;
        spdlog::warn("stopping all daemons: {}", why);
        stopping = true;
        signal_group(SIGTERM);
        deadline = Clock::now() + grace_;
    };
    if (failed_) {
        must_stop_ = true;
        begin_stop("a daemon could not be started");
    }

    auto any_running = [&](bool ps) {
        for (const Child& c : children_)
            if (c.running && c.is_ps == ps) return true;
        return false;
    };
    while (any_running(true) || any_running(false)) {
        int timeout_ms = -1;
        if (stopping || draining) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
            timeout_ms = static_cast<int>(std::max<long long>(0, left.count()));
        }
        pollfd p{sfd.get(), POLLIN, 0};
        ::poll(&p, 1, timeout_ms);
        signalfd_siginfo info{};
        while (::read(sfd.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
            const int sig = static_cast<int>(info.ssi_signo);
            if (sig == SIGCHLD) continue;
            if (stopping) {
                spdlog::warn("{} again: killing all daemons now", strsignal(sig));
                signal_group(SIGKILL);
            }
            interrupted = true;
            begin_stop(strsignal(sig));
        }
        reap(stopping, draining);
        if (must_stop_) begin_stop("a daemon failed");
        if (!stopping && !draining && !any_running(false) && any_running(true)) {
            spdlog::info("all workers finished; waiting up to {} ms for the ps to exit", grace_.count());
            draining = true;
            deadline = Clock::now() + grace_;
        }
        if ((stopping || draining) && Clock::now() >= deadline) {
            if (stopping) {
                spdlog::warn("daemons still running after {} ms: sending SIGKILL", grace_.count());
                signal_group(SIGKILL);
                deadline = Clock::now() + std::chrono::hours(1);
            } else {
                draining = false;
                stopping = true;
                spdlog::info("sending SIGTERM to the remaining ps");
                signal_group(SIGTERM);
                deadline = Clock::now() + grace_;
            }
        }
    }
    reap_descendants();
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    if (failed_) return usage_error_ ? kExitUsage : checkpoint_lost_ ? kExitNoFinalCheckpoint : kExitFailure;
    if (preempted_) return kExitPreempted;  // stopped after a clean checkpoint: rerun to resume
    return interrupted ? kExitFailure : kExitOk;
}

}  // namespace psrun::launcher
