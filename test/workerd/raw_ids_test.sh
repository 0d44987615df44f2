#!/usr/bin/env bash
# Tables keyed by raw 64-bit ids end to end (docs/sparse.md "Raw ids", issue 36): a recommender-shaped
# model (a float vector [4] as the primary input, item ids [3] fed by --train-input, an embedding,
# an MLP, sigmoid) on data a numpy generator draws from a planted logistic rule. The item ids come
# twice: as rows 0..599 and as raw 64-bit values (each id multiplied by an odd 64-bit constant, so
# negative int64s and ids far beyond 2^32, one to one). Trained by real psd and workerd processes
# (psrun local --ps 2 --workers 2 --sync):
#   - --sparse-embedding emb_i on the row ids, and --raw-ids emb_i on the raw ids with room for 800
#     rows (400 per shard: the ids' hash does not split 600 ids exactly in two): both learn and reach
#     the same test AUC within 0.02 (the rows start from values drawn by row id or raw id); psd
#     admitted every raw id it saw and evicted none;
#   - a table of 200 rows (a third of the 600 ids) on the raw ids: it keeps training, its frequency
#     gate refuses ids rarer than the rows it would evict (psd's STATS), and it learns;
#   - --admit-after 3: ids seen fewer times stay out (refused occurrences, dropped gradients);
#   - --accumulate-steps 2 on the raw ids: both micro-batches' raw ids mapped together, it learns;
#   - psrun --async-tables (dense layers sync, the table async: each push's rows applied as it
#     arrives): it learns as the sync run does (AUC within 0.02), psd's STATS say table_mode async;
#   - summary.json's keyed_tables (read before the final evaluation) equal psd's counters at exit:
#     evaluations only read rows (the LOOKUP flag): they admit, count and evict nothing;
#   - the ids also as a CSV column (--input-columns): the unreduced column hashes train the table;
#   - psrun eval of the raw, admit and csv checkpoints (--raw-ids emb_i, as in training) gives each
#     run's own test AUC of that checkpoint (within 1e-6); psrun predict's probabilities give it too;
#     psrun export writes the table's rows with its id map (.ids.npy), and the exported graph fed
#     the test ids' rows by that map gives the same AUC within 1e-3 (ids not in the map read a zero
#     row there, their initial values from the checkpoint);
#   - the item ids as a model's only (first) input, given by --train-images: raw ids there train as
#     row ids there do (AUC within 0.02), and psrun eval and predict of that checkpoint give its AUC;
#   - exit 2, naming what: --raw-ids without psd, on the first input with --train-data, an unknown name,
#     --admit-probability 0; psrun eval/predict of a keyed checkpoint without
#     --raw-ids, eval --raw-ids of a table trained on row ids, --raw-ids with --onnx.
# Needs python3-numpy. Usage: raw_ids_test.sh <workerd> <psrun>
set -u
workerd=$1
psrun=$2
py=/usr/bin/python3
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), scratch_dir()
scratch_dir psrun-raw-ids  # $tmp, removed at exit

"$py" - "$tmp/d" <<'EOF_PY' || { echo "FAILED: the generator"; exit 1; }
import json, os, sys
import numpy as np
d = sys.argv[1]
os.makedirs(d)
rng = np.random.default_rng(5)
I = 600
wi, wx = rng.normal(0, 0.9, I), np.array([0.8, -0.8, 0.4, 0.0])
def draw(n):
    x = rng.normal(0, 1, size=(n, 4)).astype(np.float32)
    item = (rng.zipf(1.3, size=(n, 3)) * 104729 % I).astype(np.int64)
    logit = wi[item].sum(1) + x @ wx - 0.3
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32).reshape(n, 1)
    return x, item, y
for split, n in (("train", 4000), ("test", 1000)):
    x, item, y = draw(n)
    np.save(f"{d}/{split}_x.npy", x)
    np.save(f"{d}/{split}_item.npy", item)
    raw = (item.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(12345)).view(np.int64)
    np.save(f"{d}/{split}_raw.npy", raw)
    np.save(f"{d}/{split}_y.npy", y)
    with open(f"{d}/{split}.csv", "w") as f:
        f.write("x0,x1,x2,x3,i0,i1,i2,label\n")
        for r in range(n):
            f.write(",".join([f"{v:.6f}" for v in x[r]] + [f"item{v}" for v in item[r]] + [str(int(y[r, 0]))]) + "\n")
def model(vocabulary):
    return {"name": "rec", "targets": 1,
            "inputs": [{"name": "x", "dims": [4], "type": "float"}, {"name": "item", "dims": [3], "type": "int"}],
            "layers": [
                {"kind": "dense", "name": "fx", "inputs": ["x"], "units": 4},
                {"kind": "embedding", "name": "emb_i", "inputs": ["item"], "vocabulary": vocabulary, "dim": 8,
                 "init": {"kind": "uniform", "limit": 0.05}},
                {"kind": "flatten", "name": "fi", "axis": 1},
                {"kind": "concat", "name": "all", "inputs": ["fx", "fi"], "axis": 1},
                {"kind": "dense", "name": "fc1", "units": 16},
                {"kind": "relu"},
                {"kind": "dense", "name": "out", "units": 1}],
            "loss": {"kind": "sigmoid_cross_entropy", "reduction": "mean"}}
json.dump(model(I), open(f"{d}/rec.json", "w"), indent=1)
json.dump(model(800), open(f"{d}/roomy.json", "w"), indent=1)
json.dump(model(200), open(f"{d}/small.json", "w"), indent=1)
# The item ids as the model's only input: raw ids on the first input (the x features left out).
only = {"name": "items", "targets": 1, "inputs": [{"name": "item", "dims": [3], "type": "int"}],
        "layers": [{"kind": "embedding", "name": "emb_i", "inputs": ["item"], "vocabulary": 800, "dim": 8,
                    "init": {"kind": "uniform", "limit": 0.05}},
                   {"kind": "flatten", "name": "fi", "axis": 1},
                   {"kind": "dense", "name": "fc1", "units": 16}, {"kind": "relu"},
                   {"kind": "dense", "name": "out", "units": 1}],
        "loss": {"kind": "sigmoid_cross_entropy", "reduction": "mean"}}
json.dump(only, open(f"{d}/items.json", "w"), indent=1)
EOF_PY

# [psd_option=O] run <name> <model> <ids: item|raw> [workerd options...]: 200 sync steps of 2 workers (batch 50).
run() {
    local name=$1 model=$2 ids=$3
    shift 3
    timeout 300 "$psrun" local --ps 2 --workers 2 --sync ${psd_option:-} --no-auth --grace 30 -- --model "$tmp/d/$model.json" \
        --train-images "$tmp/d/train_x.npy" --train-labels "$tmp/d/train_y.npy" --train-input item="$tmp/d/train_$ids.npy" \
        --test-images "$tmp/d/test_x.npy" --test-labels "$tmp/d/test_y.npy" --test-input item="$tmp/d/test_$ids.npy" \
        --steps 200 --batch-size 50 --optimizer adagrad --learning-rate 0.1 --log-every 50 --threads 1 \
        --model-dir "$tmp/$name" "$@" >"$tmp/$name.log" 2>&1
    local rc=$?
    check "$name trains (rc=$rc)" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || tail -20 "$tmp/$name.log"
}
run rows rec item --sparse-embedding emb_i
run raw roomy raw --raw-ids emb_i
run budget small raw --raw-ids emb_i
run admit rec raw --raw-ids emb_i --admit-after 3
run accumulate roomy raw --raw-ids emb_i --accumulate-steps 2
psd_option=--async-tables run hybrid roomy raw --raw-ids emb_i
timeout 300 "$psrun" local --ps 2 --workers 2 --sync --no-auth --grace 30 -- --model "$tmp/d/rec.json" \
    --train-data "$tmp/d/train.csv" --test-data "$tmp/d/test.csv" --input-columns x=x0,x1,x2,x3 \
    --input-columns item=i0,i1,i2 --raw-ids emb_i --steps 200 --batch-size 50 --optimizer adagrad --learning-rate 0.1 \
    --log-every 50 --threads 1 --model-dir "$tmp/csv" >"$tmp/csv.log" 2>&1
rc=$?
check "csv (raw column hashes) trains (rc=$rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || tail -20 "$tmp/csv.log"
# Raw ids on the model's first (and only) input: --train-images IDS.npy; the same model on row ids.
for ids in item raw; do
    flag=--sparse-embedding
    [ "$ids" = raw ] && flag=--raw-ids
    timeout 300 "$psrun" local --ps 2 --workers 2 --sync --no-auth --grace 30 -- --model "$tmp/d/items.json" \
        --train-images "$tmp/d/train_$ids.npy" --train-labels "$tmp/d/train_y.npy" \
        --test-images "$tmp/d/test_$ids.npy" --test-labels "$tmp/d/test_y.npy" "$flag" emb_i --steps 200 \
        --batch-size 50 --optimizer adagrad --learning-rate 0.1 --log-every 50 --threads 1 \
        --model-dir "$tmp/first_$ids" >"$tmp/first_$ids.log" 2>&1
    rc=$?
    check "the ids as the first input ($ids, $flag) train (rc=$rc)" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || tail -20 "$tmp/first_$ids.log"
done

"$py" - "$tmp" <<'EOF_PY'
import json, re, sys
tmp = sys.argv[1]
ok = True
def check(what, cond):
    global ok
    print(("ok: " if cond else "FAILED: ") + what)
    ok = ok and cond
def keyed(name):  # the keyed table's counters of both psd, from their exit lines' STATS
    total = {}
    for line in open(f"{tmp}/{name}.log"):
        m = re.search(r"\[psd:\d\].*exiting with code \d+ \((\{.*\})\)", line)
        if m:
            for k, v in json.loads(m.group(1)).get("keyed_tables", {}).get("emb_i/table", {}).items():
                total[k] = total.get(k, 0) + v
    return total
runs = ("rows", "raw", "budget", "admit", "csv", "accumulate", "hybrid", "first_raw")
summary = {n: json.load(open(f"{tmp}/{n}/summary.json")) for n in runs}
auc = {n: summary[n]["test_auc"] for n in runs}
stats = {n: keyed(n) for n in runs[1:]}
print("test AUC", auc)
print("keyed table counters (both shards)", stats)
check(f"row ids learn (AUC {auc['rows']:.4f} > 0.7)", auc["rows"] > 0.7)
first_rows = json.load(open(f"{tmp}/first_item/summary.json"))["test_auc"]
check(f"raw ids on the first input reach that input's row ids' AUC within 0.02 ({auc['first_raw']:.4f} vs "
      f"{first_rows:.4f}), above chance", abs(auc["first_raw"] - first_rows) <= 0.02 and first_rows > 0.6)
f = stats["first_raw"]
check(f"first_raw: its table keyed by raw ids, every id seen a row ({f})",
      f.get("rows", 0) > 0 and f.get("admitted") == f.get("rows") and f.get("capacity") == 800)
check(f"raw ids reach the row ids' AUC within 0.02 ({auc['raw']:.4f} vs {auc['rows']:.4f})",
      abs(auc["raw"] - auc["rows"]) <= 0.02)
r = stats["raw"]
check(f"raw: every id seen became a row, none evicted or dropped ({r})",
      r.get("rows", 0) > 0 and r.get("admitted") == r.get("rows") and r.get("evicted_full") == 0
      and r.get("gradients_dropped") == 0 and r.get("capacity") == 800)
check(f"raw: the id index takes 24-36 bytes a row ({r.get('index_bytes')} bytes for {r.get('rows')} rows)",
      24 * r.get("rows", 0) <= r.get("index_bytes", 0) <= 36 * r.get("rows", 0))
b = stats["budget"]
check(f"budget: at most 200 rows; rarer ids refused by the full shards' gate ({b})",
      b.get("capacity") == 200 and 0 < b.get("rows", 0) <= 200 and b.get("refused_full", 0) > 0
      and b.get("gradients_dropped", 0) > 0)
check(f"budget: a table at its capacity keeps training and learns (AUC {auc['budget']:.4f} > 0.6)", auc["budget"] > 0.6)
a = stats["admit"]
check(f"admit after 3: occurrences refused, their gradients dropped, fewer rows ({a})",
      a.get("refused", 0) > 0 and a.get("gradients_dropped", 0) > 0 and a.get("rows", 0) < r.get("rows", 0))
check(f"csv: the column hashes are raw ids of the table ({stats['csv']}), AUC {auc['csv']:.4f} > 0.7",
      stats["csv"].get("rows", 0) > 0 and auc["csv"] > 0.7)
check(f"accumulate 2: raw ids of both micro-batches train the table (AUC {auc['accumulate']:.4f} vs raw "
      f"{auc['raw']:.4f}, within 0.02)", abs(auc["accumulate"] - auc["raw"]) <= 0.02)
check(f"--async-tables: the table async, the dense layers sync, it learns as the sync run (AUC {auc['hybrid']:.4f} "
      f"vs raw {auc['raw']:.4f}, within 0.02)", abs(auc["hybrid"] - auc["raw"]) <= 0.02)
modes = {n: re.findall(r'"table_mode":"(\w+)"', open(f"{tmp}/{n}.log").read()) for n in ("raw", "hybrid")}
check(f"psd's STATS at exit: table_mode sync without --async-tables, async with it ({modes})",
      modes["raw"] == ["sync"] * 2 and modes["hybrid"] == ["async"] * 2)
for n in runs[1:]:  # read before the final evaluation; psd's exit line after it
    s = summary[n].get("keyed_tables", {}).get("emb_i/table", {})
    same = all(s.get(k) == stats[n].get(k) for k in stats[n])
    check(f"{n}: summary.json's keyed_tables {dict((k, s.get(k)) for k in ('rows', 'admitted', 'refused', 'evicted_full'))} "
          f"= psd's at exit: the final evaluation admitted, counted and evicted nothing", bool(stats[n]) and same
          and len(s.get("shards", [])) == 2)
sys.exit(0 if ok else 1)
EOF_PY
check "the keyed runs' AUC and psd's counters as stated" test $? -eq 0

# psrun eval, predict and export of the keyed checkpoints (same flags as training): eval gives the
# training run's own test AUC of the same checkpoint; predict's probabilities give that AUC too;
# export writes the table's rows and the id map, and the ONNX graph fed the ids' rows by the map
# gives the same AUC again.
test_set=(--test-images "$tmp/d/test_x.npy" --test-labels "$tmp/d/test_y.npy" --test-input item="$tmp/d/test_raw.npy")
for name in raw admit; do
    "$psrun" eval --model-dir "$tmp/$name" "${test_set[@]}" --raw-ids emb_i --threads 1 -o "$tmp/eval_$name" \
        >"$tmp/eval_$name.log" 2>&1
    rc=$?
    check "psrun eval of the $name checkpoint (rc=$rc)" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || tail -5 "$tmp/eval_$name.log"
done
"$psrun" eval --model-dir "$tmp/csv" --test-data "$tmp/d/test.csv" --input-columns x=x0,x1,x2,x3 \
    --input-columns item=i0,i1,i2 --raw-ids emb_i --threads 1 -o "$tmp/eval_csv" >"$tmp/eval_csv.log" 2>&1
rc=$?
check "psrun eval of the csv checkpoint, column hashes as raw ids (rc=$rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || tail -5 "$tmp/eval_csv.log"
"$psrun" eval --model-dir "$tmp/first_raw" --test-images "$tmp/d/test_raw.npy" --test-labels "$tmp/d/test_y.npy" \
    --raw-ids emb_i --threads 1 -o "$tmp/eval_first_raw" >"$tmp/eval_first_raw.log" 2>&1
rc=$?
check "psrun eval of the first-input raw checkpoint (rc=$rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || tail -5 "$tmp/eval_first_raw.log"
"$psrun" predict --model-dir "$tmp/first_raw" --images "$tmp/d/test_raw.npy" --raw-ids emb_i --threads 1 \
    --output "$tmp/predict_first_raw.npy" >"$tmp/predict_first_raw.log" 2>&1
rc=$?
check "psrun predict of the first-input raw checkpoint (rc=$rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || tail -5 "$tmp/predict_first_raw.log"
"$psrun" predict --model-dir "$tmp/raw" --images "$tmp/d/test_x.npy" --input item="$tmp/d/test_raw.npy" \
    --raw-ids emb_i --threads 1 --output "$tmp/predict_raw.npy" >"$tmp/predict_raw.log" 2>&1
rc=$?
check "psrun predict of the raw checkpoint (rc=$rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || tail -5 "$tmp/predict_raw.log"
"$psrun" export --model-dir "$tmp/raw" -o "$tmp/raw.onnx" >"$tmp/export_raw.log" 2>&1
rc=$?
check "psrun export of the raw checkpoint (rc=$rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || tail -5 "$tmp/export_raw.log"
check "export wrote the id map beside the graph" test -s "$tmp/raw.emb_i.ids.npy"

"$py" - "$tmp" <<'EOF_PY'
import json, sys
import numpy as np
tmp = sys.argv[1]
ok = True
def check(what, cond):
    global ok
    print(("ok: " if cond else "FAILED: ") + what)
    ok = ok and cond
def auc(p, y):  # P(a positive scores above a negative), ties counted half (workerd/eval_metrics.cpp)
    a, b = p[y == 1][:, None], p[y != 1][None, :]
    return float(((a > b).sum() + 0.5 * (a == b).sum()) / (a.size * b.size))
# The run's own evaluation read exactly the checkpoint's rows (and initial values for the rest: its
# pulls only read, wire flag LOOKUP): the same AUC.
for name, bound in (("raw", 1e-6), ("admit", 1e-6), ("csv", 1e-6), ("first_raw", 1e-6)):
    s = json.load(open(f"{tmp}/{name}/summary.json"))
    e = json.load(open(f"{tmp}/eval_{name}/eval.json"))
    check(f"{name}: psrun eval evaluates the run's last checkpoint (step {e.get('step')} = {s.get('checkpoint_step')})",
          e.get("step") == s.get("checkpoint_step"))
    check(f"{name}: psrun eval's test AUC {e.get('test_auc', -1):.6f} = the run's {s['test_auc']:.6f} (within {bound:g})",
          abs(e.get("test_auc", -1) - s["test_auc"]) <= bound)
    check(f"{name}: exact match {e.get('test_accuracy', -1):.4f} = the run's {s['test_accuracy']:.4f} (within 0.002)",
          abs(e.get("test_accuracy", -1) - s["test_accuracy"]) <= 0.002)
e = json.load(open(f"{tmp}/eval_raw/eval.json"))
y = np.load(f"{tmp}/d/test_y.npy").reshape(-1)
p = np.load(f"{tmp}/predict_raw.npy")
check(f"predict wrote [1000, 1] probabilities ({p.shape})", p.shape == (1000, 1) and np.all((p >= 0) & (p <= 1)))
a = auc(p.reshape(-1), y)
check(f"predict's probabilities give eval's AUC ({a:.6f} vs {e['test_auc']:.6f})", abs(a - e["test_auc"]) <= 1e-5)
e1 = json.load(open(f"{tmp}/eval_first_raw/eval.json"))
a1 = auc(np.load(f"{tmp}/predict_first_raw.npy").reshape(-1), y)
check(f"first input: predict's probabilities give eval's AUC ({a1:.6f} vs {e1['test_auc']:.6f})",
      abs(a1 - e1["test_auc"]) <= 1e-5)
ids = np.load(f"{tmp}/raw.emb_i.ids.npy")
check(f"the id map: {ids.size} uint64 ids, ascending", ids.dtype == np.uint64 and ids.size > 500 and np.all(np.diff(ids) > 0))
raw = np.load(f"{tmp}/d/test_raw.npy").view(np.uint64)
pos = np.clip(np.searchsorted(ids, raw), 0, ids.size - 1)
rows = np.where(ids[pos] == raw, pos, ids.size).astype(np.int64)  # an id not in the map: row R
print(f"test ids not in the map: {(rows == ids.size).sum()} of {rows.size}")
np.save(f"{tmp}/test_rows.npy", rows)
try:
    import onnx
    from onnx import numpy_helper
    m = onnx.load(f"{tmp}/raw.onnx")
    table = [t for t in m.graph.initializer if t.name.startswith("emb_i")]
    w = numpy_helper.to_array(table[0]) if table else np.zeros((0, 0))
    check(f"the graph's table holds the {ids.size} rows and a zero row ({w.shape})",
          w.shape == (ids.size + 1, 8) and not w[-1].any() and w[:-1].any())
    meta = {p.key: p.value for p in m.metadata_props}
    keyed = json.loads(meta.get("psrun.keyed_tables", "[]"))
    check(f"metadata psrun.keyed_tables names the id map and the default row ({keyed})",
          len(keyed) == 1 and keyed[0]["ids_file"] == "raw.emb_i.ids.npy" and keyed[0]["default_row"] == ids.size)
except ImportError:
    print("no python3-onnx: the graph's table not read")
sys.exit(0 if ok else 1)
EOF_PY
check "eval, predict and export of the keyed checkpoints as stated" test $? -eq 0
"$psrun" eval --onnx "$tmp/raw.onnx" --test-images "$tmp/d/test_x.npy" --test-labels "$tmp/d/test_y.npy" \
    --test-input item="$tmp/test_rows.npy" --threads 1 -o "$tmp/eval_onnx" >"$tmp/eval_onnx.log" 2>&1
rc=$?
check "psrun eval of the exported graph, ids mapped to rows by the id map (rc=$rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || tail -5 "$tmp/eval_onnx.log"
"$py" - "$tmp" <<'EOF_PY'
import json, sys
tmp = sys.argv[1]
a = json.load(open(f"{tmp}/eval_onnx/eval.json")).get("test_auc", -1)
b = json.load(open(f"{tmp}/eval_raw/eval.json"))["test_auc"]
ok = abs(a - b) <= 1e-3  # the few test ids that are no row read zeros there, their initial values here
print(("ok: " if ok else "FAILED: ") + f"the exported graph gives the checkpoint's AUC ({a:.6f} vs {b:.6f}, within 1e-3)")
sys.exit(0 if ok else 1)
EOF_PY
check "the exported graph's AUC" test $? -eq 0

# Refusals: exit 2 naming what.
refused() {  # refused <what> <expected text> <psrun args...>
    local what=$1 text=$2
    shift 2
    timeout 120 "$psrun" "$@" >"$tmp/bad.log" 2>&1
    local rc=$?
    check "$what exits 2 (rc=$rc)" test "$rc" -eq 2
    check "$what says: $text" grep -q -- "$text" "$tmp/bad.log"
}
common=(--model "$tmp/d/rec.json" --train-images "$tmp/d/train_x.npy" --train-labels "$tmp/d/train_y.npy"
        --train-input item="$tmp/d/train_raw.npy" --test-images "$tmp/d/test_x.npy" --test-labels "$tmp/d/test_y.npy"
        --test-input item="$tmp/d/test_raw.npy" --steps 5 --batch-size 50 --threads 1)
refused "--raw-ids without psd" "--raw-ids needs psd" local --ps 0 --workers 1 -- "${common[@]}" --raw-ids emb_i
refused "--async-tables without --sync" "--async-tables requires --sync" local --ps 1 --workers 1 --async-tables -- \
    "${common[@]}" --raw-ids emb_i
refused "--raw-ids of an unknown embedding" "--raw-ids nope: no embedding" local --ps 1 --workers 1 -- "${common[@]}" --raw-ids nope
refused "--raw-ids on the first input with --train-data" "not --train-data" local --ps 1 --workers 1 -- \
    --model "$tmp/d/items.json" --train-data "$tmp/d/train.csv" --test-data "$tmp/d/test.csv" --raw-ids emb_i \
    --steps 5 --batch-size 50 --threads 1
refused "--admit-probability 0" "--admit-probability" local --ps 1 --workers 1 -- "${common[@]}" --raw-ids emb_i \
    --admit-probability 0
refused "psrun eval of a keyed checkpoint without --raw-ids" "give --raw-ids emb_i, as in training" \
    eval --model-dir "$tmp/raw" "${test_set[@]}" --threads 1 -o "$tmp/bad_eval"
refused "psrun predict of a keyed checkpoint without --raw-ids" "give --raw-ids emb_i" \
    predict --model-dir "$tmp/raw" --images "$tmp/d/test_x.npy" --input item="$tmp/d/test_raw.npy" --threads 1
refused "psrun eval --raw-ids of a table trained on row ids" "--raw-ids emb_i: table emb_i/table of embedding emb_i is not keyed" \
    eval --model-dir "$tmp/rows" "${test_set[@]}" --raw-ids emb_i --threads 1 -o "$tmp/bad_eval"
refused "psrun eval --raw-ids with --onnx" "--raw-ids reads the tables a --model-dir" \
    eval --onnx "$tmp/raw.onnx" "${test_set[@]}" --raw-ids emb_i --threads 1 -o "$tmp/bad_eval"
exit $fail
