#!/usr/bin/env bash
# Real synchronous training on the Slurm lab: jobs/mnist-sync.sbatch (2 nodes x 3 tasks = 1 psd + 5 workers, 4
# gradients aggregated per step and 1 backup worker), real MNIST, batch 100 per worker, Adam 1e-3, STEPS global
# steps, 1 thread per task. Checks: sbatch --wait returns 0; no task failed; psd ran in sync mode with
# --replicas-to-aggregate 4 --backup-workers 1, applied exactly STEPS aggregated updates, dropped the backup
# worker's late gradients (stale > 0) and left through its done-queue with exit code 0; the chief's summary is at
# the last step with a sane test accuracy (>= 95%); the model dir holds checkpoints, metrics, events and the plot.
# Usage: train_sync_test.sh PSRUN   (from the repository root, as meson runs it)
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
. "$SLURM_TEST_DIR/train_util.sh"
STEPS=${STEPS:-120}
lab_start 3
DATA=$(mnist_dir)
MODEL=$OUT/model

export PSRUN DATA_DIR=$DATA MODEL_DIR=$MODEL STEPS BATCH_SIZE=100 LEARNING_RATE=1e-3 TRAIN_OPTS="--eval-every 0"
unset PS REPLICAS BACKUP  # the script's defaults: 1 ps, 1 backup worker, replicas = workers - 1
run_job sync 420 -N2 --ntasks-per-node=3 -c1 -w 'n[2-3]' --time=10 "$JOBS_DIR/mnist-sync.sbatch"
[ "$JOB_RC" = 0 ] || job_fail sync "sbatch --wait returned $JOB_RC"
expect_no_task_failure sync

expect_line sync "^ *0: .*exec psd --index 0 --ps tcp://n2:[0-9]+ --num-workers 5 .*--sync --replicas-to-aggregate 4 --backup-workers 1" \
  "rank 0 execs a sync psd with 4 replicas and 1 backup worker"
expect_line sync "^ *0: .*\[psd:0\] serving on tcp://127\.0\.0\.2:[0-9]+ \(sync mode, 5 workers, MAC\)" "psd binds n2's address"
expect_psd_done_queue sync 0 5
stats=$(grep -E '^ *0: .*\[psd:0\] exiting with code 0 \(' "$OUT/sync.out" | sed 's/^[^(]*(//; s/)$//')
python3 - "$stats" "$STEPS" <<'PY' || job_fail sync "psd statistics: $stats"
import json, sys
s, steps = json.loads(sys.argv[1]), int(sys.argv[2])
assert s["mode"] == "sync", s["mode"]
assert s["applied"] == steps, f"applied {s['applied']} aggregated updates, expected {steps}"
assert s["step"] == steps, f"psd at step {s['step']}"
assert s["stale"] > 0, "no late gradient dropped: the backup worker never lagged?"
assert s["nonfinite"] == 0 and s["errors"] == 0 and s["workers_dead"] == [], s
print(f"psd: {s['applied']} updates, {s['stale']} late gradients dropped")
PY

expect_model_dir "$MODEL"
acc=$(summary_field "$MODEL" test_accuracy)
step=$(summary_field "$MODEL" global_step)
[ "$step" = "$STEPS" ] || fail "summary.json global_step $step, expected $STEPS"
ge "$acc" 0.95 || fail "test accuracy $acc < 0.95 after $STEPS sync steps of 4 x 100 images"
note "ok: sync 1 ps + 5 workers (4 replicas + 1 backup), $STEPS steps: test accuracy $acc, $JOB_SECONDS s for sbatch --wait"
