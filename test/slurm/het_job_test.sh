#!/usr/bin/env bash
# jobs/mnist-het.sbatch on the Slurm lab: a heterogeneous job (component 0: 1 node x 1 task for psd, component 1:
# 2 nodes x 1 task for workers) with one `srun --het-group=0,1` step. First in plan-only mode: every rank's map
# has the one ps on component 0's node and the workers on component 1's nodes, with no --ps or --tasks given.
# Then real training (dls_mlp, 300 steps, batch 100): sbatch --wait returns 0, psd on component 0 leaves through
# its done-queue, the test accuracy is >= 0.9.
# Usage: het_job_test.sh PSRUN
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
. "$SLURM_TEST_DIR/train_util.sh"
lab_start 3
DATA=$(mnist_dir)

export PSRUN DATA_DIR=$DATA MODEL_DIR=$OUT/plan-model PSRUN_PLAN_ONLY=1
run_job het-plan 90 "$JOBS_DIR/mnist-het.sbatch"
[ "$JOB_RC" = 0 ] || job_fail het-plan "sbatch --wait returned $JOB_RC"
python3 - "$OUT/het-plan.out" <<'PY' || job_fail het-plan "the map does not follow the het-job components"
import json, re, sys
text = open(sys.argv[1]).read()
m = re.search(r"^components: psd on (\S+) \(1 tasks\), workers on (\S+) \(2 tasks\)$", text, re.M)
assert m, "no components line"
ps_node, worker_nodes = m.group(1), m.group(2)
views = [json.loads(v) for v in re.findall(r"^\d+: (\{.*\})$", text, re.M)]
assert len(views) == 3, f"{len(views)} views"
for v in views:
    assert v["ps"] == views[0]["ps"] and v["worker"] == views[0]["worker"], "views disagree"
    assert v["source"] == "slurm", v["source"]
assert len(views[0]["ps"]) == 1 and views[0]["ps"][0].split(":")[0] == ps_node, (views[0]["ps"], ps_node)
assert len(views[0]["worker"]) == 2 and ps_node not in {w.split(":")[0] for w in views[0]["worker"]}, views[0]["worker"]
print(f"het plan ok: ps {views[0]['ps']} (component 0: {ps_node}) | workers {views[0]['worker']} ({worker_nodes})")
PY

export MODEL_DIR=$OUT/model PSRUN_PLAN_ONLY=0 STEPS=300 BATCH_SIZE=100 LEARNING_RATE=1e-3 \
  TRAIN_OPTS="--model dls_mlp --eval-every 300 --threads 1"
run_job het-train 400 "$JOBS_DIR/mnist-het.sbatch"
[ "$JOB_RC" = 0 ] || job_fail het-train "sbatch --wait returned $JOB_RC"
expect_no_task_failure het-train
expect_line het-train "^ *0: .*exec psd --index 0 " "rank 0 (component 0) execs psd"
expect_psd_done_queue het-train 0 2
acc=$(summary_field "$MODEL_DIR" test_accuracy)
ge "$acc" 0.9 || fail "test accuracy $acc < 0.9 after $STEPS steps"
note "ok: het job, psd on component 0, 2 workers on component 1: test accuracy $acc after $STEPS steps ($JOB_SECONDS s)"
