// One PUSH_PULL run on a communication thread while the training thread computes the next
// gradient (the overlap of async mode, `--overlap on`).
//
// Hand-off: start() gives the thread a PsClient, a gradient span, a tag and a ParamFrames, and
// wait() takes the result back; both go through one mutex, which is the full barrier ZeroMQ
// needs for its sockets to change threads. Between wait() (or before the first start()) and the
// next start() the training thread owns the client, the frames and the gradient buffer again and
// may use them (hooks, PULL, DONE, a replaced client after a psd restart). While an exchange is in
// flight the caller must touch none of them: the gradient is sent zero-copy.
// The thread holds a SignalWatcher::Blocked while it waits for psd, as the blocking loop does.
// start() and wait() are for one (training) thread; at most one exchange is in flight.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <thread>

#include "common/ps_client.h"
#include "common/result.h"
#include "workerd/signal_watcher.h"

namespace psrun::worker {

class AsyncExchange {
  public:
    explicit AsyncExchange(SignalWatcher& watcher);
    // Waits for an exchange in flight (its result is dropped), then stops the thread.
    ~AsyncExchange();
    AsyncExchange(const AsyncExchange&) = delete;
    AsyncExchange& operator=(const AsyncExchange&) = delete;

    // Starts client.push_pull_frames(grads, tag, out) on the thread. REQUIRES: !in_flight().
    void start(PsClient& client, std::span<const float> grads, std::uint64_t tag, ParamFrames& out);
    bool in_flight() const { return in_flight_; }
    // Blocks until the exchange started last is over and returns its result.
    // REQUIRES: in_flight().
    [[nodiscard]] Result<StepInfo> wait();

  private:
    void loop();

    SignalWatcher& watcher_;
    std::mutex mutex_;
    std::condition_variable cv_;
    // The request (set by start(), cleared by the thread when it takes it) and the reply.
    PsClient* client_ = nullptr;
    std::span<const float> grads_;
    std::uint64_t tag_ = 0;
    ParamFrames* out_ = nullptr;
    std::optional<Result<StepInfo>> result_;
    bool quit_ = false;
    bool in_flight_ = false;  // training thread only
    std::thread thread_;
};

}  // namespace psrun::worker
