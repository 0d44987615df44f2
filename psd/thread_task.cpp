#include "psd/thread_task.h"

#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <system_error>

namespace psrun::psd {

Result<std::unique_ptr<ThreadTask>> ThreadTask::start(Work work) {
    UniqueFd done(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!done.valid())
        return make_error(ErrorCode::kIo,
                          std::string("cannot create an eventfd for a writer thread: ") + std::strerror(errno));
    std::unique_ptr<ThreadTask> task(new ThreadTask(std::move(done)));
    ThreadTask* self = task.get();
    try {
        task->thread_ = std::jthread([self, work = std::move(work)](std::stop_token stop) {
            sched_param idle{};
            ::pthread_setschedparam(::pthread_self(), SCHED_IDLE, &idle);  // best effort
            try {
                self->result_ = work(stop);
            } catch (const std::exception& e) {
                self->result_ = make_error(ErrorCode::kIo, e.what());
            } catch (...) {
                self->result_ = make_error(ErrorCode::kIo, "an exception of unknown type");
            }
            const std::uint64_t one = 1;
            while (::write(self->done_.get(), &one, sizeof one) < 0 && errno == EINTR) {
            }
        });
    } catch (const std::system_error& e) {
        return make_error(ErrorCode::kIo, std::string("cannot start a writer thread: ") + e.what());
    }
    return task;
}

ThreadTask::~ThreadTask() {
    if (thread_.joinable()) {
        thread_.request_stop();
        thread_.join();
    }
}

Result<void> ThreadTask::finish() {
    thread_.join();  // the result is written before the thread ends
    return std::move(result_);
}

}  // namespace psrun::psd
