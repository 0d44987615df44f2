#include "psd/forked_task.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <string>

namespace psrun::psd {
namespace {

// The child's report on the pipe: one byte 0 (done) or 1 (failed), then for a failure the error
// code's byte and the message.
constexpr char kDone = 0, kFailed = 1;
constexpr std::size_t kMaxReport = 4096;

void write_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        const ssize_t n = ::write(fd, data, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // the parent is gone: nothing to tell
        data += n;
        size -= static_cast<std::size_t>(n);
    }
}

[[noreturn]] void run_child(const ForkedTask::Work& work, int fd, pid_t parent) {
    // Die with the thread that forked (a psd killed with -9 leaves no writer behind it); if it is
    // already gone, stop now.
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(1);
    std::string report(1, kDone);
    try {
        if (auto done = work(); !done) {
            report.assign(1, kFailed);
            report += static_cast<char>(done.error().code);
            report += done.error().message;
        }
    } catch (const std::exception& e) {
        report = std::string(1, kFailed) + static_cast<char>(ErrorCode::kIo) + e.what();
    } catch (...) {
        report = std::string(1, kFailed) + static_cast<char>(ErrorCode::kIo) + "an exception of unknown type";
    }
    // Within the pipe's buffer, so the child never waits for the parent to read (finish() reaps first).
    write_all(fd, report.data(), std::min<std::size_t>(report.size(), kMaxReport));
    ::_exit(0);  // no destructors, no atexit handlers: they belong to the parent
}

}  // namespace

Result<std::unique_ptr<ForkedTask>> ForkedTask::start(const Work& work) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
        return make_error(ErrorCode::kIo,
                          std::string("cannot create a pipe for a forked writer: ") + std::strerror(errno));
    UniqueFd read_end(fds[0]), write_end(fds[1]);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) return make_error(ErrorCode::kIo, std::string("cannot fork a writer: ") + std::strerror(errno));
    if (pid == 0) {
        read_end.reset();
        run_child(work, write_end.get(), parent);
    }
    return std::unique_ptr<ForkedTask>(new ForkedTask(pid, std::move(read_end)));
}

ForkedTask::~ForkedTask() {
    if (reaped_) return;
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
}

Result<void> ForkedTask::finish() {
    // Reaped first, then the report read without waiting: the pipe may stay open in another
    // child forked meanwhile (by another thread of a test process), so EOF may not come.
    int status = 0;
    pid_t reaped = -1;
    while ((reaped = ::waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
    std::string report;
    char buffer[kMaxReport];
    ::fcntl(result_.get(), F_SETFL, ::fcntl(result_.get(), F_GETFL) | O_NONBLOCK);
    for (;;) {
        const ssize_t n = ::read(result_.get(), buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // EOF, or nothing more to read
        report.append(buffer, static_cast<std::size_t>(n));
    }
    const pid_t pid = pid_;
    reaped_ = true;
    result_.reset();
    if (!report.empty() && report[0] == kDone) return {};
    if (report.size() >= 2 && report[0] == kFailed) {
        const auto code = static_cast<unsigned char>(report[1]);
        return make_error(
            code <= static_cast<unsigned char>(kLastErrorCode) ? static_cast<ErrorCode>(code) : ErrorCode::kIo,
            report.substr(2));
    }
    std::string how = "without a result";
    if (reaped == pid && WIFSIGNALED(status))
        how = "on signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    else if (reaped == pid && WIFEXITED(status))
        how = "with status " + std::to_string(WEXITSTATUS(status)) + " and no result";
    return make_error(ErrorCode::kIo, "the forked writer (pid " + std::to_string(pid) + ") died " + how);
}

}  // namespace psrun::psd
