#!/usr/bin/env bash
# Issue 35: gradient accumulation (--accumulate-steps) through psd and standalone. A sync run of
# 2 workers with 2 micro-batches of 32 each finishes its 40 updates (global steps count updates),
# learns, and records accumulate_steps and the effective batch (2 x 32 x 2 workers) in summary.json
# and in its log, and all workers' examples/s as twice the chief's own; standalone records 4 x 16; impossible values exit 2 naming the flag.
# Every process ends by itself (psrun local stops its own).
# Usage: accumulate_test.sh <psrun> (from the source root; needs ~/.cache/psrun/data/mnist)
set -u
psrun=$1
workerd=$(dirname "$psrun")/../workerd/workerd
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/psrun-accumulate-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()
require_mnist
timeout 240 "$psrun" local --ps 1 --workers 2 --sync -- --model lenet5 --accumulate-steps 2 --batch-size 32 \
    --optimizer adam --learning-rate 0.003 --steps 40 --log-every 10 --threads 1 --model-dir "$tmp/m" >"$tmp/log" 2>&1
code=$?
check "psrun local --ps 1 --workers 2 -- --accumulate-steps 2 exits 0 (rc=$code)" test "$code" -eq 0
[ "$code" -eq 0 ] || tail -20 "$tmp/log"
check "summary.json records 2 micro-batches of 32, 128 examples per sync update, 40 updates" "$py" - "$tmp/m" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
print({k: s.get(k) for k in ("accumulate_steps", "batch_size", "effective_batch_size", "global_step", "workers",
                             "test_accuracy", "images_per_sec")})
assert s["accumulate_steps"] == 2 and s["batch_size"] == 32 and s["effective_batch_size"] == 128, s
assert s["global_step"] == 40 and s["workers"] == 2, s
assert s["test_accuracy"] > 0.5, s  # lenet5 after 40 updates of 128 examples
# Every sync step holds both workers' micro-batches: all workers' rate is twice the chief's own.
ratio = s["images_per_sec"] / s["worker_images_per_sec"]
assert abs(ratio - 2) < 0.01, ("images_per_sec counts every worker's examples", ratio)
PY
check "the workers' log names the micro-batches" grep -q "batch 64 (2 micro-batches of 32 per update)" "$tmp/log"
timeout 180 "$workerd" --standalone --model lenet5 --accumulate-steps 4 --batch-size 16 --steps 20 --threads 1 \
    --model-dir "$tmp/s" >"$tmp/slog" 2>&1
code=$?
check "standalone --accumulate-steps 4 exits 0 (rc=$code)" test "$code" -eq 0
check "standalone summary.json records 4 x 16 = 64 per update and 20 updates" "$py" - "$tmp/s" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["accumulate_steps"] == 4 and s["batch_size"] == 16 and s["effective_batch_size"] == 64, s
assert s["global_step"] == 20, s
PY
timeout 60 "$workerd" --standalone --model lenet5 --accumulate-steps 4 --global-batch-size 64 --steps 1 \
    --model-dir "$tmp/g" >"$tmp/glog" 2>&1
code=$?
check "--global-batch-size 64 with --accumulate-steps 4 runs micro-batches of 16 (rc=$code)" \
    "$py" -c "import json,sys; s=json.load(open('$tmp/g/summary.json')); sys.exit(not (s['batch_size'] == 16 and s['effective_batch_size'] == 64))"
for bad in "--accumulate-steps 0" "--accumulate-steps 4097" "--accumulate-steps 3 --global-batch-size 64"; do
    timeout 60 "$workerd" --standalone --model lenet5 --steps 1 $bad >"$tmp/bad" 2>&1
    code=$?
    check "$bad exits 2 (rc=$code) naming --accumulate-steps" \
        bash -c "test $code -eq 2 && grep -q -- '--accumulate-steps' '$tmp/bad'"
done
exit $fail
