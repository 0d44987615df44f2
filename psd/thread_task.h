// Work run by a thread of its own at the lowest CPU priority (SCHED_IDLE: it runs when psd's
// poll loop and the workers on the node leave a core idle), for a checkpoint written from a row
// snapshot (psd/row_store.h begin_snapshot()) while the poll loop serves. fd() (an eventfd) turns
// readable when the work has returned or thrown. The work is given a stop token: destroying the
// task before finish() asks it to stop and waits for it. Move-only through its pointer.
#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <thread>

#include "common/unique_fd.h"
#include "psd/background_task.h"

namespace psrun::psd {

class ThreadTask final : public BackgroundTask {
  public:
    using Work = std::function<Result<void>(std::stop_token)>;

    // kIo naming the system error when the eventfd or the thread cannot be made.
    [[nodiscard]] static Result<std::unique_ptr<ThreadTask>> start(Work work);
    ~ThreadTask() override;  // stops the work (its token) and joins
    ThreadTask(const ThreadTask&) = delete;
    ThreadTask& operator=(const ThreadTask&) = delete;

    int fd() const override { return done_.get(); }
    [[nodiscard]] Result<void> finish() override;
    std::string describe() const override { return "a writer thread"; }

  private:
    explicit ThreadTask(UniqueFd done) : done_(std::move(done)) {}

    UniqueFd done_;
    Result<void> result_;  // written by the thread before it signals done_
    std::jthread thread_;
};

}  // namespace psrun::psd
