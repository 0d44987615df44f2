// Exit codes beyond result.h's kExitOk/kExitFailure/kExitUsage.
#pragma once

namespace psrun {

// Stopped by a signal (Slurm's warning, SIGTERM, preemption) after a clean coordinated checkpoint:
// the job did not finish but nothing psd applied was lost; rerun or requeue it to resume
// (sysexits' EX_TEMPFAIL). Distinct from 1 so that requeue scripts can tell preemption from a crash.
inline constexpr int kExitPreempted = 75;

// Training reached its last step but the final checkpoint could not be written (disk full, a psd
// refused the SAVE): the trained parameters are not on disk. summary.json says which step the
// newest checkpoint holds (checkpoint_step) and why saving failed (sysexits' EX_IOERR).
inline constexpr int kExitNoFinalCheckpoint = 74;

}  // namespace psrun
