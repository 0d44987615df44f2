#!/usr/bin/env bash
# Issue 38 item 3: summary.json's skipped_records counts every worker's skipped corrupt records,
# not only the chief's. Two TFRecord shards of MNIST PNG Examples (bench/idx_to_formats.py); a
# flipped byte in 3 records of shard 1, which worker 1 reads; psrun local with 2 workers and
# --corrupt-records skip. Worker 1 writes <model-dir>/worker-1.report.json before its DONE and the
# chief sums the reports (workerd/worker_reports.h). Every process ends by itself or by PID.
# Usage: skipped_records_test.sh <psrun> (from the source root; needs ~/.cache/psrun/data/mnist)
set -u
psrun=$1
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/psrun-skipped-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()
require_mnist
"$py" bench/idx_to_formats.py "$idx" "$tmp/tf" tfrecord-png --limit 400 --shards 2 >/dev/null 2>&1 ||
    { echo "FAILED: writing TFRecord shards"; exit 1; }
# Flip a byte in the data of records 3, 10 and 17 of shard 1 (worker 1's, docs/data.md "Each worker's share").
"$py" - "$tmp/tf/train-00001-of-00002.tfrecord" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
pos, index = 0, 0
while pos < len(data):
    length = struct.unpack("<Q", data[pos:pos + 8])[0]
    if index in (3, 10, 17):
        data[pos + 12 + 20] ^= 0xFF
    pos += 16 + length
    index += 1
open(sys.argv[1], "wb").write(bytes(data))
PY
timeout 180 "$psrun" local --ps 1 --workers 2 -- --model mnist_softmax --steps 200 --batch-size 10 \
    --train-data "$tmp/tf/train-*" --test-data "$tmp/tf/test-00000-of-00001.tfrecord" --corrupt-records skip \
    --model-dir "$tmp/m" >"$tmp/log" 2>&1
code=$?
check "psrun exits 0 (rc=$code)" test "$code" -eq 0
check "worker 1 logs skipped corrupt records" grep -q "\[workerd:1\].*skipped [0-9]* corrupt records" "$tmp/log"
check "worker 0 (the chief) skipped none" bash -c "! grep -q '\[workerd:0\].*skipped [0-9]* corrupt records' '$tmp/log'"
w1=$(grep -o "\[workerd:1\].*skipped [0-9]* corrupt records" "$tmp/log" | tail -1 | sed 's/.*skipped \([0-9]*\) corrupt.*/\1/')
check "summary.json's skipped_records is the sum over the workers (worker 1: ${w1:-?})" "$py" - "$tmp/m" "${w1:-0}" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
w1 = int(sys.argv[2])
print({k: s.get(k) for k in ("skipped_records", "skipped_records_by_worker", "workers_without_report")})
assert w1 >= 3, w1
assert s["skipped_records_by_worker"] == [0, w1], s["skipped_records_by_worker"]
assert s["skipped_records"] == w1, s["skipped_records"]
assert s["workers_without_report"] == [], s["workers_without_report"]
PY
[ "$fail" -eq 0 ] || { echo "--- log"; tail -40 "$tmp/log"; }
exit "$fail"
