#!/usr/bin/env bash
# A data set larger than memory streamed through two workers (docs/benchmarks.md "Data"): psrun
# data synthesize writes GIGABYTES of 3x64x64 JPEG Examples in TFRecord shards, psrun local
# trains MODEL (default bench/stream64_deep.json: about mnist_deep's work per image) on them
# with 1 psd and 2 workers for one pass over the training records, and this script samples every workerd's resident memory every 2 s (VmRSS, VmHWM from
# /proc). Prints one JSON line: records, seconds, each worker's peak RSS and data wait (from its
# log), the chief's summary figures. The data set is deleted at the end unless KEEP=1.
# Usage: [MODEL=file.json] [THREADS=T] bench/stream_big.sh PSRUN DIR [GIGABYTES] [QUALITY]
set -euo pipefail
psrun=$1
dir=$2
gb=${3:-20}
quality=${4:-100}
src=$(cd "$(dirname "$0")/.." && pwd)
data=$dir/data
mkdir -p "$dir" "$data"
if [ ! -f "$data/synthesize.json" ]; then
    "$psrun" data synthesize --out "$data" --gigabytes "$gb" --shape 3x64x64 --quality "$quality" --shards 64 \
        --distinct 8192 --test-images 5000 >"$data/synthesize.json.tmp"
    mv "$data/synthesize.json.tmp" "$data/synthesize.json"
fi
records=$(/usr/bin/python3 -c "import json; print(json.load(open('$data/synthesize.json'))['train_records'])")
batch=128
steps=$((records / batch))
rm -rf "$dir/model" "$dir/rss"
"$psrun" local --ps 1 --workers 2 --grace 60 -- --model "${MODEL:-$src/bench/stream64_deep.json}" --batch-size $batch \
    --steps "$steps" --threads "${THREADS:-1}" --data-threads 1 ${STREAM_OPTS:-} --train-data "$data/train-*" \
    --test-data "$data/test-00000-of-00001.tfrecord" --model-dir "$dir/model" --log-every 2000 \
    --checkpoint-secs 0 >"$dir/local.log" 2>&1 &
local_pid=$!
# Every workerd below psrun local: its peak RSS as the kernel records it (VmHWM).
descendants() {
    local p
    for p in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        echo "$p"
        descendants "$p"
    done
}
while kill -0 "$local_pid" 2>/dev/null; do
    for p in $(descendants "$local_pid"); do
        [ "$(cat /proc/"$p"/comm 2>/dev/null)" = workerd ] || continue
        awk -v pid="$p" -v t="$(date +%s)" '/^VmRSS|^VmHWM/ { v[$1] = $2 } END { print t, pid, v["VmRSS:"], v["VmHWM:"] }' \
            /proc/"$p"/status >>"$dir/rss" 2>/dev/null || true
    done
    sleep 2
done
wait "$local_pid" && rc=0 || rc=$?
/usr/bin/python3 - "$dir" "$rc" "$records" "$(uptime | sed 's/.*load average: //')" <<'PY'
import json, re, sys
d, rc, records, load = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
peak = {}
for line in open(d + "/rss"):
    if len(line.split()) != 4:  # a process that exited while it was read
        continue
    t, pid, rss, hwm = line.split()
    peak[pid] = max(peak.get(pid, 0), int(hwm))
waits = [m.groups() for m in re.finditer(r"data: waited ([0-9.]+) s for batches \(([0-9.]+)% of ([0-9.]+) s of training, "
                                         r"longest ([0-9.]+) ms\); handling them took ([0-9.]+) s \(([0-9.]+)%\)",
                                         open(d + "/local.log").read())]
try:
    s = json.load(open(d + "/model/summary.json"))
except (OSError, ValueError):
    s = {}
print(json.dumps({"rc": rc, "train_records": records, "global_step": s.get("global_step"),
                  "train_seconds": s.get("train_seconds"), "images_per_sec": s.get("images_per_sec"),
                  "test_accuracy": s.get("test_accuracy"),
                  "worker_peak_rss_mb": sorted(round(v / 1024, 1) for v in peak.values()),
                  "worker_data_wait": [{"seconds": float(a), "percent": float(b), "train_seconds": float(c),
                                        "longest_ms": float(e), "handling_seconds": float(h),
                                        "handling_percent": float(hp)} for a, b, c, e, h, hp in waits],
                  "load_after": load}))
PY
[ "${KEEP:-0}" = 1 ] || rm -rf "$data"
