#!/usr/bin/env bash
# Real training on the Slurm lab: jobs/mnist-tasklist.sbatch submitted as `sbatch --wait -N2 --ntasks-per-node=3`
# with the task list ps,worker,worker,worker,worker,worker (1 psd on n1, 5 workerd over n1 and n2; tcp with the job key's MAC
# between the "nodes"), real MNIST and a short recipe (batch 100, Adam 5e-4, 1,200 global steps, 1 thread per
# task). Async with 5 workers on 2 cores (staleness ~4) needs more steps than one worker (98% at 500) and a lower
# rate: measured with Adam 1e-3: 95.4-96.2% at 500, 97.24% at 1,000, 97.11% at 1,200 (loss spikes to ~5 at step
# 100); with 5e-4: 95.1-95.5% at 400, 97.1-97.3% at 800, 97.93% at 1,200; six runs on 2026-12-07: 97.95-98.47%
# (one with both cores kept busy beside it: 98.18%); CI failed it once (2026-12-07, its reason not kept). A cosine decay did worse
# (5e-4: 97.2-97.5%; 1e-3: 95.3-96.9%), one-cycle at 1e-3 no better (97.9-98.2%): staleness, not the schedule, sets
# the spread. Checks: sbatch --wait returns 0; no task
# failed; the psd left through its done-queue (all 5 workers sent DONE) with exit code 0; every worker finished
# at the last global step; the chief's test accuracy is >= 96% (a run that does not learn stays far below: the
# chief's first evaluation, at step 400, already reads ~95%); the model dir holds ckpt-*/ (the last step's
# named latest in `checkpoint`), metrics.jsonl, events.out.tfevents.*, curves.png, summary.json.
# Usage: train_tasklist_test.sh PSRUN   (from the repository root, as meson runs it). STEPS=N to change the steps.
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
. "$SLURM_TEST_DIR/train_util.sh"
STEPS=${STEPS:-1200} LEARNING_RATE=${LEARNING_RATE:-5e-4}
lab_start 3
DATA=$(mnist_dir)
MODEL=$OUT/model
TASKS=ps,worker,worker,worker,worker,worker

export PSRUN DATA_DIR=$DATA MODEL_DIR=$MODEL TASKS STEPS BATCH_SIZE=100 LEARNING_RATE \
  TRAIN_OPTS="--eval-every 400 --checkpoint-steps 600"
run_job tasklist 600 -N2 --ntasks-per-node=3 -c1 -w 'n[1-2]' --time=10 "$JOBS_DIR/mnist-tasklist.sbatch"
[ "$JOB_RC" = 0 ] || job_fail tasklist "sbatch --wait returned $JOB_RC"
expect_no_task_failure tasklist

# The roles of the task list, and a key file (a MAC on every message) on tcp endpoints.
expect_line tasklist "^tasks: $TASKS$" "the task list"
expect_line tasklist "^memory per task: 400 MB \(1 CPUs per task\)$" "memory per task from DefMemPerCPU=400"
expect_line tasklist "^ *0: .*exec psd --index 0 --ps tcp://[^ ]+ --num-workers 5 .*--key-file " "rank 0 execs psd on tcp with a key"
for rank in 1 2 3 4 5; do
  expect_line tasklist "^ *$rank: .*exec workerd --index $((rank - 1)) --ps tcp://" "rank $rank execs worker $((rank - 1))"
done
expect_psd_done_queue tasklist 0 5
for rank in 2 3 4 5; do  # the four non-chief workers
  expect_line tasklist "^ *$rank: .*done: [0-9]+ steps by this worker .*global step $STEPS;" "worker on rank $rank finished"
done

expect_model_dir "$MODEL"
acc=$(summary_field "$MODEL" test_accuracy)
step=$(summary_field "$MODEL" global_step)
[ "$step" = "$STEPS" ] || fail "summary.json global_step $step, expected $STEPS (the last step, no overshoot)"
ge "$acc" 0.96 || fail "test accuracy $acc < 0.96 after $STEPS steps"
last_ckpt=$(printf "ckpt-%010d" "$STEPS")
[ -d "$MODEL/$last_ckpt" ] || fail "no checkpoint of the last step ($MODEL/$last_ckpt): $(ls "$MODEL")"
[ "$LATEST_CKPT" = "$last_ckpt" ] || fail "$MODEL/checkpoint names $LATEST_CKPT as the latest, not $last_ckpt"
note "ok: 1 ps + 5 workers on n[1-2], $STEPS steps of batch 100: test accuracy $acc, $JOB_SECONDS s for sbatch --wait"
