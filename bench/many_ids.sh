#!/usr/bin/env bash
# Many raw ids (issue 36's acceptance: worker peak RSS flat in the tables' total rows, psd RSS
# against its live rows and their optimizer slots). Writes N examples of a Criteo-shaped layout to
# DIR: 13 dense features, 26 fields of raw 64-bit ids (uint64 [N, 1] each), random clicks (the
# model's AUC is not the point). Each field's ids are drawn uniformly from DISTINCT values
# (DISTINCT=0: every lookup a fresh random 64-bit id, 26 N rows in all). Then trains
# bench/criteo_data.py's DLRM (embedding width DIM, MLPs BOTTOM and TOP) through `psrun local --ps
# PS --workers WORKERS` async with all 26 tables keyed by raw ids, CAP rows of capacity each (room for the ids' uneven spread over the shards),
# OPTIMIZER (adagrad, adam, ...), batch BATCH, STEPS updates, and samples every daemon's peak RSS
# (VmHWM) until it exits. Prints one JSON line: the rows psd holds (STATS at exit), each daemon's
# peak RSS (MB), each psd's live rows + optimizer slots (rows x DIM x 2 floats with Adagrad, 3 with
# Adam; MB), its peak RSS over that, its id index (STATS index_bytes, MB), examples/s.
# Run it twice, with DISTINCT=0 and a small DISTINCT, to see the worker's RSS against the rows.
# Usage: bench/many_ids.sh DIR [N=200000] [STEPS=N/BATCH]
#        (env: DISTINCT=0 CAP=1.25 N DIM=4 OPTIMIZER=adagrad BOTTOM=64 TOP=64 PS=4 WORKERS=2 BATCH=1024 PSRUN=build/launcher/psrun)
set -u
. "$(dirname "$0")/peak_rss.sh"  # peak_rss_json
dir=$1 n=${2:-200000}
batch=${BATCH:-1024} ps=${PS:-4} workers=${WORKERS:-2} dim=${DIM:-4} distinct=${DISTINCT:-0}
steps=${3:-$((n / batch))} cap=${CAP:-$((n + n / 4))}
psrun=${PSRUN:-build/launcher/psrun}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
/usr/bin/python3 "$here/criteo_data.py" "$dir/model" --train 1000 --test 1000 --dim "$dim" \
    --bottom "${BOTTOM:-64}" --top "${TOP:-64}" >/dev/null || exit 1
/usr/bin/python3 - "$dir" "$n" "$distinct" "$cap" <<'PY' || exit 1
import json, sys
import numpy as np
d, n, distinct, cap = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(7)
for split, count in (("train", n), ("test", 10000)):
    np.save(f"{d}/{split}_dense.npy", rng.lognormal(0, 1.5, size=(count, 13)).astype(np.float32))
    np.save(f"{d}/{split}_y.npy", (rng.random((count, 1)) < 0.25).astype(np.float32))
    for f in range(26):
        if distinct:  # DISTINCT values per field, each a random 64-bit id
            pool = rng.integers(0, 2**64 - 1, size=distinct, dtype=np.uint64, endpoint=True)
            ids = pool[rng.integers(0, distinct, size=count)]
        else:
            ids = rng.integers(0, 2**64 - 1, size=count, dtype=np.uint64, endpoint=True)
        np.save(f"{d}/{split}_r{f}.npy", ids.reshape(count, 1))
m = json.load(open(f"{d}/model/dlrm.json"))
for layer in m["layers"]:
    if layer["kind"] == "embedding":
        layer["vocabulary"] = cap
json.dump(m, open(f"{d}/dlrm.json", "w"))
PY
out=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$out"' EXIT
files=()
for split in train test; do
    files+=("--$split-images" "$dir/${split}_dense.npy" "--$split-labels" "$dir/${split}_y.npy")
    for f in $(seq 0 25); do files+=("--$split-input" "c$f=$dir/${split}_r$f.npy"); done
done
tables=$(seq -s, -f 'emb%g' 0 25)
"$psrun" local --ps "$ps" --workers "$workers" --no-auth --grace 120 -- --model "$dir/dlrm.json" "${files[@]}" \
    --optimizer "${OPTIMIZER:-adagrad}" --learning-rate "${LR:-0.05}" --batch-size "$batch" --steps "$steps" --log-every 1000 \
    --raw-ids "$tables" --model-dir "$out/run" >"$out/log" 2>&1 &
launcher=$!
rss=$(peak_rss_json "$launcher")
wait "$launcher"
rc=$?
/usr/bin/python3 - "$out" "$rc" "$rss" "$dim" "$n" "$distinct" "$cap" "${OPTIMIZER:-adagrad}" <<'PY'
import json, re, sys
out, rc, rss, dim, n, distinct, cap = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), *map(int, sys.argv[4:8])
optimizer = sys.argv[8]
copies = {"sgd": 1, "momentum": 2, "nesterov": 2, "adagrad": 2}.get(optimizer, 3)  # rows + optimizer slots
log = open(out + "/log").read()
s = json.load(open(out + "/run/summary.json")) if rc == 0 else {}
rows, index_mb = {}, {}
for m in re.finditer(r"\[psd:(\d+)\].*exiting with code \d+ \((\{.*\})\)", log):
    tables = json.loads(m.group(2)).get("keyed_tables", {}).values()
    rows[int(m.group(1))] = sum(t["rows"] for t in tables)
    index_mb[int(m.group(1))] = round(sum(t.get("index_bytes", 0) for t in tables) / 2**20, 1)
live_mb = {i: r * dim * copies * 4 / 2**20 for i, r in rows.items()}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(json.dumps({
    "rc": rc, "examples": n, "distinct_per_field": distinct or None, "capacity_per_table": cap, "dim": dim,
    "optimizer": optimizer,
    "rows": sum(rows.values()), "rows_per_psd": [rows[i] for i in sorted(rows)],
    "peak_rss_mb": dict(sorted(rss.items())),
    "psd_live_rows_and_slots_mb": [round(live_mb[i], 1) for i in sorted(live_mb)],
    "psd_index_mb": [index_mb[i] for i in sorted(index_mb)],
    "psd_rss_over_live": [round(rss.get(f"psd-{i}", 0) / live_mb[i], 3) if live_mb[i] else None for i in sorted(live_mb)],
    "examples_per_s": s.get("images_per_sec"), "steps": s.get("global_step"), "cpu": cpu}))
if rc != 0:
    print(log[-3000:], file=sys.stderr)
PY
