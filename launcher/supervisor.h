// Starts a set of daemons as children of psrun and supervises them (`psrun local`).
//
// Every child runs in one process group of its own (not psrun's), gets SIGTERM if psrun dies
// (PR_SET_PDEATHSIG), and has stdin on /dev/null. The group is signalled as a whole, so
// grandchildren are stopped too; psrun is a child subreaper and reaps every descendant before
// run() returns, so none outlives it. Policy:
//  - a non-chief worker killed by a signal (kill -9, OOM): logged, the others go on (psd declares
//    it dead after --worker-timeout and exits non-zero at the end); run() returns 1; with
//    `elastic` (--min-workers, docs/reliability.md "Elastic membership") it is no failure: psd
//    drops it and its own exit code says whether the run succeeded;
//  - any other child that exits non-zero (but 75) or is killed by a signal: the others get
//    SIGTERM, then SIGKILL after the grace period; run() returns 1 (2 when that first failure
//    was a daemon's exit 2: a usage or configuration error) and the log names the child;
//  - SIGINT/SIGTERM/SIGHUP to psrun: the same stop, which the daemons turn into a coordinated
//    checkpoint (workerd/preemption.h, psd/drain.h); run() returns kExitPreempted (75) when the
//    daemons exited 75 or 0 with at least one 75 (clean checkpoint), else 1 (a second signal
//    kills at once);
//  - a child exiting 75 (it was preempted) is not a failure and stops nobody;
//  - the chief exiting kExitNoFinalCheckpoint (74: trained to the end, final checkpoint not
//    written) stops nobody either; run() returns 74 when that was the first failure;
//  - with `restarts` (--restart-workers N, --restart-ps N): a training worker or a psd killed by a
//    signal or exiting 1 is started again with its command line, on the same endpoint (at most N
//    restarts of that role in all, launcher/daemon_restarts.h), and is then no failure; once the
//    N are used up, the rules above apply. Nothing is restarted while psrun stops the daemons or
//    waits for the ps to exit after the last worker;
//  - every worker/evaluator exited 0: the ps get the grace period to exit by themselves, then
//    SIGTERM (and SIGKILL after another grace period); run() returns 0 unless a ps failed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "launcher/daemon_command.h"
#include "launcher/daemon_restarts.h"

namespace psrun::launcher {

class Supervisor {
  public:
    // `restarts` (may be null: no restarts) must outlive run().
    explicit Supervisor(std::chrono::milliseconds grace, DaemonRestarts* restarts = nullptr, bool elastic = false)
        : grace_(grace), restarts_(restarts), elastic_(elastic) {}
    Supervisor(const Supervisor&) = delete;
    Supervisor& operator=(const Supervisor&) = delete;

    // Starts every command (in order) and blocks until all have exited. Returns the exit code
    // for psrun (0, 1 or kExitPreempted). Must be called from the main thread of a single-threaded process:
    // it changes the signal mask of the calling thread while it runs.
    int run(const std::vector<DaemonCommand>& commands);

  private:
    struct Child {
        DaemonCommand command;
        pid_t pid = -1;
        bool running = false;
        bool is_ps = false;
        int status = 0;
    };

    bool start(Child& child);
    void signal_group(int sig);
    // `stopping`: SIGTERM was sent to the group; `draining`: the workers are done, the ps exiting.
    void reap(bool stopping, bool draining);
    static bool tolerated_death(const Child& child, int status);
    void reap_descendants();

    std::chrono::milliseconds grace_;
    DaemonRestarts* restarts_;
    bool elastic_;  // a non-chief worker killed by a signal is dropped by psd, not a failure
    std::vector<Child> children_;
    pid_t group_ = 0;
    bool failed_ = false;
    bool usage_error_ = false;      // the first failure was a daemon's exit 2
    bool checkpoint_lost_ = false;  // the first failure was kExitNoFinalCheckpoint (74)
    bool preempted_ = false;        // a child exited kExitPreempted
    bool must_stop_ = false;        // a failure that stops every daemon
};

}  // namespace psrun::launcher
