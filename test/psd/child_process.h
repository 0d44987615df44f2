// Test helper: starts a binary of the build tree as a child process (output to files), waits
// for it with a deadline and kills it by PID. The destructor SIGKILLs a child still running.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace psrun::test {

// Directory of the build tree's "test" folder: this test executable lives there.
inline std::filesystem::path build_dir() {
    return std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path();
}

class ChildProcess {
  public:
    ChildProcess(const std::filesystem::path& exe, const std::vector<std::string>& args, const std::string& log)
        : log_(log) {
        pid_ = ::fork();
        if (pid_ == 0) {
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, nullptr);
            std::FILE* out = std::freopen(log.c_str(), "w", stdout);
            (void)out;
            ::dup2(STDOUT_FILENO, STDERR_FILENO);
            std::vector<char*> argv;
            std::string path = exe.string();
            argv.push_back(path.data());
            std::vector<std::string> copy = args;
            for (auto& a : copy) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execv(path.c_str(), argv.data());
            ::_exit(127);
        }
    }
    ~ChildProcess() {
        if (running()) {
            ::kill(pid_, SIGKILL);
            wait(5);
        }
    }
    pid_t pid() const { return pid_; }
    bool running() const { return pid_ > 0 && !status_; }
    void signal(int sig) const { ::kill(pid_, sig); }
    // Exit code (128+signal if killed), or -1 if still running after `seconds`.
    int wait(double seconds) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (!status_) {
            int st = 0;
            if (::waitpid(pid_, &st, WNOHANG) == pid_) {
                status_ = true;
                code_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                break;
            }
            if (std::chrono::steady_clock::now() > deadline) return -1;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return code_;
    }
    std::string output() const {
        std::ifstream in(log_);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }
    // Waits until the output contains `text`; false after `seconds`.
    bool wait_for_output(const std::string& text, double seconds) const {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
        while (output().find(text) == std::string::npos) {
            if (std::chrono::steady_clock::now() > deadline) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return true;
    }

  private:
    std::string log_;
    pid_t pid_ = -1;
    bool status_ = false;
    int code_ = -1;
};

}  // namespace psrun::test
