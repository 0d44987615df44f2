#include "workerd/async_exchange.h"

#include <cassert>
#include <exception>
#include <utility>

namespace psrun::worker {

AsyncExchange::AsyncExchange(SignalWatcher& watcher) : watcher_(watcher), thread_([this] { loop(); }) {}

AsyncExchange::~AsyncExchange() {
    if (in_flight_) (void)wait();
    {
        std::lock_guard lock(mutex_);
        quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void AsyncExchange::start(PsClient& client, std::span<const float> grads, std::uint64_t tag, ParamFrames& out) {
    assert(!in_flight_);
    {
        std::lock_guard lock(mutex_);
        client_ = &client;
        grads_ = grads;
        tag_ = tag;
        out_ = &out;
        result_.reset();
    }
    in_flight_ = true;
    cv_.notify_all();
}

Result<StepInfo> AsyncExchange::wait() {
    assert(in_flight_);
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return result_.has_value(); });
    in_flight_ = false;
    Result<StepInfo> r = std::move(*result_);
    result_.reset();
    return r;
}

void AsyncExchange::loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
        cv_.wait(lock, [this] { return quit_ || client_ != nullptr; });
        if (client_ == nullptr) return;  // quit with nothing to do
        PsClient* client = std::exchange(client_, nullptr);
        const auto grads = grads_;
        const auto tag = tag_;
        ParamFrames* out = out_;
        lock.unlock();
        Result<StepInfo> r = [&]() -> Result<StepInfo> {
            SignalWatcher::Blocked waiting(watcher_);
            try {
                return client->push_pull_frames(grads, tag, *out);
            } catch (const std::exception& e) {  // hand it to the training thread, which decides
                return make_error(ErrorCode::kIo, e.what());
            }
        }();
        lock.lock();
        result_.emplace(std::move(r));
        cv_.notify_all();
    }
}

}  // namespace psrun::worker
