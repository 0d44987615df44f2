#!/usr/bin/env bash
# Tables keyed by raw ids under a memory budget (docs/sparse.md "Raw ids", issue 36's acceptance):
# the DLRM of bench/criteo_data.py with all 26 tables keyed by raw 64-bit ids on psd, trained
# without a bound and under a memory budget of BUDGET (default 0.3) x the rows the unbounded run
# created, against hash buckets of the same sizes (row ids = raw id mod V_f, collisions shared).
# DIR holds criteo_data.py's output (its {split}_raw.npy). Each of ROUNDS rounds runs, in order:
#   unbounded  --raw-ids on every table, capacity 2 x the field's distinct training ids + 64
#   budget     --raw-ids under a budget of BUDGET x the rows this round's unbounded run created, in
#              all: a ceiling c per table (tables under it whole, the larger ones c rows each)
#   buckets    row ids mod each table's capacity of the budget run, no --raw-ids
# each `psrun local --ps PS --workers WORKERS`, Adam LR, batch BATCH, STEPS updates, seed = round.
# Prints one JSON line per run (test AUC, examples/s, rows, admissions, evictions, refusals) and,
# last, the medians with the CPU model and the AUC gaps to the unbounded run.
# Usage: bench/row_budget.sh DIR STEPS [ROUNDS]   (env: BUDGET=0.3 ALLOC=ceiling|even PS=4 WORKERS=2 BATCH=256
#        LR=0.001 PSRUN=build/launcher/psrun EXTRA="--admit-after 2 ...")
set -u
dir=$1 steps=$2 rounds=${3:-3}
psrun=${PSRUN:-build/launcher/psrun}
budget=${BUDGET:-0.3} alloc=${ALLOC:-ceiling} ps=${PS:-4} workers=${WORKERS:-2} batch=${BATCH:-256} lr=${LR:-0.001}
[ -f "$dir/train_raw.npy" ] && [ -f "$dir/dlrm.json" ] || { echo "$dir lacks criteo_data.py's output" >&2; exit 2; }
out=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$out"' EXIT; echo "work dir $out" >&2
# Each field's raw ids as its own input (uint64 [N, 1]).
/usr/bin/python3 - "$dir" "$out" <<'PY' || exit 1
import numpy as np, sys
src, dst = sys.argv[1:3]
for split in ("train", "test"):
    raw = np.load(f"{src}/{split}_raw.npy")
    for f in range(raw.shape[1]):
        np.save(f"{dst}/{split}_r{f}.npy", np.ascontiguousarray(raw[:, f:f + 1]))
PY
# model NAME CAPS: dlrm.json with table f's vocabulary CAPS[f] (initializers kept as generated).
model() {
    /usr/bin/python3 - "$dir/dlrm.json" "$out/$1.json" "$2" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
caps = [int(c) for c in sys.argv[3].split(",")]
for layer in m["layers"]:
    if layer["kind"] == "embedding":
        layer["vocabulary"] = caps[int(layer["name"][3:])]
json.dump(m, open(sys.argv[2], "w"))
PY
}
# buckets CAPS: row-id inputs raw mod CAPS[f] in $out/{split}_b<f>.npy.
buckets() {
    /usr/bin/python3 - "$out" "$1" <<'PY'
import numpy as np, sys
d, caps = sys.argv[1], [int(c) for c in sys.argv[2].split(",")]
for split in ("train", "test"):
    for f, cap in enumerate(caps):
        raw = np.load(f"{d}/{split}_r{f}.npy")
        np.save(f"{d}/{split}_b{f}.npy", (raw % np.uint64(cap)).astype(np.int64))
PY
}
unbounded=$(/usr/bin/python3 -c "import json; print(','.join(str(2 * d + 64) for d in json.load(open('$dir/planted.json'))['distinct']))")
model unbounded "$unbounded"
tables=$(seq -s, -f 'emb%g' 0 25)
results=$out/results.jsonl
run() {  # run ROUND KIND MODEL INPUT_PREFIX [flags...]
    local round=$1 kind=$2 model=$3 prefix=$4
    shift 4
    local files=()
    for split in train test; do
        files+=("--$split-images" "$dir/${split}_dense.npy" "--$split-labels" "$dir/${split}_y.npy")
        for f in $(seq 0 25); do files+=("--$split-input" "c$f=$out/${split}_$prefix$f.npy"); done
    done
    local start end rc
    start=$(date +%s.%N)
    "$psrun" local --ps "$ps" --workers "$workers" --no-auth --grace 60 -- --model "$out/$model.json" "${files[@]}" \
        --optimizer adam --learning-rate "$lr" --batch-size "$batch" --steps "$steps" --log-every 1000 \
        --seed "$round" --sparse-embedding "$tables" --model-dir "$out/$kind$round" ${EXTRA:-} "$@" >"$out/log_$kind$round" 2>&1
    rc=$?
    end=$(date +%s.%N)
    [ "$rc" = 0 ] || tail -20 "$out/log_$kind$round" >&2
    /usr/bin/python3 - "$out/$kind$round/summary.json" "$rc" "$start" "$end" "$steps" "$batch" "$round" "$kind" <<'PY' | tee -a "$results"
import json, os, sys
path, rc, start, end, steps, batch, rnd, kind = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:5]), *map(int, sys.argv[5:8]), sys.argv[8]
s = json.load(open(path)) if rc == 0 and os.path.exists(path) else {}
k = s.get("keyed_tables", {})
total = lambda key: sum(t.get(key, 0) for t in k.values()) if k else None
print(json.dumps({"kind": kind, "round": rnd, "rc": rc, "test_auc": s.get("test_auc"),
                  "examples_per_s": s.get("images_per_sec"), "wall_s": round(end - start, 1),
                  "rows": total("rows"), "capacity": total("capacity"), "admitted": total("admitted"),
                  "evicted_full": total("evicted_full"), "refused_full": total("refused_full"),
                  "gradients_dropped": total("gradients_dropped"),
                  "rows_per_table": [k[f"emb{f}/table"]["rows"] for f in range(26)] if k else None}))
PY
}
for round in $(seq 1 "$rounds"); do
    run "$round" unbounded unbounded r --raw-ids "$tables"
    # The budget in rows, BUDGET x every table's rows, spread as a memory budget is: a ceiling c
    # (the largest with sum(min(rows_f, c)) <= the budget), tables under it whole (their unbounded
    # capacity, as their ids spread unevenly over the shards), the larger ones c rows each. With
    # ALLOC=even instead, every table gets BUDGET of its own rows (tiny tables cut too).
    caps=$(/usr/bin/python3 -c "
import json, math
r = [json.loads(l) for l in open('$results') if json.loads(l)['kind'] == 'unbounded' and json.loads(l)['round'] == $round][0]
rows, whole = r['rows_per_table'], [int(v) for v in '$unbounded'.split(',')]
budget = $budget * sum(rows)
if '$alloc' == 'even':
    print(','.join(str(max(1, math.ceil($budget * n))) for n in rows))
else:
    c = max(k for k in range(1, max(rows) + 1) if sum(min(n, k) for n in rows) <= budget)
    print(','.join(str(whole[f] if n <= c else c) for f, n in enumerate(rows)))") || exit 1
    model "budget$round" "$caps"
    buckets "$caps"
    run "$round" budget "budget$round" r --raw-ids "$tables"
    run "$round" buckets "budget$round" b
done
/usr/bin/python3 - "$results" "$budget" "$alloc" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
med = {}
for kind in ("unbounded", "budget", "buckets"):
    runs = [r for r in rows if r["kind"] == kind and r.get("test_auc") is not None]
    if runs:
        med[kind] = {"test_auc": statistics.median(r["test_auc"] for r in runs),
                     "examples_per_s": statistics.median(r["examples_per_s"] for r in runs), "runs": len(runs)}
gaps = {k: med[k]["test_auc"] - med["unbounded"]["test_auc"] for k in med if k != "unbounded"} if "unbounded" in med else {}
print(json.dumps({"medians": med, "auc_gap_to_unbounded": gaps, "budget": float(sys.argv[2]), "alloc": sys.argv[3], "cpu": cpu}))
PY
