#!/usr/bin/env bash
# Preemption on real Slurm: jobs/mnist-requeue.sbatch trains MNIST for real (1 psd + 2 workers via `psrun run`);
# `scancel --signal=USR1 JOB` mid-training makes the chief write a coordinated checkpoint within 10 s, every
# task exits 75, the script requeues the job, and the second run logs SLURM_RESTART_COUNT=1, restores the
# checkpoint's global step and finishes (exit 0). Prints the measured signal-to-checkpoint time. (The lab lets the
# requeued job start at once instead of after Slurm's requeue delay, cred_expire = 120 s.)
# Usage: preempt_requeue_test.sh PSRUN   (run from the repository root, as meson does)
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
JOBS=$(realpath "$SLURM_TEST_DIR/../../jobs")
DATA_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/psrun/data/mnist
timeout 300 "$PSRUN" data fetch >/dev/null 2>&1 || fail "psrun data fetch failed (MNIST is needed)"
lab_start 1

STEPS=150
export PSRUN DATA_DIR MODEL_DIR=$OUT/model STEPS MAX_RESTARTS=1
export TRAIN_EXTRA="--log-every 10 --eval-every 0 --threads 1 --learning-rate 1e-3"
LOG=$OUT/job.out

# wait_for REGEX SECONDS: until the job output matches (grep -E), else fail with the output.
wait_for() {
  local deadline=$((SECONDS + $2))
  until grep -Eq "$1" "$LOG" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { cat "$LOG" >&2 || true; fail "no '$1' in the job output within $2 s"; }
    sleep 0.2
  done
}

job=$(timeout 30 sbatch --parsable --ntasks=3 -o "$LOG" "$JOBS/mnist-requeue.sbatch") || fail "sbatch failed"
note "submitted job $job"
wait_for ' step [0-9]+/150 ' 150
start=$(date +%s.%N)
timeout 10 scancel --signal=USR1 "$job" || fail "scancel --signal=USR1 failed"
note "scancel --signal=USR1 $job sent"
wait_for 'committed [0-9]+ ms after the signal' 30
committed=$(date +%s.%N)
wait_for 'srun exit 75 \(stopped after a checkpoint\): requeueing' 30
ms=$(grep -Eo 'committed [0-9]+ ms after the signal' "$LOG" | head -1 | grep -Eo '[0-9]+')
[ "$ms" -lt 10000 ] || fail "checkpoint committed $ms ms after the signal (limit 10000)"
note "signal to checkpoint committed: $ms ms (chief's clock); seen by the test after $(awk -v a="$start" -v b="$committed" 'BEGIN{printf "%.1f", b - a}') s"
# Every task of the first run exited 75: psd after the checkpoint, both workers.
grep -Eq '^0: .*preempted at step [0-9]+: the last checkpoint holds' "$LOG" || { cat "$LOG" >&2; fail "psd did not end preempted"; }
step=$(grep -Eo 'checkpoint [^ ]*ckpt-[0-9]+ at global step [0-9]+' "$LOG" | head -1 | grep -Eo '[0-9]+$')
note "first run checkpointed global step $step"

# Slurm holds a requeued job for cred_expire (120 s by default) before it may start again: in the lab, once the
# job is pending again, let it start sooner. Not in the same second: slurmd revoked the first run's credential and
# compares creation times in whole seconds, so a run allocated in the second of the revocation is killed ("Job
# credential revoked"). A begin time in the future would wait for the next periodic scheduling pass (up to 60 s),
# so wait 2 s here and then make it startable now (the update also triggers a scheduling pass).
deadline=$((SECONDS + 30))
until [ "$(timeout 10 squeue -h -j "$job" -o %T 2>/dev/null)" = PENDING ]; do
  [ $SECONDS -lt $deadline ] || fail "job $job was not requeued (state: $(timeout 10 squeue -h -j "$job" -o %T))"
  sleep 0.2
done
note "job $job requeued: $(timeout 10 squeue -h -j "$job" -o '%T %r')"
sleep 2
timeout 10 scontrol update JobId="$job" StartTime=now || fail "scontrol update StartTime=now failed"

# The requeued run: same job id, SLURM_RESTART_COUNT=1 (batch script and psrun), resumes and finishes.
deadline=$((SECONDS + 90)); next_note=$((SECONDS + 10))
until grep -Eq 'SLURM_RESTART_COUNT=1\)' "$LOG" 2>/dev/null; do
  [ $SECONDS -lt $deadline ] || { cat "$LOG" >&2 || true; fail "the requeued job did not start within 90 s"; }
  if [ $SECONDS -ge $next_note ]; then
    note "job $job still waiting to restart: $(timeout 10 squeue -h -j "$job" -o '%T %r' 2>/dev/null || true)"
    next_note=$((SECONDS + 10))
  fi
  sleep 0.2
done
wait_for 'SLURM_RESTART_COUNT=1: this job was requeued' 60
wait_for 'mnist-requeue: training finished|failed, not requeued|used up' 240
grep -q 'mnist-requeue: training finished' "$LOG" || { cat "$LOG" >&2; fail "the requeued run did not finish"; }
grep -q "restored global step $step from" "$LOG" || { cat "$LOG" >&2; fail "the requeued run did not restore step $step"; }
# One run per model dir: both incarnations of the job are run slurm-<job>; each took the dir (no refusal).
[ "$(grep -Ec "model dir $MODEL_DIR: held by run slurm-$job from now on" "$LOG")" = 2 ] \
  || { cat "$LOG" >&2; fail "the requeued job did not take its own model dir over"; }
if grep -q 'is in use by another run' "$LOG"; then cat "$LOG" >&2; fail "a run of the job was refused its own model dir"; fi
grep -q 'data position: resuming at epoch' "$LOG" || { cat "$LOG" >&2; fail "no data position on resume"; }
grep -Eq 'done: global step 150,' "$LOG" || { cat "$LOG" >&2; fail "the requeued run did not reach step 150"; }
python3 - "$MODEL_DIR/summary.json" "$step" <<'PY' || fail "summary.json of the requeued run is wrong"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["global_step"] == 150, s["global_step"]
assert s["start_step"] == int(sys.argv[2]), (s["start_step"], sys.argv[2])
PY
note "requeued run resumed at step $step and finished at 150; the job's own lines:"
grep -E 'mnist-requeue:|SLURM_RESTART_COUNT=1:|committed [0-9]+ ms|restored global step|data position|exiting with code|Exited with exit code' "$LOG" | cut -c1-200
