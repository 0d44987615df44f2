#!/usr/bin/env bash
# Real training across emulated hosts: jobs/mnist-nodes.sbatch on the network-namespace lab (nslab.sh), 3 nodes
# with links shaped to RATE Mbit/s (default 1000): psd on n1, workers on n2 and n3 (--placement spread), so
# every push and pull crosses two shaped links. Model dls_mlp (79,510 parameters, 318 KB), Adam 1e-3, batch 100,
# STEPS global steps (default 600), 1 thread per task. Checks: sbatch --wait returns 0, no task failed, psd left
# through its done-queue, test accuracy >= 0.93, and the link counters: n1 received and sent at least
# STEPS x 318 KB (every step's gradient in, its parameters out), the worker hosts about half each.
# Usage: nslab_train_test.sh PSRUN
set -euo pipefail
LAB_KIND=ns
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
. "$SLURM_TEST_DIR/train_util.sh"
RATE=${RATE:-1000} STEPS=${STEPS:-600}
export RATE
lab_start 3
DATA=$(mnist_dir)
MODEL=$OUT/model
MODEL_BYTES=$((79510 * 4))

export PSRUN DATA_DIR=$DATA MODEL_DIR=$MODEL PS=1 STEPS BATCH_SIZE=100 LEARNING_RATE=1e-3 \
  TRAIN_OPTS="--model dls_mlp --eval-every 300 --threads 1"
run_job nodes 420 -N3 --ntasks-per-node=1 -c1 --time=10 "$JOBS_DIR/mnist-nodes.sbatch"
[ "$JOB_RC" = 0 ] || job_fail nodes "sbatch --wait returned $JOB_RC"
expect_no_task_failure nodes
expect_line nodes "^ *0: .*exec psd --index 0 --ps tcp://n1:" "rank 0 (n1) runs psd"
expect_psd_done_queue nodes 0 2
expect_model_dir "$MODEL"
acc=$(summary_field "$MODEL" test_accuracy)
ge "$acc" 0.93 || fail "test accuracy $acc < 0.93 after $STEPS steps"

"$LAB_SH" stats >"$OUT/stats.jsonl" || fail "nslab.sh stats failed"
note "link counters: $(tr '\n' ' ' <"$OUT/stats.jsonl")"
python3 - "$OUT/stats.jsonl" "$STEPS" "$MODEL_BYTES" <<'PY' || fail "the exchange did not cross the shaped links as expected"
import json, sys
stats = {d["node"]: d for d in map(json.loads, open(sys.argv[1]))}
steps, model = int(sys.argv[2]), int(sys.argv[3])
need = steps * model
n1 = stats["n1"]
assert n1["down_bytes"] >= need and n1["up_bytes"] >= need, (n1, need)
for w in ("n2", "n3"):
    # each worker took part of the steps: it sent its gradients and received parameters over its own link
    assert stats[w]["up_bytes"] >= need * 0.2 and stats[w]["down_bytes"] >= need * 0.2, (stats[w], need)
print(f"psd host: {n1['down_bytes'] / need:.2f}x in, {n1['up_bytes'] / need:.2f}x out of STEPS x model bytes")
PY
note "ok: psd on n1, workers on n2 and n3 over ${RATE} Mbit/s links: $STEPS steps, test accuracy $acc, $JOB_SECONDS s for sbatch --wait"
