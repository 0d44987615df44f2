#!/usr/bin/env bash
# Fashion-MNIST from its IDX files against the same images as PNG and JPEG image folders and as
# TFRecord files of PNG and JPEG Examples (docs/benchmarks.md "Data"): workerd --standalone
# trains mnist_deep from each with the same options, round r with seed r + 1; one JSON line per
# run with the format, test accuracy, ms per step (train_seconds / steps) and the data wait, then
# one line per format: its mean accuracy, and over the seeds IDX ran too, the mean accuracy
# difference from IDX (points) and the median step-speed ratio to IDX (>= 0.95 is the goal).
# Usage: bench/data_formats.sh WORKERD PSRUN DIR [STEPS] [ROUNDS] [FORMATS]
#   DIR        where the formats are written (bench/idx_to_formats.py; kept for reuse)
#   STEPS      steps per run (default 1000)
#   ROUNDS     rounds over the formats, interleaved, one seed each (default 1)
#   FORMATS    default "idx folder-png folder-jpeg tfrecord-png tfrecord-jpeg"
# Extra workerd options via $WORKERD_OPTS (e.g. "--threads 2"). FIRST_ROUND=K starts at round
# K (seed K + 1) and adds to DIR/runs.jsonl instead of starting it afresh: more seeds later.
set -euo pipefail
workerd=$1
psrun=$2
dir=$3
steps=${4:-1000}
rounds=${5:-1}
formats=${6:-"idx folder-png folder-jpeg tfrecord-png tfrecord-jpeg"}
src=$(cd "$(dirname "$0")/.." && pwd)
idx=$dir/idx
"$psrun" data fetch --dataset fashion-mnist --data-dir "$idx" >/dev/null
names=tshirt,trouser,pullover,dress,coat,sandal,shirt,sneaker,bag,boot
for f in $formats; do
    [ "$f" = idx ] || [ -d "$dir/$f" ] ||
        /usr/bin/python3 "$src/bench/idx_to_formats.py" "$idx" "$dir/$f" "$f" --names "$names" --quality 95 2>/dev/null
done
first=${FIRST_ROUND:-0}
[ "$first" -gt 0 ] || : >"$dir/runs.jsonl"
for ((r = first; r < first + rounds; r++)); do
    for f in $formats; do
        case $f in
            idx) data=(--data-dir "$idx" --dataset fashion-mnist) ;;
            folder-*) data=(--train-dir "$dir/$f/train" --test-dir "$dir/$f/test") ;;
            tfrecord-*) data=(--train-data "$dir/$f/train-*" --test-data "$dir/$f/test-00000-of-00001.tfrecord") ;;
        esac
        out=$dir/run-$f-$r
        rm -rf "$out"
        # shellcheck disable=SC2086
        "$workerd" --standalone --model mnist_deep --steps "$steps" --seed $((r + 1)) --log-every 1000000 \
            --model-dir "$out" "${data[@]}" ${WORKERD_OPTS:-} >"$out.log" 2>&1
        /usr/bin/python3 - "$out/summary.json" "$f" "$r" "$(uptime | sed 's/.*load average: //')" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(json.dumps({"format": sys.argv[2], "round": int(sys.argv[3]), "seed": int(sys.argv[3]) + 1, "steps": s["global_step"],
                  "test_accuracy": s["test_accuracy"], "ms_per_step": 1000 * s["train_seconds"] / s["global_step"],
                  "images_per_sec": s["images_per_sec"], "data_wait_percent": s["data_wait_percent"],
                  "data_handling_percent": s["data_handling_percent"],
                  "data_max_wait_ms": s["data_max_wait_ms"], "load": sys.argv[4]}))
PY
    done
done | tee -a "$dir/runs.jsonl"
/usr/bin/python3 - "$dir/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in runs:
    by.setdefault(r["format"], {})[r["seed"]] = r
base = by.get("idx", {})
for f, rs in by.items():
    line = {"format": f, "seeds": len(rs), "mean_test_accuracy": round(100 * statistics.mean(r["test_accuracy"] for r in rs.values()), 2),
            "median_ms_per_step": round(statistics.median(r["ms_per_step"] for r in rs.values()), 2),
            "median_data_wait_percent": round(statistics.median(r["data_wait_percent"] for r in rs.values()), 2)}
    paired = sorted(set(rs) & set(base))
    if paired:  # the same seeds run from IDX: mean accuracy difference and median step-speed ratio
        line["paired_seeds"] = len(paired)
        line["accuracy_minus_idx_points"] = round(100 * statistics.mean(rs[s]["test_accuracy"] - base[s]["test_accuracy"] for s in paired), 2)
        line["step_speed_vs_idx"] = round(statistics.median(base[s]["ms_per_step"] / rs[s]["ms_per_step"] for s in paired), 3)
    print(json.dumps(line))
PY
