#!/usr/bin/env bash
# Fashion-MNIST from its IDX files against the same images as PNG and JPEG image folders and as
# TFRecord files of PNG and JPEG Examples (docs/benchmarks.md "Data"): workerd --standalone
# trains mnist_deep from each with the same seed and options; one JSON line per run with the
# format, test accuracy, ms per step (train_seconds / steps) and the data wait.
# Usage: bench/data_formats.sh WORKERD PSRUN DIR [STEPS] [ROUNDS] [FORMATS]
#   DIR        where the formats are written (bench/idx_to_formats.py; kept for reuse)
#   STEPS      steps per run (default 1000)
#   ROUNDS     rounds over the formats, interleaved (default 1); speed: take medians
#   FORMATS    default "idx folder-png folder-jpeg tfrecord-png tfrecord-jpeg"
# Extra workerd options via $WORKERD_OPTS (e.g. "--threads 2").
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
for ((r = 0; r < rounds; r++)); do
    for f in $formats; do
        case $f in
            idx) data=(--data-dir "$idx" --dataset fashion-mnist) ;;
            folder-*) data=(--train-dir "$dir/$f/train" --test-dir "$dir/$f/test") ;;
            tfrecord-*) data=(--train-data "$dir/$f/train-*" --test-data "$dir/$f/test-00000-of-00001.tfrecord") ;;
        esac
        out=$dir/run-$f-$r
        rm -rf "$out"
        # shellcheck disable=SC2086
        "$workerd" --standalone --model mnist_deep --steps "$steps" --seed 1 --log-every 1000000 \
            --model-dir "$out" "${data[@]}" ${WORKERD_OPTS:-} >"$out.log" 2>&1
        /usr/bin/python3 - "$out/summary.json" "$f" "$r" "$(uptime | sed 's/.*load average: //')" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print(json.dumps({"format": sys.argv[2], "round": int(sys.argv[3]), "steps": s["global_step"],
                  "test_accuracy": s["test_accuracy"], "ms_per_step": 1000 * s["train_seconds"] / s["global_step"],
                  "images_per_sec": s["images_per_sec"], "data_wait_percent": s["data_wait_percent"],
                  "data_max_wait_ms": s["data_max_wait_ms"], "load": sys.argv[4]}))
PY
    done
done
