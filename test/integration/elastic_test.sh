#!/usr/bin/env bash
# Issue 38, elastic membership (docs/reliability.md "Elastic membership"): psrun local trains
# dls_mlp on MNIST with 3 workers reading data chunks leased by psd 0 (--data-chunks) and psd
# --min-workers 2. Worker 2 is SIGKILLed by PID mid-run (no --restart-workers): psd drops it after
# --worker-timeout (1 s), returns its chunks to the queue, and the run ends 0 with worker 2 listed as
# dropped in summary.json; every complete epoch counted exactly 60,000 examples (nothing lost,
# nothing twice); the test accuracy is within 1.5 points of an undisturbed run of the same steps.
# Every process is stopped by PID; the temp dir is removed.
# Usage: elastic_test.sh <psrun> <async|sync>
set -u
psrun=$1
mode=${2:-async}
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist(), scratch_dir(), worker_pid(), wait_step()
scratch_dir psrun-elastic  # $tmp, $pid: removed and killed by PID at exit
require_mnist
py=/usr/bin/python3
if [ "$mode" = sync ]; then steps=3000; sync=(--sync); else steps=12000; sync=(); fi
run_opts=(--ps 1 --workers 3 --min-workers 2 --worker-timeout 1 "${sync[@]}")
train_opts=(--model dls_mlp --data-dir "$idx" --batch-size 100 --steps "$steps" --log-every 100 --data-chunks 60
            --threads 1)

# Undisturbed reference: the same run, nobody killed.
timeout 300 "$psrun" local "${run_opts[@]}" -- "${train_opts[@]}" --model-dir "$tmp/ref" >"$tmp/ref.log" 2>&1
code=$?
check "the undisturbed $mode run exits 0 (rc=$code)" test "$code" -eq 0

timeout 300 "$psrun" local "${run_opts[@]}" -- "${train_opts[@]}" --model-dir "$tmp/m" >"$tmp/log" 2>&1 &
pid=$!
s=$(wait_step "$tmp/log" "$steps" $((steps / 10)) 120)  # a tenth of the steps done
w2=$(worker_pid "$pid" 2)
check "worker 2 found (pid ${w2:-none}) at step ${s:-?}" test -n "$w2"
[ -n "$w2" ] && kill -KILL "$w2"
wait "$pid"
code=$?
pid=
check "the $mode run with worker 2 killed exits 0 (rc=$code)" test "$code" -eq 0
check "psd drops worker 2" grep -q "\[psd:0\].*elastic: worker 2 dropped" "$tmp/log"
check "psd re-queues its chunks" grep -q "\[psd:0\].*worker 2: its [0-9]* data chunks\\? went back to the queue" "$tmp/log"
check "psd ends the run with 2 workers" grep -q "\[psd:0\].*elastic: the run is over with 2 workers" "$tmp/log"
cat >"$tmp/check.py" <<'PY'
import json, sys
from run_checks import Checks, check_chunk_epochs
ref, run, steps = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
check = Checks()
for name, s in (("undisturbed", ref), ("killed", run)):
    check_chunk_epochs(check, name, s, steps)
dropped = [d["worker"] for d in run["elastic"].get("workers_dropped", [])]
check(f"killed: summary.json lists worker 2 as dropped ({dropped})", dropped == [2])
check("undisturbed: nobody dropped", ref["elastic"].get("workers_dropped") == [])
gap = abs(run["test_accuracy"] - ref["test_accuracy"])
check(f"accuracy within 1.5 points of the undisturbed run (gap {100 * gap:.2f})", gap <= 0.015)
check("accuracy above 0.9", run["test_accuracy"] > 0.9)
# psd's final state: worker 2 dropped, and no epoch older than the newest complete one left open (the
# chunk worker 2 held when it was killed went to another worker; without that its epoch never completes).
final = json.load(open(sys.argv[4]))
epochs = final["data_chunks"]["epochs"]
newest = max([x["epoch"] for x in epochs if x["complete"]], default=-1)
open_before = [x["epoch"] for x in epochs if not x["complete"] and x["epoch"] < newest]
print(f"psd at exit: epochs {[(x['epoch'], x['examples'], x['complete']) for x in epochs]}, "
      f"dropped {final.get('workers_dropped')}")
check(f"psd: worker 2 dropped ({final.get('workers_dropped')})", [d["worker"] for d in final.get("workers_dropped", [])] == [2])
check(f"psd: no epoch before the newest complete one ({newest}) left open ({open_before})", newest >= 1 and not open_before)
check("psd: every complete epoch 60000 examples", all(x["examples"] == 60000 for x in epochs if x["complete"]))
check.exit()
PY
if [ -f "$tmp/ref/summary.json" ] && [ -f "$tmp/m/summary.json" ]; then
    # psd's last line: its counters when it exited (after every worker's last report).
    grep "\[psd:0\] exiting with code 0 (" "$tmp/log" | tail -1 | sed 's/^[^(]*(//; s/)$//' >"$tmp/psd.json"
    check "summary figures" env PYTHONPATH="$TEST_SUPPORT_DIR" "$py" "$tmp/check.py" "$tmp/ref/summary.json" "$tmp/m/summary.json" "$steps" "$tmp/psd.json"
else
    check "both runs wrote summary.json" false
fi
[ "$fail" -eq 0 ] || { echo "--- reference log"; tail -30 "$tmp/ref.log"; echo "--- log"; tail -60 "$tmp/log"; }
exit "$fail"
