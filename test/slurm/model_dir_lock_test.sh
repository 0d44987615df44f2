#!/usr/bin/env bash
# One run per model dir on real Slurm (docs/reliability.md "Two runs on one model dir"): job A trains MNIST with
# jobs/mnist-1node.sbatch (1 psd + 2 workers, `psrun run`) into MODEL; job B, submitted with the same MODEL while A
# runs, must fail at once with exit 2 from every task, naming A's run (slurm-<A>); A goes on training. Then A's
# daemons are killed with SIGKILL (as on a node failure: nothing releases the lock); job C on the same MODEL takes
# the dir over ("taking over from slurm-<A>") and resumes from A's checkpoint.
# Usage: model_dir_lock_test.sh PSRUN   (from the repository root, as meson runs it)
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
. "$SLURM_TEST_DIR/train_util.sh"
lab_start 1
DATA=$(mnist_dir)
MODEL=$OUT/model
export PSRUN DATA_DIR=$DATA MODEL_DIR=$MODEL BATCH_SIZE=50 LEARNING_RATE=1e-3

# wait_for FILE REGEX SECONDS
wait_for() {
  local deadline=$((SECONDS + $3))
  until grep -Eq "$2" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || { cat "$1" >&2 || true; fail "no '$2' in $1 within $3 s"; }
    sleep 0.2
  done
}

export STEPS=100000 TRAIN_OPTS="--threads 1 --log-every 10 --eval-every 0 --checkpoint-steps 50"
job_a=$(timeout 30 sbatch --parsable -n3 -c1 -o "$OUT/a.out" "$JOBS_DIR/mnist-1node.sbatch") || fail "sbatch A failed"
note "job A: $job_a"
wait_for "$OUT/a.out" 'checkpoint at step [0-9]+ written' 240

export STEPS=200 TRAIN_OPTS="--threads 1 --eval-every 0"
run_job b 90 -n3 -c1 "$JOBS_DIR/mnist-1node.sbatch"
[ "$JOB_RC" != 0 ] || job_fail b "job B on a held model dir succeeded"
expect_line b "model dir $MODEL is in use by another run slurm-$job_a" "B names A's run"
expect_line b "give this run another --model-dir, or stop that run" "B says what to do"
if grep -Eq '\[workerd:0\] .*training from global step' "$OUT/b.out"; then
  job_fail b "job B trained on a held model dir"
fi
# Every task of B was refused with exit 2 (srun reports each non-zero task exit).
grep -Eq 'srun: error: .*tasks? [0-9,-]+: Exited with exit code 2' "$OUT/b.out" || job_fail b "no task of B exited 2"
[ "$(timeout 10 squeue -h -j "$job_a" -o %T)" = RUNNING ] || fail "job A is not running any more after B"
note "ok: job B refused after $JOB_SECONDS s while job A ($job_a) held $MODEL"

# A node failure, not a cancel: every daemon of A gets SIGKILL at once (scancel sends SIGTERM first, and A's
# daemons would checkpoint and release the dir). The daemons are found by PID: psd/workerd processes whose
# command line names this test's model dir.
daemons=()
for f in /proc/[0-9]*/cmdline; do
  pid=${f#/proc/}; pid=${pid%/cmdline}
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
  case $comm in psd|workerd) ;; *) continue ;; esac
  tr '\0' ' ' <"$f" 2>/dev/null | grep -qF -- "--model-dir $MODEL" && daemons+=("$pid")
done
[ "${#daemons[@]}" = 3 ] || fail "expected job A's 3 daemons, found ${#daemons[@]}: ${daemons[*]}"
kill -STOP "${daemons[@]}"
kill -KILL "${daemons[@]}"
note "SIGKILLed job A's daemons (pids ${daemons[*]})"
deadline=$((SECONDS + 60))
while [ -n "$(timeout 10 squeue -h -j "$job_a" -o %T 2>/dev/null)" ]; do
  [ $SECONDS -lt $deadline ] || fail "job A still in the queue 60 s after its daemons were killed"
  sleep 0.5
done
[ -e "$MODEL/.psrun/run.lock" ] || fail "the SIGKILLed job A left no lock (nothing to take over)"

latest=$(find "$MODEL" -maxdepth 1 -name 'ckpt-*' -printf '%f\n' | sort | tail -1)
[ -n "$latest" ] || fail "job A left no checkpoint in $MODEL"
latest=$((10#${latest#ckpt-}))
export STEPS=$((latest + 40)) TRAIN_OPTS="--threads 1 --eval-every 0"
run_job c 240 -n3 -c1 "$JOBS_DIR/mnist-1node.sbatch"
[ "$JOB_RC" = 0 ] || job_fail c "job C after the SIGKILLed holder failed"
expect_line c "taking over from slurm-$job_a, whose processes are all gone" "C takes the dir over"
expect_line c "restored global step $latest from" "C resumes from A's newest checkpoint"
[ ! -e "$MODEL/.psrun/run.lock" ] || fail "job C did not release the model dir"
note "ok: job C took over the model dir of the SIGKILLed job A and resumed"
