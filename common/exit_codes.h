// Exit codes beyond result.h's kExitOk/kExitFailure/kExitUsage.
#pragma once

namespace psrun {

// Stopped by a signal (Slurm's warning, SIGTERM, preemption) after a clean coordinated checkpoint:
// the job did not finish but nothing psd applied was lost; rerun or requeue it to resume
// (sysexits' EX_TEMPFAIL). Distinct from 1 so that requeue scripts can tell preemption from a crash.
inline constexpr int kExitPreempted = 75;

}  // namespace psrun
