#!/usr/bin/env bash
# Issue 38, workers that join a running job (docs/reliability.md "Workers that join (`psrun join`)"):
# psrun local starts dls_mlp on MNIST with 2 workers on data chunks (--data-chunks 60) and room for 4
# (--max-workers 4, --min-workers 2). At ~30% of the steps two more workers join with `psrun join`
# (the job's join file in the model dir tells them where psd is); psd 0 hands them slots 2 and 3,
# they take the current parameters and lease chunks. A fifth join is refused (no room, exit 2), so is
# one with another model and one without --data-chunks. At ~45% the second joiner started is SIGKILLed by
# PID (its workerd: psrun join execs it): psd drops it. The run ends 0; summary.json lists both joins and the drop; every complete epoch counted exactly
# 60,000 examples; the test accuracy is within 1.5 points of an undisturbed 2-worker run. Once psd dropped the
# killed joiner, one more `psrun join` finds no fresh slot and is handed the dropped one; it trains to the end.
# After the run, the join file put back as psrun run leaves it: a late join is refused at once (exit 2).
# Every process is stopped by PID; the temp dir is removed.
# Usage: join_test.sh <psrun> <async|sync>
set -u
psrun=$1
mode=${2:-async}
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist(), scratch_dir(), wait_step()
scratch_dir psrun-join  # $tmp, $pid: removed and killed by PID at exit
require_mnist
py=/usr/bin/python3
j2= j3= j4=
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; for p in $j2 $j3 $j4; do kill -KILL "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"' EXIT
# Async: long enough (~15 s here) that the checks between the joins (two more `psrun join`s, ~4 s
# under CI's load) leave the joiner started after the drop several seconds to join.
if [ "$mode" = sync ]; then steps=4000; sync=(--sync); else steps=36000; sync=(); fi
run_opts=(--ps 1 --workers 2 --max-workers 4 --min-workers 2 --worker-timeout 1 "${sync[@]}")
train_opts=(--model dls_mlp --data-dir "$idx" --batch-size 100 --steps "$steps" --log-every 100 --data-chunks 60
            --threads 1)

# Refused before any job: psrun join without --data-chunks names it (exit 2).
timeout 30 "$psrun" join -- --model dls_mlp --data-dir "$idx" --model-dir "$tmp/none" >"$tmp/nochunks.log" 2>&1
code=$?
check "psrun join without --data-chunks exits 2 (rc=$code)" test "$code" -eq 2
check "... naming --data-chunks" grep -q -- "--data-chunks" "$tmp/nochunks.log"
# And with no job on the model dir: exit 2 naming the join file.
timeout 30 "$psrun" join -- "${train_opts[@]}" --model-dir "$tmp/none" >"$tmp/nojob.log" 2>&1
code=$?
check "psrun join with no job on the model dir exits 2 (rc=$code)" test "$code" -eq 2
check "... naming the join file" grep -q "join.json does not exist" "$tmp/nojob.log"

# Where psd is, without a join file: TF_CONFIG's cluster.ps, or TF's --ps_hosts flag (dry runs).
out=$(TF_CONFIG='{"cluster":{"ps":["n1:2222","n2:2222"],"worker":["n3:2222"]},"task":{"type":"worker","index":0}}' \
      timeout 30 "$psrun" join --key-file /k --run-id tf-1 --threads 1 --dry-run -- --data-chunks 6 2>&1)
check "psrun join reads TF_CONFIG's ps list ($out)" test "$out" = \
    "workerd --join --ps tcp://n1:2222,tcp://n2:2222 --key-file /k --threads 1 --run-id tf-1 --data-chunks 6"
out=$(timeout 30 "$psrun" join --ps_hosts n1:2222 --no-auth --threads 1 --dry-run -- --data-chunks 6 2>&1)
check "psrun join takes --ps_hosts ($out)" test "$out" = "workerd --join --ps n1:2222 --no-auth --threads 1 --data-chunks 6"
timeout 30 "$psrun" join --ps n1:99999 --no-auth --dry-run -- --data-chunks 6 >"$tmp/port.log" 2>&1
code=$?
check "psrun join refuses a bad --ps port with exit 2 (rc=$code)" test "$code" -eq 2

# Undisturbed reference: 2 workers, nobody joins.
timeout 300 "$psrun" local "${run_opts[@]}" -- "${train_opts[@]}" --model-dir "$tmp/ref" >"$tmp/ref.log" 2>&1
code=$?
check "the undisturbed $mode run exits 0 (rc=$code)" test "$code" -eq 0

timeout 300 "$psrun" local "${run_opts[@]}" -- "${train_opts[@]}" --model-dir "$tmp/m" >"$tmp/log" 2>&1 &
pid=$!
s=$(wait_step "$tmp/log" "$steps" $((steps * 3 / 10)) 150 workerd:0)
cp "$tmp/m/.psrun/join.json" "$tmp/join.json.saved"  # put back after the run, as psrun run would leave it
timeout 300 "$psrun" join -- "${train_opts[@]}" --model-dir "$tmp/m" >"$tmp/j2.log" 2>&1 &
j2=$!
timeout 300 "$psrun" join -- "${train_opts[@]}" --model-dir "$tmp/m" >"$tmp/j3.log" 2>&1 &
j3=$!
echo "joiners started at the chief's step $s: pids $j2 $j3"
for _ in $(seq 600); do  # both joined (psd logs it) and training
    n=$(grep -c "\[psd:0\].*join: worker [0-9]* joined the run" "$tmp/log")
    [ "$n" -ge 2 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
check "psd 0 took two joiners (${n:-0})" test "${n:-0}" -ge 2
# A third joiner finds no room (4 of --max-workers 4): exit 2 naming it.
timeout 60 "$psrun" join -- "${train_opts[@]}" --model-dir "$tmp/m" >"$tmp/full.log" 2>&1
code=$?
check "a fifth worker's join is refused with exit 2 (rc=$code)" test "$code" -eq 2
check "... naming --max-workers" grep -q "no room to join.*--max-workers 4" "$tmp/full.log"
# Another model is refused like a HELLO with it (exit 2).
other=("${train_opts[@]}")
other[1]=mnist_softmax
timeout 60 "$psrun" join -- "${other[@]}" --model-dir "$tmp/m" >"$tmp/model.log" 2>&1
code=$?
check "a join with another model is refused with exit 2 (rc=$code)" test "$code" -eq 2
check "... naming both models" grep -q "serves model 'dls_mlp'.*trains model 'mnist_softmax'" "$tmp/model.log"

# Which slot each joiner got, from its own log.
slot_of() { grep -o "handed out worker slot [0-9]*" "$1" | head -1 | awk '{print $NF}'; }
# Killed early enough (45% of the steps) that psd's drop (a few thousand steps later, under load)
# leaves the late joiner below time to start and join before the run ends.
for _ in $(seq 600); do
    grep -q "training from global step" "$tmp/j3.log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
s=$(wait_step "$tmp/log" "$steps" $((steps * 45 / 100)) 150 workerd:0)
victim_slot=$(slot_of "$tmp/j3.log")
check "joiner $j3 trains at slot ${victim_slot:-?} when the chief is at step $s" grep -q "training from global step" "$tmp/j3.log"
# $j3 is timeout's PID; psrun join exec'd workerd in its child (same PID as that psrun join).
victim=$(cat /proc/"$j3"/task/*/children 2>/dev/null | awk '{print $1; exit}')
check "the joiner's workerd found (pid ${victim:-none})" grep -q workerd "/proc/${victim:-0}/cmdline"
[ -n "$victim" ] && kill -KILL "$victim"
wait "$j3" 2>/dev/null
j3=
# Once psd dropped it, one more joiner finds no fresh slot and takes the dropped one.
for _ in $(seq 600); do
    grep -q "\[psd:0\].*elastic: worker ${victim_slot:-x} dropped" "$tmp/log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
timeout 300 "$psrun" join -- "${train_opts[@]}" --model-dir "$tmp/m" >"$tmp/j4.log" 2>&1 &
j4=$!
wait "$pid"
code=$?
pid=
check "the $mode run with two joiners, one killed, exits 0 (rc=$code)" test "$code" -eq 0
wait "$j2"
code=$?
j2=
check "the surviving joiner exits 0 (rc=$code)" test "$code" -eq 0
wait "$j4"
code=$?
j4=
check "the joiner that came after the drop exits 0 (rc=$code)" test "$code" -eq 0
check "... at the dropped slot $victim_slot" grep -q "handed out worker slot $victim_slot " "$tmp/j4.log"
check "... and trained" grep -q "training from global step" "$tmp/j4.log"
# The join file outlives a job under psrun run (psd is exec'd; nobody removes it): a join after the
# job ended is refused at once (exit 2, naming the run as over), not after a 30 s wait for a gone psd.
check "psrun local removed its join file at the end" test ! -e "$tmp/m/.psrun/join.json"
cp "$tmp/join.json.saved" "$tmp/m/.psrun/join.json"
start=$(date +%s%N)
timeout 60 "$psrun" join -- "${train_opts[@]}" --model-dir "$tmp/m" >"$tmp/stale.log" 2>&1
code=$?
ms=$((($(date +%s%N) - start) / 1000000))
check "a join after the job ended exits 2 (rc=$code) in under 5 s (${ms} ms)" test "$code" -eq 2 -a "$ms" -lt 5000
check "... naming the job as over" grep -q "the job that wrote .*join.json (run .*) is over: no run holds" "$tmp/stale.log"
check "psd drops the killed joiner" grep -q "\[psd:0\].*elastic: worker $victim_slot dropped" "$tmp/log"
if [ "$mode" = sync ]; then
    check "sync: steps aggregate 4 gradients once both joiners pushed" grep -q "\[psd:0\].*sync: steps now aggregate 4 gradients" "$tmp/log"
    check "sync: 3 after the kill" grep -q "\[psd:0\].*sync: steps now aggregate 3 gradients.*dead workers: $victim_slot" "$tmp/log"
    four_again() { sed -n "/aggregate 3 gradients.*dead workers: $victim_slot/,\$p" "$tmp/log" |
                   grep -q "\[psd:0\].*sync: steps now aggregate 4 gradients"; }
    check "sync: 4 again once the dropped slot's new worker pushed" four_again
fi
cat >"$tmp/check.py" <<'PY'
import json, sys
from run_checks import Checks, check_chunk_epochs
ref, run, steps, victim = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3]), int(sys.argv[4])
check = Checks()
for name, s in (("undisturbed", ref), ("joined", run)):
    check_chunk_epochs(check, name, s, steps)
joined = sorted(d["worker"] for d in run["elastic"].get("workers_joined", []))
check(f"joined: summary.json lists workers 2 and 3 as joined, then {victim} again ({joined})",
      joined == sorted([2, 3, victim]))
check(f"joined: max_workers 4 ({run['elastic'].get('max_workers')})", run["elastic"].get("max_workers") == 4)
steps_at = [d["global_step"] for d in run["elastic"].get("workers_joined", [])]
check(f"joined: both joined after the start ({steps_at})", all(g > 0 for g in steps_at))
dropped = [d["worker"] for d in run["elastic"].get("workers_dropped", [])]
check(f"joined: summary.json lists worker {victim} as dropped ({dropped})", dropped == [victim])
check("undisturbed: nobody joined", ref["elastic"].get("workers_joined") == [])
gap = abs(run["test_accuracy"] - ref["test_accuracy"])
check(f"accuracy within 1.5 points of the undisturbed run (gap {100 * gap:.2f})", gap <= 0.015)
check("accuracy above 0.9", run["test_accuracy"] > 0.9)
final = json.load(open(sys.argv[5]))
epochs = final["data_chunks"]["epochs"]
print(f"psd at exit: epochs {[(x['epoch'], x['examples'], x['complete']) for x in epochs]}, "
      f"joined {final.get('workers_joined')}, dropped {final.get('workers_dropped')}")
check("psd: every complete epoch 60000 examples", all(x["examples"] == 60000 for x in epochs if x["complete"]))
check(f"psd: workers 2, 3 and {victim} again joined", sorted(d["worker"] for d in final.get("workers_joined", [])) == sorted([2, 3, victim]))
check.exit()
PY
if [ -f "$tmp/ref/summary.json" ] && [ -f "$tmp/m/summary.json" ] && [ -n "$victim_slot" ]; then
    grep "\[psd:0\] exiting with code 0 (" "$tmp/log" | tail -1 | sed 's/^[^(]*(//; s/)$//' >"$tmp/psd.json"
    check "summary figures" env PYTHONPATH="$TEST_SUPPORT_DIR" "$py" "$tmp/check.py" "$tmp/ref/summary.json" "$tmp/m/summary.json" "$steps" \
        "$victim_slot" "$tmp/psd.json"
else
    check "both runs wrote summary.json" false
fi
grep -h "\[psd:0\].*\(join:\|elastic:\|sync: steps\)" "$tmp/log"
[ "$fail" -eq 0 ] || { echo "--- reference log"; tail -30 "$tmp/ref.log"; echo "--- log"; tail -60 "$tmp/log";
                       for f in j2 j3 j4 full model; do echo "--- $f"; tail -15 "$tmp/$f.log"; done; }
exit "$fail"
