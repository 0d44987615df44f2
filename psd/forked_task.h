// Work done in a forked child process on a copy-on-write snapshot of this process's memory, while
// the parent goes on changing it: how psd writes a checkpoint without stopping its poll loop (the
// snapshot technique of Redis's BGSAVE). The child runs only `work`, then _exit()s: `work` must
// not use the parent's sockets or thread pools (only the forking thread exists in the child), nor
// locks another thread may have held at the fork (no logging); malloc and file I/O are safe.
//
// The parent polls fd(), readable once the child has finished or died, then calls finish(). The
// child dies with the thread that forked it (PR_SET_PDEATHSIG). Memory: the parent's pages it
// changes while the child runs are copied once each. Not thread-safe; move-only; destroying a
// task whose child still runs kills the child (SIGKILL) and reaps it.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"
#include "psd/background_task.h"

namespace psrun::psd {

class ForkedTask final : public BackgroundTask {
  public:
    using Work = std::function<Result<void>()>;

    // Forks a child that runs `work`. kIo naming the system error when the pipe or the fork fails
    // (e.g. no memory for the page tables): the caller may run `work` itself instead.
    [[nodiscard]] static Result<std::unique_ptr<ForkedTask>> start(const Work& work);
    ~ForkedTask() override;
    ForkedTask(const ForkedTask&) = delete;
    ForkedTask& operator=(const ForkedTask&) = delete;

    int fd() const override { return result_.get(); }  // readable when the child is done (or dead)
    pid_t pid() const { return pid_; }
    // Blocks until the child has exited, reaps it and returns what `work` returned (its error code
    // and message); when the child died without a result, a kIo error naming the signal or the
    // exit status. Call once.
    [[nodiscard]] Result<void> finish() override;
    std::string describe() const override { return "a forked writer (pid " + std::to_string(pid_) + ")"; }

  private:
    ForkedTask(pid_t pid, UniqueFd result) : pid_(pid), result_(std::move(result)) {}

    pid_t pid_ = -1;
    bool reaped_ = false;  // finish() waited for it
    UniqueFd result_;      // the pipe's read end: the child's result, then EOF
};

}  // namespace psrun::psd
