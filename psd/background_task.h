// A checkpoint write that runs beside psd's poll loop: in a forked child (psd/forked_task.h) or in
// a thread of psd reading a row snapshot (psd/thread_task.h). The poll loop polls fd(), readable
// once the work is done, then calls finish() once. Destroying a task whose work still runs stops
// it (the child is killed; the thread is asked to stop and joined). Poll-loop thread only.
#pragma once

#include <string>

#include "common/result.h"

namespace psrun::psd {

class BackgroundTask {
  public:
    virtual ~BackgroundTask() = default;
    virtual int fd() const = 0;
    // Waits until the work has ended and returns what it returned. Call once.
    [[nodiscard]] virtual Result<void> finish() = 0;
    // "a forked writer (pid N)", "a writer thread", for logs.
    virtual std::string describe() const = 0;
};

}  // namespace psrun::psd
