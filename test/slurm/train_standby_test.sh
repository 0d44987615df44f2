#!/usr/bin/env bash
# Real training on the Slurm lab with jobs/ps-standby.sbatch: a standby psd step (n1, in the background), then two
# worker steps of 3 workers, one after the other, in the same allocation, then `psrun stop`. Real MNIST, batch 100,
# STEPS global steps per run, 1 thread per task. Checks: sbatch --wait returns 0; no task failed; run 1 trains
# from global step 0 to STEPS; run 2 continues from the parameters the standby psd kept (no INIT of fresh weights,
# "training from global step STEPS to 2*STEPS") and its chief's summary says so; every worker of both runs
# trained up to its run's last step; the psd kept serving between the runs, saved its shard at step 2*STEPS on
# `psrun stop` and exited 0; accuracy after run 2 is sane (>= 90%).
# Usage: train_standby_test.sh PSRUN   (from the repository root, as meson runs it)
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
. "$SLURM_TEST_DIR/train_util.sh"
STEPS=${STEPS:-150}
lab_start 3
DATA=$(mnist_dir)
MODEL=$OUT/model
# A port that is free now (the script's default is derived from the job id, which may hit the lab's own ports).
PS_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

export PSRUN DATA_DIR=$DATA MODEL_DIR=$MODEL STEPS BATCH_SIZE=100 LEARNING_RATES="1e-3 5e-4" PS_PORT \
  TRAIN_OPTS="--eval-every 0"
run_job standby 420 -N2 -n4 -c1 -w 'n[1-2]' --time=10 "$JOBS_DIR/ps-standby.sbatch"
[ "$JOB_RC" = 0 ] || job_fail standby "sbatch --wait returned $JOB_RC"
expect_no_task_failure standby

# Split the output into run 1 and run 2 by the script's "== " markers (ranks repeat across steps; the ps step's
# lines land in both parts, as it runs throughout).
awk -v d="$OUT" '/^== training run 1 /{f = "run1"} /^== training run 2 /{f = "run2"} f {print > (d "/standby." f)}' \
  "$OUT/standby.out"
[ -s "$OUT/standby.run1" ] && [ -s "$OUT/standby.run2" ] || job_fail standby "not two training runs"
grep -Eq "^== training run 1 with learning rate 1e-3, up to global step $STEPS$" "$OUT/standby.run1" \
  || job_fail standby "run 1 header"
grep -Eq "^== training run 2 with learning rate 5e-4, up to global step $((2 * STEPS))$" "$OUT/standby.run2" \
  || job_fail standby "run 2 header"

expect_line standby "^ *0: .*exec psd --index 0 --ps tcp://n1:$PS_PORT --num-workers 3 .*--key-file .*--standby" "the standby psd"
expect_line standby "^ *0: .*\[psd:0\] INIT: adam from step 0, last step $STEPS" "run 1 initialises the psd"
# One run per model dir: the standby psd step and both worker steps are one run (the job's id).
expect_line standby "\[psd:0\] model dir $MODEL: (held by|joined) run slurm-[0-9]+" "the standby psd holds the model dir"
grep -Eq "\[workerd:0\] model dir $MODEL: joined run slurm-[0-9]+ as worker 0 \(chief\)" "$OUT/standby.run2" \
  || job_fail standby "run 2's chief did not join the standby psd's run of the model dir"
grep -Eq "\[workerd:0\] worker 0 \(chief\) of 3: training from global step 0 to $STEPS " "$OUT/standby.run1" \
  || job_fail standby "run 1's chief did not train from step 0 to $STEPS"
expect_line standby "\[psd:0\] run finished \(3 done, dead: [^)]*\); standby: keeping the shard at step $STEPS" \
  "the psd kept run 1's parameters"
grep -Eq "\[workerd:0\] psd already holds parameters: continuing from them" "$OUT/standby.run2" \
  || job_fail standby "run 2's chief did not continue from the psd's parameters"
grep -Eq "\[workerd:0\] worker 0 \(chief\) of 3: training from global step $STEPS to $((2 * STEPS)) " "$OUT/standby.run2" \
  || job_fail standby "run 2's chief did not train from step $STEPS to $((2 * STEPS))"
expect_line standby "\[psd:0\] INIT \(restored\): keeping parameters at step $STEPS, last step $((2 * STEPS))" \
  "run 2 keeps the psd's parameters"
# Every worker of each run trained (none took the previous run's FINISHED for its own and quit at once).
for run in 1 2; do
  for w in 1 2; do
    grep -Eq "\[workerd:$w\] done: [1-9][0-9]* steps by this worker .*global step $((run * STEPS));" "$OUT/standby.run$run" \
      || job_fail standby "worker $w of run $run did not train up to global step $((run * STEPS))"
  done
done
expect_line standby "^stopped ps-0 \(tcp://[^)]*\), shard saved$" "psrun stop"
expect_line standby "^ *0: .*\[psd:0\] saved shard \(step $((2 * STEPS))\) to $MODEL/ps-0.shard" "the shard saved on stop"
expect_line standby "^ *0: .*\[psd:0\] exiting with code 0" "psd exit code"
[ -s "$MODEL/ps-0.shard" ] || fail "no $MODEL/ps-0.shard after psrun stop"
[ ! -e "$MODEL/ps-0.endpoint" ] || fail "$MODEL/ps-0.endpoint left behind after psrun stop"

start=$(summary_field "$MODEL" start_step)
step=$(summary_field "$MODEL" global_step)
acc=$(summary_field "$MODEL" test_accuracy)
[ "$start" = "$STEPS" ] && [ "$step" = "$((2 * STEPS))" ] \
  || fail "run 2's summary.json: steps $start..$step, expected $STEPS..$((2 * STEPS))"
ge "$acc" 0.90 || fail "test accuracy $acc < 0.90 after two runs of $STEPS steps"
note "ok: standby psd served 2 worker steps ($STEPS steps each, 3 workers): test accuracy $acc, $JOB_SECONDS s for sbatch --wait"
