#!/usr/bin/env bash
# Issue 36, bounded staleness in async mode (psd --max-staleness S, docs/protocol.md "Bounded
# staleness"): psrun local trains dls_mlp on MNIST with 2 psd and 2 async workers; worker 1 is
# SIGSTOPped for 2 s mid-run, by PID. Without a bound the chief trains on alone and worker 1's
# next gradient is more than 500 updates stale; with --max-staleness 2 the chief's reply waits for
# worker 1 (held about 2 s) and no applied gradient is more than (workers - 1)(2S + 1) = 5
# updates stale. Both runs reach the step count, exit 0 and learn; summary.json carries psd 0's
# "staleness". Then the exit-2 refusals. Every process is stopped by PID; the temp dir is removed.
# Usage: staleness_test.sh <psrun>
set -u
psrun=$1
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist(), scratch_dir(), worker_pid(), wait_step()
scratch_dir psrun-staleness  # $tmp, $pid: removed and killed by PID at exit
w1=
trap '[ -n "$w1" ] && kill -CONT "$w1" 2>/dev/null; [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
require_mnist
steps=20000  # dls_mlp: about 3,000 steps/s here, so the chief alone could run thousands in the stop
train_opts=(--model dls_mlp --data-dir "$idx" --batch-size 100 --steps "$steps" --log-every 500 --threads 1)

# run NAME [psrun options...]: the run with worker 1 stopped 2 s once the chief logged step 2000.
run() {
    local name=$1
    shift
    timeout 300 "$psrun" local --ps 2 --workers 2 --worker-timeout 60 "$@" -- "${train_opts[@]}" \
        --model-dir "$tmp/$name" >"$tmp/$name.log" 2>&1 &
    pid=$!
    local s
    s=$(wait_step "$tmp/$name.log" "$steps" 2000 60)
    w1=$(worker_pid "$pid" 1)
    check "$name: worker 1 found (pid ${w1:-none}) at step ${s:-?}" test -n "$w1"
    if [ -n "$w1" ]; then
        kill -STOP "$w1"
        sleep 2
        kill -CONT "$w1"
    fi
    w1=
    wait "$pid"
    local code=$?
    pid=
    check "$name: exits 0 (rc=$code)" test "$code" -eq 0
}
run free
run bounded --max-staleness 2
check "psd says it bounds staleness" grep -q "\[psd:0\].*async mode, at most 2 gradients ahead of the slowest worker" \
    "$tmp/bounded.log"
cat >"$tmp/check.py" <<'PY'
import json, sys
from run_checks import Checks
free, bounded, steps = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
check = Checks()
for name, s in (("free", free), ("bounded", bounded)):
    st = s.get("staleness", {})
    print(f"{name}: global step {s['global_step']}, test accuracy {s['test_accuracy']:.4f}, staleness {st}")
    check(f"{name}: reached step {steps}", s["global_step"] >= steps)
    check(f"{name}: learned (test accuracy {s['test_accuracy']:.4f} >= 0.9)", s["test_accuracy"] >= 0.9)
fs, bs = free["staleness"], bounded["staleness"]
check("free: no bound, no reply held", fs["max_staleness"] is None and fs["replies_held"] == 0)
check(f"free: worker 1's gradient after the stop is stale by more than 500 updates ({fs['gradient_max']})",
      fs["gradient_max"] > 500)
check(f"bounded: the chief waited for the stopped worker (longest hold {bs['longest_held_s']:.2f} s >= 1.5)",
      bs["max_staleness"] == 2 and bs["replies_held"] >= 1 and bs["longest_held_s"] >= 1.5)
check(f"bounded: no gradient more than 5 updates stale ({bs['gradient_max']})", bs["gradient_max"] <= 5)
check.exit()
PY
check "summary.json: staleness bounded as stated" env PYTHONPATH="$TEST_SUPPORT_DIR" /usr/bin/python3 "$tmp/check.py" "$tmp/free/summary.json" \
    "$tmp/bounded/summary.json" "$steps"

# Refusals: exit 2 naming the flag.
for bad in "--sync --max-staleness 1" "--max-staleness -1" "--max-staleness nan" "--max-staleness 1e300"; do
    # shellcheck disable=SC2086
    timeout 60 "$psrun" local --ps 1 --workers 2 $bad -- "${train_opts[@]}" >"$tmp/bad.log" 2>&1
    code=$?
    check "'$bad' exits 2 (rc=$code)" test "$code" -eq 2
    check "'$bad' names --max-staleness" grep -q -- "--max-staleness" "$tmp/bad.log"
done
exit $fail
