// Signal handling for daemons: signals are blocked in every thread and read from a
// signalfd in the daemon's poll loop, so no handler ever runs concurrently with the loop.
#pragma once

#include <initializer_list>
#include <optional>

#include "common/unique_fd.h"

namespace psrun {

// Blocks SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGHUP and SIGPIPE in the calling thread.
// Call first in main(), before any thread (ZeroMQ I/O, OpenMP) starts: threads inherit the mask,
// so Slurm's USR1 warning can never kill a helper thread.
void block_termination_signals();

// Restores the default mask; used by a forking parent in the child before exec().
void unblock_all_signals();

// A non-blocking signalfd for the signals blocked above. Not thread-safe; read it from one thread.
class SignalFd {
  public:
    SignalFd();
    int fd() const { return fd_.get(); }
    // Returns the next pending signal number, or nullopt when none is pending.
    std::optional<int> read_signal();

  private:
    UniqueFd fd_;
};

// An eventfd used to wake a poll loop from another thread. notify() is thread-safe and
// async-signal-safe; drain() is called by the loop's thread.
class WakeFd {
  public:
    WakeFd();
    int fd() const { return fd_.get(); }
    void notify();
    void drain();

  private:
    UniqueFd fd_;
};

}  // namespace psrun
