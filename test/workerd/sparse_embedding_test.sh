#!/usr/bin/env bash
# Sparse embedding tables end to end (docs/sparse.md): generated click logs (bench/click_data.py,
# Zipf ids hashed into one shared table, a planted logistic model) trained by real psd and workerd
# processes (psrun local --ps 2 --workers 2 --sync), once with the table dense and once with
# --sparse-embedding emb. SGD and Adagrad must give the same loss curve and test AUC (the sparse
# path changes where rows live, not the mathematics), so must SGD with --clip-global-norm (the
# norm counts the pushed rows), and psrun export the same table (and, with --ema-decay, the same
# moving average: export --ema, eval --ema); the sparse
# run's log reports its rows per step. A psd killed (-9) and restarted is restored from the checkpoint;
# a table over 2^26 floats goes sparse without the option. Then the exit-2 errors: an unknown table, the option without psd, an id beyond the table.
# Needs python3-numpy (jobs/setup.sh).
# Usage: sparse_embedding_test.sh <workerd> <psrun>
set -u
workerd=$1
psrun=$2
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()

"$py" bench/click_data.py "$tmp/d" --rows 20000 --train 6000 --test 2000 --zipf 1.3 >"$tmp/planted.json" ||
    { echo "FAILED: bench/click_data.py"; exit 1; }
data=(--model "$tmp/d/click.json" --train-images "$tmp/d/train_x.npy" --train-labels "$tmp/d/train_y.npy"
      --test-images "$tmp/d/test_x.npy" --test-labels "$tmp/d/test_y.npy")

run() {  # run <name> <optimizer> [workerd options...]: 60 sync steps of 2 workers into $tmp/<name>
    local name=$1 opt=$2; shift 2
    timeout 300 "$psrun" local --ps 2 --workers 2 --sync --no-auth --grace 30 -- "${data[@]}" --steps 60 \
        --batch-size 50 --optimizer "$opt" --learning-rate 0.1 --log-every 10 --threads 1 --model-dir "$tmp/$name" \
        "$@" >"$tmp/$name.log" 2>&1
}

for opt in sgd adagrad; do
    ema=()
    [ "$opt" = sgd ] && ema=(--ema-decay 0.9)  # psd's moving average, of the dense and the sparse table alike
    run "dense-$opt" "$opt" "${ema[@]}"
    rc=$?
    check "$opt: the dense table trains (rc=$rc)" test "$rc" -eq 0
    run "sparse-$opt" "$opt" "${ema[@]}" --sparse-embedding emb
    rc=$?
    check "$opt: the sparse table trains (rc=$rc)" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || tail -20 "$tmp/sparse-$opt.log"
    "$py" "$(dirname "$0")/compare_sparse_runs.py" "$tmp/dense-$opt" "$tmp/sparse-$opt" 0.55 >"$tmp/compare-$opt" 2>&1
    rc=$?
    check "$opt: equal loss curves (every 10 steps) and test AUC, dense and sparse" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || cat "$tmp/compare-$opt"
done
# --clip-global-norm with a sparse table: each worker's norm counts the rows it pushes, so clipping
# scales the same gradient as with the table dense (whose rows outside the batch have zero
# gradient): equal loss curves, and the chief clipped the same steps (some, not all).
run dense-clip sgd --clip-global-norm 0.15
rc_dense=$?
run sparse-clip sgd --clip-global-norm 0.15 --sparse-embedding emb
rc=$?
check "--clip-global-norm trains dense (rc=$rc_dense) and with --sparse-embedding (rc=$rc)" \
    test "$rc_dense" -eq 0 -a "$rc" -eq 0
"$py" - "$tmp/dense-clip" "$tmp/sparse-clip" <<'EOF' >"$tmp/compare-clip" 2>&1
import json, sys
def curve(d):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(d + "/metrics.jsonl")) if "loss" in r]
dense, sparse = curve(sys.argv[1]), curve(sys.argv[2])
print("dense ", dense)
print("sparse", sparse)
assert len(dense) == 6 and [s for s, _ in dense] == [s for s, _ in sparse], "not the same steps"
for (s, a), (_, b) in zip(dense, sparse):
    assert abs(a - b) <= 1e-4 * max(1.0, abs(a)), f"step {s}: dense loss {a}, sparse {b}"
clipped = [json.load(open(d + "/summary.json"))["chief_clipped_steps"] for d in sys.argv[1:]]
print("chief_clipped_steps", clipped)
assert clipped[0] == clipped[1] and 0 < clipped[0], clipped
EOF
rc=$?
check "... equal loss curves and clipped steps, dense and sparse" test "$rc" -eq 0
[ "$rc" -eq 0 ] || cat "$tmp/compare-clip"
check "the sparse run logs its rows per step" \
    grep -Eq "sparse table emb/table \[20000 x 16\]: [0-9.]+ distinct ids per batch of 1300 lookups" "$tmp/sparse-sgd.log"
check "... and each psd holds half the table's rows (10,000 x 16 floats), not in its dense shard" \
    grep -Eq '"row_floats":160000,.*"shard_floats":1337[67],' "$tmp/sparse-sgd.log"

# psrun export assembles the sparse table from the psd shards' row pieces: the exported tables of the
# dense and sparse SGD runs agree.
for m in dense-sgd sparse-sgd; do
    timeout 120 "$psrun" export --model-dir "$tmp/$m" >"$tmp/$m.export" 2>&1
    check "psrun export of $m exits 0" test $? -eq 0
done
"$py" - "$tmp/dense-sgd/model-60.onnx" "$tmp/sparse-sgd/model-60.onnx" <<'EOF' >"$tmp/tables" 2>&1
import sys, numpy as np, onnx, onnx.numpy_helper as nh
tables = []
for path in sys.argv[1:]:
    init = {i.name: nh.to_array(i) for i in onnx.load(path).graph.initializer}
    tables.append(init["emb/table"])
assert tables[0].shape == (20000, 16), tables[0].shape
diff = float(np.abs(tables[0] - tables[1]).max())
print("max |dense - sparse| over the exported tables:", diff)
assert diff < 1e-5 and float(np.abs(tables[0]).max()) > 0, diff
EOF
rc=$?
check "... and the two exported tables agree within 1e-5" test "$rc" -eq 0
[ "$rc" -eq 0 ] || cat "$tmp/tables"

# --ema-decay 0.9: the sparse table's rows are averaged as the dense table is (psd/row_store.h), so
# the exported averages agree, and psrun eval --ema gives both runs the AUC of the dense run's
# end-of-training ema_test_auc.
for m in dense-sgd sparse-sgd; do
    timeout 120 "$psrun" export --ema --model-dir "$tmp/$m" >"$tmp/$m.export-ema" 2>&1
    check "psrun export --ema of $m exits 0" test $? -eq 0
    timeout 120 "$psrun" eval --ema --model-dir "$tmp/$m" --test-images "$tmp/d/test_x.npy" \
        --test-labels "$tmp/d/test_y.npy" >"$tmp/$m.eval-ema" 2>&1
    check "psrun eval --ema of $m exits 0" test $? -eq 0
done
"$py" - "$tmp" <<'EOF' >"$tmp/tables-ema" 2>&1
import json, re, sys, numpy as np, onnx, onnx.numpy_helper as nh
tmp = sys.argv[1]
def table(m, suffix):
    return {i.name: nh.to_array(i) for i in onnx.load(f"{tmp}/{m}/model-60{suffix}.onnx").graph.initializer}["emb/table"]
dense, sparse = table("dense-sgd", "-ema"), table("sparse-sgd", "-ema")
diff = float(np.abs(dense - sparse).max())
moved = float(np.abs(sparse - table("sparse-sgd", "")).max())
print("max |dense - sparse| over the exported averages:", diff, "; |average - weights| of the sparse run:", moved)
assert diff < 1e-5 and moved > 1e-4, (diff, moved)
auc = [float(re.search(r"AUC (0\.[0-9]+)", open(f"{tmp}/{m}.eval-ema").read()).group(1)) for m in ("dense-sgd", "sparse-sgd")]
summary = json.load(open(f"{tmp}/dense-sgd/summary.json"))["ema_test_auc"]
print("eval --ema AUC dense, sparse:", auc, "; the dense run's ema_test_auc:", summary)
assert abs(auc[0] - auc[1]) <= 1e-3 and abs(auc[0] - summary) <= 1e-3, (auc, summary)
EOF
rc=$?
check "... the averaged tables agree within 1e-5 and eval --ema gives the same AUC, dense and sparse" test "$rc" -eq 0
cat "$tmp/tables-ema"

# psrun eval and predict on the sparse run read its own test files as training did (int64 ids;
# one click probability per example), the table assembled from the psd shards' checkpoint pieces.
timeout 120 "$psrun" eval --model-dir "$tmp/sparse-sgd" --test-images "$tmp/d/test_x.npy" \
    --test-labels "$tmp/d/test_y.npy" >"$tmp/eval.log" 2>&1
rc=$?
check "psrun eval of the sparse run on its int64 test ids exits 0 (rc=$rc)" test "$rc" -eq 0
check "... over the 2000 test examples, with an AUC" grep -q "AUC 0\.[0-9]" "$tmp/eval.log"
grep -q "^2000 examples" "$tmp/eval.log" || { echo "FAILED: eval did not read 2000 examples"; cat "$tmp/eval.log"; fail=1; }
timeout 120 "$psrun" predict --model-dir "$tmp/sparse-sgd" --images "$tmp/d/test_x.npy" --output "$tmp/p.npy" \
    >"$tmp/predict.log" 2>&1
rc=$?
check "psrun predict on the int64 test ids exits 0 (rc=$rc)" test "$rc" -eq 0
check "... one probability in (0, 1) per test example" "$py" -c \
    "import numpy as np, sys; p = np.load('$tmp/p.npy'); sys.exit(0 if p.shape == (2000, 1) and ((p > 0) & (p < 1)).all() else 1)"

# The same over TCP with the job's key (a MAC on every message) and bf16 payload frames for the rows.
timeout 300 "$psrun" local --ps 2 --workers 2 --tcp --grace 30 -- "${data[@]}" --steps 40 --batch-size 50 \
    --threads 1 --log-every 20 --sparse-embedding emb --wire-precision bf16 --shared-memory off \
    --model-dir "$tmp/tcp" >"$tmp/tcp.log" 2>&1
rc=$?
check "sparse rows over tcp with --auth mac and bf16 frames train (rc=$rc)" test "$rc" -eq 0
check "... every shard exchanging bf16 frames" grep -q "wire precision bf16: 2 of 2 psd shards" "$tmp/tcp.log"
check "... no message refused (unauthorized 0, malformed 0) and rows pulled from both shards" \
    test "$(grep -cE '"malformed":0,.*"rows_pulled":[1-9][0-9]*,.*"unauthorized":0' "$tmp/tcp.log")" -eq 2

# A psd killed (-9) mid-run and started again by hand: the chief restores its rows (and the other
# shard's) from the newest checkpoint and the run finishes (docs/reliability.md). That checkpoint is
# differential (it holds the rows changed since the 1st: psd --checkpoint-full-every 1000), so the
# restore reads both.
psd_bin=$(dirname "$workerd")/../psd/psd
ps="ipc://$tmp/ps-0,ipc://$tmp/ps-1"
start_psd() {
    "$psd_bin" --index "$1" --ps "$ps" --num-workers 2 --no-auth --checkpoint-full-every 1000 >>"$tmp/fault-psd$1.log" 2>&1 &
}
start_psd 0; p0=$!
start_psd 1; p1=$!
worker() {
    local i=$1; shift
    timeout 300 "$workerd" --index "$i" --ps "$ps" --num-workers 2 --no-auth "${data[@]}" --steps 3000 --batch-size 20 \
        --threads 1 --log-every 10 --sparse-embedding emb --model-dir "$tmp/fault" --checkpoint-steps 40 \
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
check "after kill -9 of a psd holding rows, both workers finish (rc $rc0, $rc1)" test "$rc0" -eq 0 -a "$rc1" -eq 0
check "... the chief restored every shard from a checkpoint" \
    grep -Eq "ps 1 restarted: restored every shard from .* at global step [0-9]+" "$tmp/fault-w0.log"
restored=$(grep -Eo "ps 1 restarted: restored every shard from [^ ]*ckpt-[0-9]+" "$tmp/fault-w0.log" | grep -Eo "ckpt-[0-9]+$")
check "... from a differential checkpoint ($restored), which psd 1 wrote as one" \
    grep -Eq "written to [^ ]*/\.$restored\.tmp\.[0-9]+ in [0-9]+ ms.*rows changed since step" "$tmp/fault-psd1.log"
check "... the restarted psd loaded its rows (RESTORE) and served 3000 steps" \
    grep -q '"rows_created":10000,.*"step":3000' "$tmp/fault-psd1.log"

# Without the option, an embedding table over 2^26 floats (here 5M x 16) becomes sparse by itself.
"$py" bench/click_data.py "$tmp/big" --rows 5000000 --train 2000 --test 500 --zipf 1.3 >/dev/null
timeout 120 "$psrun" local --ps 2 --workers 1 --no-auth -- --model "$tmp/big/click.json" \
    --train-images "$tmp/big/train_x.npy" --train-labels "$tmp/big/train_y.npy" --test-images "$tmp/big/test_x.npy" \
    --test-labels "$tmp/big/test_y.npy" --steps 5 --batch-size 20 --threads 1 >"$tmp/auto.log" 2>&1
rc=$?
check "a 5M-row table trains without --sparse-embedding (rc=$rc)" test "$rc" -eq 0
check "... as a sparse table, said in the log" \
    grep -q "embedding emb's table is over 256 MiB: it lives on psd as a sparse table" "$tmp/auto.log"
timeout 30 "$psrun" model show "$tmp/big/click.json" --ps 4 >"$tmp/show" 2>&1
check "model show --ps 4 says where the table lives and each shard's rows" \
    grep -q "emb/table \[5000000 x 16\]: sparse table (automatic: over 256 MiB), row r on shard r mod 4" "$tmp/show"
check "... shard 3: 1,250,000 rows of 16" grep -q "shard 3: dense [0-9]* floats (0.0 MB), rows 20000000 floats (80.0 MB)" "$tmp/show"

# Exit-2 errors.
timeout 60 "$workerd" --index 0 --chief --num-workers 1 --ps ipc://"$tmp/none" --no-auth "${data[@]}" \
    --sparse-embedding fc9 >"$tmp/unknown.log" 2>&1
rc=$?
check "an unknown --sparse-embedding exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the model's embeddings" grep -q "no embedding of model click has that name or table; its embeddings: emb (table emb/table)" "$tmp/unknown.log"
timeout 60 "$workerd" --standalone "${data[@]}" --steps 1 --sparse-embedding emb >"$tmp/standalone.log" 2>&1
rc=$?
check "--sparse-embedding without psd exits 2 (rc=$rc)" test "$rc" -eq 2
check "... saying it needs psd" grep -q "sparse-embedding needs psd" "$tmp/standalone.log"
"$py" -c "
import numpy as np, sys
x = np.load(sys.argv[1]); x[7, 3] = 20000; np.save(sys.argv[2], x)" "$tmp/d/train_x.npy" "$tmp/bad_x.npy"
timeout 120 "$psrun" local --ps 1 --workers 1 --no-auth -- --model "$tmp/d/click.json" --train-images "$tmp/bad_x.npy" \
    --train-labels "$tmp/d/train_y.npy" --test-images "$tmp/d/test_x.npy" --test-labels "$tmp/d/test_y.npy" \
    --steps 5 --sparse-embedding emb >"$tmp/bad.log" 2>&1
rc=$?
check "an id beyond the table fails the run (rc=$rc)" test "$rc" -ne 0
check "... naming the file, the example and the position" grep -Eq "bad_x.npy.*20000 at example 7 position 3" "$tmp/bad.log"
[ "$fail" -eq 0 ] || grep -h "error" "$tmp"/*.log | head -20
exit "$fail"
