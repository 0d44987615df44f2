#!/usr/bin/env bash
# Several sparse embedding tables in one model end to end (docs/sparse.md "Several tables"): a
# recommender-shaped model (user ids [2] as the primary input, item ids [3] and a float vector [4]
# fed by --train-input; each id input read by its own embedding; concat, MLP, sigmoid) on data a
# numpy generator draws from a planted logistic rule. Trained by real psd and workerd processes
# (psrun local --ps 2 --workers 2 --sync) once all dense and once with both tables sparse, with SGD
# (--sparse-embedding given twice) and Adagrad (a,b): the same loss curve and test AUC, and psrun
# export gives the same two tables. psrun eval and predict read the sparse run's checkpoint (both tables
# assembled from the shards' row pieces); model show places both tables; psd counts as many
# messages as with one sparse table (one PULL and one PUSH_PULL per step and shard). A psd killed with -9 is
# restored from the checkpoint with both tables' rows. With --accumulate-steps 2 of 25 the sparse run
# equals the dense one with the same options (loss curve, AUC, exported tables) and the batch-50
# run, with one exchange per update (issue 35). Then the exit-2 errors: one table named
# twice, an embedding whose input another node reads too (the message names the input), an id
# beyond a table in --train-input's file (at load, naming the file; sparse or dense).
# Needs python3-numpy and onnx. Usage: sparse_multi_table_test.sh <workerd> <psrun>
set -u
workerd=$1
psrun=$2
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check()

"$py" - "$tmp/d" <<'EOF_PY' || { echo "FAILED: the generator"; exit 1; }
import json, os, sys
import numpy as np
d = sys.argv[1]
os.makedirs(d)
rng = np.random.default_rng(3)
U, I = 400, 600
wu, wi, wx = rng.normal(0, 0.8, U), rng.normal(0, 0.8, I), np.array([1.0, -1.0, 0.5, 0.0])
def draw(n):
    user = (rng.zipf(1.4, size=(n, 2)) * 7919 % U).astype(np.int64)
    item = (rng.zipf(1.3, size=(n, 3)) * 104729 % I).astype(np.int64)
    x = rng.normal(0, 1, size=(n, 4)).astype(np.float32)
    logit = wu[user].sum(1) + wi[item].sum(1) + x @ wx - 0.5
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32).reshape(n, 1)
    return user, item, x, y
for split, n in (("train", 4000), ("test", 1000)):
    for name, a in zip(("user", "item", "x", "y"), draw(n)):
        np.save(f"{d}/{split}_{name}.npy", a)
def model(shared):
    layers = [
        {"kind": "embedding", "name": "emb_u", "inputs": ["user"], "vocabulary": U, "dim": 8,
         "init": {"kind": "normal", "stddev": 0.05}},
        {"kind": "flatten", "name": "fu", "axis": 1},
        {"kind": "embedding", "name": "emb_i", "inputs": ["item"], "vocabulary": I, "dim": 8,
         "init": {"kind": "uniform", "limit": 0.05}},
        {"kind": "flatten", "name": "fi", "axis": 1},
        {"kind": "dense", "name": "fx", "inputs": ["x"], "units": 4},
        {"kind": "concat", "name": "all", "inputs": ["fu", "fi", "fx"], "axis": 1},
        {"kind": "dense", "name": "fc1", "units": 16},
        {"kind": "relu"},
        {"kind": "dense", "name": "out", "units": 1}]
    if shared:  # a second reader of the item ids
        layers[5:5] = [{"kind": "embedding", "name": "emb_i2", "inputs": ["item"], "vocabulary": I, "dim": 2},
                       {"kind": "flatten", "name": "fi2", "axis": 1}]
        layers[7]["inputs"] = ["fu", "fi", "fi2", "fx"]
    return {"name": "rec", "targets": 1,
            "inputs": [{"name": "user", "dims": [2], "type": "int"}, {"name": "item", "dims": [3], "type": "int"},
                       {"name": "x", "dims": [4], "type": "float"}],
            "layers": layers, "loss": {"kind": "sigmoid_cross_entropy", "reduction": "mean"}}
json.dump(model(False), open(f"{d}/rec.json", "w"), indent=1)
json.dump(model(True), open(f"{d}/shared.json", "w"), indent=1)
EOF_PY
data=(--model "$tmp/d/rec.json" --train-images "$tmp/d/train_user.npy" --train-labels "$tmp/d/train_y.npy"
      --train-input item="$tmp/d/train_item.npy" --train-input x="$tmp/d/train_x.npy"
      --test-images "$tmp/d/test_user.npy" --test-labels "$tmp/d/test_y.npy"
      --test-input item="$tmp/d/test_item.npy" --test-input x="$tmp/d/test_x.npy")

run() {  # [batch=B] run <name> <optimizer> [workerd options...]: 60 sync steps of 2 workers (batch 50) into $tmp/<name>
    local name=$1 opt=$2; shift 2
    timeout 300 "$psrun" local --ps 2 --workers 2 --sync --no-auth --grace 30 -- "${data[@]}" --steps 60 \
        --batch-size "${batch:-50}" --optimizer "$opt" --learning-rate 0.1 --log-every 10 --threads 1 --model-dir "$tmp/$name" \
        "$@" >"$tmp/$name.log" 2>&1
}

for opt in sgd adagrad; do
    run "dense-$opt" "$opt"
    rc=$?
    check "$opt: the dense tables train (rc=$rc)" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || tail -20 "$tmp/dense-$opt.log"
    if [ "$opt" = sgd ]; then sparse=(--sparse-embedding emb_u --sparse-embedding emb_i/table)
    else sparse=(--sparse-embedding emb_u,emb_i); fi
    run "sparse-$opt" "$opt" "${sparse[@]}"
    rc=$?
    check "$opt: both tables sparse train (${sparse[*]}; rc=$rc)" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || tail -20 "$tmp/sparse-$opt.log"
    "$py" "$(dirname "$0")/compare_sparse_runs.py" "$tmp/dense-$opt" "$tmp/sparse-$opt" 0.6 >"$tmp/compare-$opt" 2>&1
    rc=$?
    check "$opt: equal loss curves (every 10 steps) and test AUC, dense and sparse" test "$rc" -eq 0
    cat "$tmp/compare-$opt"
done
check "the sparse run logs both tables' rows per step" \
    grep -Eq "sparse table emb_i/table \[600 x 8\]: [0-9.]+ distinct ids per batch of 150 lookups" "$tmp/sparse-sgd.log"
check "... and the user table's" \
    grep -Eq "sparse table emb_u/table \[400 x 8\]: [0-9.]+ distinct ids per batch of 100 lookups" "$tmp/sparse-sgd.log"
check "... each psd holding half of both tables' rows ((200 + 300) x 8 floats)" \
    grep -Eq '"row_floats":4000,' "$tmp/sparse-sgd.log"

# Both tables travel in the step's one PULL and one PUSH_PULL per shard: psd counts about as many
# messages as with one sparse table (heartbeats vary by a few), where a round trip per table would
# add 2 x 60 per worker.
run one-sgd sgd --sparse-embedding emb_i
messages() { grep -o '"messages":[0-9]*' "$1" | cut -d: -f2 | paste -sd+ | bc; }
two=$(messages "$tmp/sparse-sgd.log") one=$(messages "$tmp/one-sgd.log")
check "two sparse tables take about as many messages as one (both shards: $two and $one)" \
    test -n "$one" -a -n "$two" -a $((two - one)) -le 8 -a $((one - two)) -le 8

# Gradient accumulation (--accumulate-steps 2 of 25): each update's two micro-batches are mapped
# together, so both train on the same rows and the rows seen in either get their summed, averaged
# gradient in the update's one PUSH_PULL. The sparse run equals the dense run with the same options
# (the same loss curve and, below, exported tables) and, as the dense path promises, the batch-50
# run without accumulation (equal up to float rounding of the mean loss); psd counts the messages
# of one exchange per update (the batch-50 run's).
batch=25 run dense-acc sgd --accumulate-steps 2
rc=$?
check "accumulate: the dense tables train with --accumulate-steps 2 --batch-size 25 (rc=$rc)" test "$rc" -eq 0
batch=25 run sparse-acc sgd --accumulate-steps 2 --sparse-embedding emb_u,emb_i
rc=$?
check "accumulate: both tables sparse train with --accumulate-steps 2 (rc=$rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || tail -20 "$tmp/sparse-acc.log"
"$py" - "$tmp/dense-acc" "$tmp/sparse-acc" "$tmp/sparse-sgd" <<'EOF_PY' >"$tmp/compare-acc" 2>&1
import json, sys
def curve(d):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(d + "/metrics.jsonl")) if "loss" in r]
dense, sparse, large = map(curve, sys.argv[1:])
print("dense 2x25 ", dense)
print("sparse 2x25", sparse)
print("sparse 50  ", large)
assert len(dense) == 6 and [s for s, _ in dense] == [s for s, _ in sparse] == [s for s, _ in large], "not the same steps"
for (s, a), (_, b), (_, c) in zip(dense, sparse, large):
    assert abs(a - b) <= 1e-6 * max(1.0, abs(a)), f"step {s}: dense loss {a}, sparse {b}"
    assert abs(b - c) <= 1e-5 * max(1.0, abs(c)), f"step {s}: 2 x 25 accumulated {b}, one batch of 50 {c}"
auc = [json.load(open(d + "/summary.json"))["test_auc"] for d in sys.argv[1:]]
print("test AUC", auc)
assert max(auc) - min(auc) <= 1e-4, auc
s = json.load(open(sys.argv[2] + "/summary.json"))
assert s["accumulate_steps"] == 2 and s["batch_size"] == 25 and s["global_step"] == 60, s
EOF_PY
rc=$?
check "accumulate: equal loss curves and AUC, sparse 2 x 25 vs dense 2 x 25 vs sparse 50" test "$rc" -eq 0
cat "$tmp/compare-acc"
check "... the update's distinct ids counted over its 2 x 25 examples" \
    grep -Eq "sparse table emb_i/table \[600 x 8\]: [0-9.]+ distinct ids per batch of 150 lookups" "$tmp/sparse-acc.log"
acc=$(messages "$tmp/sparse-acc.log")
check "... one PULL and one PUSH_PULL per update: as many psd messages as the batch-50 run ($acc and $two)" \
    test -n "$acc" -a $((acc - two)) -le 8 -a $((two - acc)) -le 8

for m in dense-sgd sparse-sgd dense-acc sparse-acc; do
    timeout 120 "$psrun" export --model-dir "$tmp/$m" >"$tmp/$m.export" 2>&1
    check "psrun export of $m exits 0" test $? -eq 0
done
"$py" - "$tmp/dense-sgd/model-60.onnx" "$tmp/sparse-sgd/model-60.onnx" <<'EOF_PY' >"$tmp/tables" 2>&1
import sys, numpy as np, onnx, onnx.numpy_helper as nh
inits = [{i.name: nh.to_array(i) for i in onnx.load(p).graph.initializer} for p in sys.argv[1:]]
for name, shape in (("emb_u/table", (400, 8)), ("emb_i/table", (600, 8))):
    a, b = inits[0][name], inits[1][name]
    assert a.shape == shape, a.shape
    diff = float(np.abs(a - b).max())
    print(name, "max |dense - sparse|:", diff)
    assert diff < 1e-5 and float(np.abs(a).max()) > 0, diff
EOF_PY
rc=$?
check "... the two exported runs have the same two tables within 1e-5" test "$rc" -eq 0
cat "$tmp/tables"
"$py" - "$tmp/dense-acc/model-60.onnx" "$tmp/sparse-acc/model-60.onnx" <<'EOF_PY' >"$tmp/tables-acc" 2>&1
import sys, numpy as np, onnx, onnx.numpy_helper as nh
inits = [{i.name: nh.to_array(i) for i in onnx.load(p).graph.initializer} for p in sys.argv[1:]]
for name in ("emb_u/table", "emb_i/table"):
    diff = float(np.abs(inits[0][name] - inits[1][name]).max())
    print(name, "accumulated, max |dense - sparse|:", diff)
    assert diff < 1e-6 and float(np.abs(inits[0][name]).max()) > 0, diff
EOF_PY
rc=$?
check "accumulate: dense and sparse 2 x 25 export the same two tables within 1e-6" test "$rc" -eq 0
cat "$tmp/tables-acc"

timeout 120 "$psrun" eval --model-dir "$tmp/sparse-sgd" --test-images "$tmp/d/test_user.npy" \
    --test-labels "$tmp/d/test_y.npy" --test-input item="$tmp/d/test_item.npy" --test-input x="$tmp/d/test_x.npy" \
    >"$tmp/eval.log" 2>&1
rc=$?
check "psrun eval of the two-table sparse run exits 0 (rc=$rc)" test "$rc" -eq 0
check "... with the AUC training's evaluation reported (within 1e-3)" "$py" -c "
import json, re, sys
auc = float(re.search(r'AUC ([0-9.]+)', open('$tmp/eval.log').read()).group(1))
sys.exit(0 if abs(auc - json.load(open('$tmp/sparse-sgd/summary.json'))['test_auc']) <= 1e-3 else 1)"

timeout 120 "$psrun" predict --model-dir "$tmp/sparse-sgd" --images "$tmp/d/test_user.npy" \
    --input item="$tmp/d/test_item.npy" --input x="$tmp/d/test_x.npy" --output "$tmp/p.npy" >"$tmp/predict.log" 2>&1
rc=$?
check "psrun predict of the two-table run exits 0 (rc=$rc)" test "$rc" -eq 0
check "... one probability in (0, 1) per test example" "$py" -c \
    "import numpy as np, sys; p = np.load('$tmp/p.npy'); sys.exit(0 if p.shape == (1000, 1) and ((p > 0) & (p < 1)).all() else 1)"

timeout 30 "$psrun" model show "$tmp/d/rec.json" --ps 2 --sparse-embedding emb_u --sparse-embedding emb_i >"$tmp/show" 2>&1
check "model show places both tables" grep -q "emb_u/table \[400 x 8\]: sparse table, row r on shard r mod 2, pulled and pushed by the batch's ids of user" "$tmp/show"
check "... the item table by the ids of item" grep -q "emb_i/table \[600 x 8\]: sparse table, row r on shard r mod 2, pulled and pushed by the batch's ids of item" "$tmp/show"
check "... and each shard's rows per table" grep -q "shard 1: dense [0-9]* floats ([0-9.]* MB), rows 4000 floats (0.0 MB): emb_u/table 0.0 MB, emb_i/table 0.0 MB" "$tmp/show"

# A psd killed (-9) mid-run and started again: the chief restores both tables' rows from the checkpoint.
psd_bin=$(dirname "$workerd")/../psd/psd
ps="ipc://$tmp/ps-0,ipc://$tmp/ps-1"
start_psd() { "$psd_bin" --index "$1" --ps "$ps" --num-workers 2 --no-auth >>"$tmp/fault-psd$1.log" 2>&1 & }
start_psd 0; p0=$!
start_psd 1; p1=$!
worker() {
    local i=$1; shift
    timeout 300 "$workerd" --index "$i" --ps "$ps" --num-workers 2 --no-auth "${data[@]}" --steps 1500 --batch-size 20 \
        --threads 1 --log-every 10 --sparse-embedding emb_u,emb_i --model-dir "$tmp/fault" --checkpoint-steps 40 \
        --reconnect-wait 60 --connect-timeout 10 "$@" >"$tmp/fault-w$i.log" 2>&1
}
worker 0 --chief & w0=$!
worker 1 & w1=$!
for _ in $(seq 600); do
    # Mid-run for both: the chief checkpointed twice and worker 1 is past the start barrier (the
    # chief can write both checkpoints before worker 1's barrier poll sees its INIT).
    [ "$(grep -c "checkpoint at step" "$tmp/fault-w0.log" 2>/dev/null)" -ge 2 ] &&
        grep -q "worker 1 of 2: training from" "$tmp/fault-w1.log" 2>/dev/null && break
    sleep 0.1
done
kill -9 "$p1"; wait "$p1" 2>/dev/null
sleep 1
start_psd 1; p1=$!
wait "$w0"; rc0=$?
wait "$w1"; rc1=$?
wait "$p1"; wait "$p0"
check "after kill -9 of a psd holding both tables' rows, both workers finish (rc $rc0, $rc1)" test "$rc0" -eq 0 -a "$rc1" -eq 0
check "... the chief restored every shard from a checkpoint" \
    grep -Eq "ps 1 restarted: restored every shard from .* at global step [0-9]+" "$tmp/fault-w0.log"
check "... the restarted psd loaded both tables' rows (200 + 300) and served 1500 steps" \
    grep -q '"rows_created":500,.*"step":1500' "$tmp/fault-psd1.log"

# Exit-2 errors.
error_run() {  # error_run <name> [workerd options...]
    local name=$1; shift
    timeout 60 "$workerd" --index 0 --chief --num-workers 1 --ps ipc://"$tmp/none" --no-auth "$@" >"$tmp/$name.log" 2>&1
}
error_run twice "${data[@]}" --sparse-embedding emb_i,emb_u,emb_i/table
rc=$?
check "one table named twice exits 2 (rc=$rc)" test "$rc" -eq 2
check "... saying which" grep -q "sparse-embedding emb_i/table: names embedding emb_i's table again (already --sparse-embedding emb_i): give each table once" "$tmp/twice.log"
shared=("${data[@]}")
shared[1]=$tmp/d/shared.json
error_run shared "${shared[@]}" --sparse-embedding emb_u --sparse-embedding emb_i
rc=$?
check "an embedding whose input another node reads exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the node and the input" grep -q "sparse-embedding emb_i: node emb_i2 also reads the model input item: a sparse table's embedding must be its only reader" "$tmp/shared.log"
# An id beyond the item table in --train-input's file is refused when the file is loaded, naming it,
# the example and the position, whether the table is sparse or dense (as the primary input's ids are).
"$py" -c "
import numpy as np, sys
a = np.load(sys.argv[1]); a[5, 2] = 600; np.save(sys.argv[2], a)" "$tmp/d/train_item.npy" "$tmp/bad_item.npy"
bad=("${data[@]}")
bad[7]=item=$tmp/bad_item.npy
for mode in sparse dense; do  # workerd loads its data once it has joined psd: a real one for the sparse tables
    if [ "$mode" = sparse ]; then
        timeout 60 "$psrun" local --ps 1 --workers 1 --no-auth -- "${bad[@]}" --steps 5 --sparse-embedding emb_u,emb_i \
            >"$tmp/bad-$mode.log" 2>&1
    else
        timeout 60 "$workerd" --standalone "${bad[@]}" --steps 5 >"$tmp/bad-$mode.log" 2>&1
    fi
    rc=$?
    check "$mode: an id beyond the item table in --train-input exits 2 (rc=$rc)" test "$rc" -eq 2
    check "... naming the file, the example, the position and the table" grep -q \
        "train-input item=$tmp/bad_item.npy: id 600 at example 5 position 2 is out of range 0-599 (embedding emb_i of model rec reads item and has a vocabulary of 600)" \
        "$tmp/bad-$mode.log"
done
[ "$fail" -eq 0 ] || grep -h "error" "$tmp"/*.log | head -20
exit "$fail"
