#!/usr/bin/env bash
# Issue 38: the data dispenser survives a psd restart. psrun local trains dls_mlp on MNIST with 2
# workers reading data chunks leased by psd 0 (--data-chunks 60, an epoch is 600 global steps of
# 100) and checkpoints every 700 steps; psd 0 is SIGKILLed by PID (--restart-ps 1) once the chief
# wrote its third checkpoint, mid-epoch. psrun starts it again, the chief restores every shard and
# psd 0's dispenser from the newest checkpoint: the epoch in progress goes on (psd logs how many of
# its chunks were done), the chunks leased but not reported done are leased again. The run ends 0
# with every complete epoch counting exactly 60,000 examples, as many complete epochs as an
# undisturbed run of the same command (give or take the one in flight at the end; a dispenser
# starting again at epoch 0 would lose the ~3.5 before the kill), and an accuracy within 1.5 points of it.
# Then the same for a resumed job: SIGTERM to psrun after the third checkpoint (exit 75), rerun: psd 0
# restores the dispenser with the shards and the epoch in progress goes on.
# Every process is stopped by PID; the temp dir is removed.
# Usage: elastic_ps_restart_test.sh <psrun> (from the source root; needs MNIST)
set -u
psrun=$1
py=/usr/bin/python3
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist(), scratch_dir()
scratch_dir psrun-elastic-restart  # $tmp, $pid: removed and killed by PID at exit
require_mnist
steps=12000
run_opts=(--ps 1 --workers 2 --restart-ps 1 --grace 20)
train_opts=(--model dls_mlp --data-dir "$idx" --batch-size 100 --steps "$steps" --log-every 100 --data-chunks 60
            --threads 1 --checkpoint-steps 700 --checkpoint-secs 0)

# Undisturbed reference: the same run, nobody killed.
timeout 300 "$psrun" local "${run_opts[@]}" -- "${train_opts[@]}" --model-dir "$tmp/ref" >"$tmp/ref.log" 2>&1
code=$?
check "the undisturbed run exits 0 (rc=$code)" test "$code" -eq 0

timeout 300 "$psrun" local "${run_opts[@]}" -- "${train_opts[@]}" --model-dir "$tmp/m" >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 1200); do  # the chief's third checkpoint (step 2100: epoch 3 half done)
    [ "$(grep -Ec '\[workerd:0\] checkpoint /[^ ]*/ckpt-[0-9]+ \(' "$tmp/log")" -ge 3 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
sleep 0.3  # some chunks past the checkpoint
ps0=$(grep -Eo "started ps 0 \(pid [0-9]+\)" "$tmp/log" | head -1 | grep -Eo "[0-9]+\)$" | tr -d ')')
check "psd 0 found (pid ${ps0:-none}) and SIGKILLed" test -n "$ps0"
[ -n "$ps0" ] && kill -KILL "$ps0"
wait "$pid"
code=$?
pid=
check "the run with psd 0 killed exits 0 (rc=$code)" test "$code" -eq 0
check "psrun starts psd 0 again" grep -Eq "ps 0 \(pid $ps0\) was killed by Killed .*starting it again" "$tmp/log"
check "the chief restores every shard from a checkpoint" \
    grep -Eq "ps 0 restarted: restored every shard from .* at global step [0-9]+" "$tmp/log"
restored=$(grep -Eo "data chunks: restored from [^ ]*: [0-9]+ complete epochs, epoch [0-9]+ goes on with [0-9]+ of 60 chunks done" "$tmp/log" | head -1)
check "psd 0's dispenser goes on with the epoch in progress (${restored:-no such line})" test -n "$restored"
check "no worker failed on the restart" bash -c "! grep -q 'did not lease a chunk' '$tmp/log'"
grep -E "was killed by Killed|restored every shard from|data chunks: restored|left to it|done: global step" "$tmp/log" |
    sed 's/^/  /'
cat >"$tmp/check.py" <<'PY'
import json, re, sys
from run_checks import Checks, check_chunk_epochs
ref, run, steps, restored = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3]), sys.argv[5]
check = Checks()
for name, s in (("undisturbed", ref), ("killed", run)):
    check_chunk_epochs(check, name, s, steps)
    complete = [x for x in s["elastic"]["data_chunks"]["epochs"] if x["complete"]]
    check(f"{name}: the complete epochs are 0..{len(complete) - 1}", [x["epoch"] for x in complete] == list(range(len(complete))))
r, k = ref["elastic"]["data_chunks"]["epochs_complete"], run["elastic"]["data_chunks"]["epochs_complete"]
check(f"killed: {k} complete epochs, the undisturbed run {r} (the epochs before the kill kept)", k >= r - 1)
m = re.search(r"(\d+) complete epochs, epoch (\d+) goes on with (\d+) of 60", restored)
# The checkpoint may fall before the first chunk of the open epoch is done (0 of 60): it was opened, still in progress.
check(f"the restored epoch was in progress ({restored})", m is not None and int(m.group(3)) < 60 and int(m.group(1)) >= 1)
gap = abs(run["test_accuracy"] - ref["test_accuracy"])
check(f"accuracy within 1.5 points of the undisturbed run (gap {100 * gap:.2f})", gap <= 0.015)
check("accuracy above 0.9", run["test_accuracy"] > 0.9)
final = json.load(open(sys.argv[4]))["data_chunks"]
epochs = final["epochs"]
newest = max([x["epoch"] for x in epochs if x["complete"]], default=-1)
print(f"restarted psd 0 at exit: epochs {[(x['epoch'], x['examples'], x['complete']) for x in epochs]}")
check("psd 0 at exit: no epoch before the newest complete one left open",
      newest >= 1 and not [x for x in epochs if not x["complete"] and x["epoch"] < newest])
check("psd 0 at exit: every complete epoch 60000 examples", all(x["examples"] == 60000 for x in epochs if x["complete"]))
check.exit()
PY
if [ -f "$tmp/ref/summary.json" ] && [ -f "$tmp/m/summary.json" ]; then
    # The restarted psd 0's last line: its counters when it exited (after every worker's last report).
    grep "\[psd:0\] exiting with code 0 (" "$tmp/log" | tail -1 | sed 's/^[^(]*(//; s/)$//' >"$tmp/psd.json"
    check "summary figures" env PYTHONPATH="$TEST_SUPPORT_DIR" "$py" "$tmp/check.py" "$tmp/ref/summary.json" "$tmp/m/summary.json" "$steps" \
        "$tmp/psd.json" "$restored"
else
    check "both runs wrote summary.json" false
fi

# Chunks of one batch (--data-chunks 600): a CHUNK goes out before every step, so the request that meets
# the restarted psd 0 is often a CHUNK (logged; 4 of 4 runs by hand) and goes through the same recovery.
# ("${train_opts[@]/#60/600}": the options with --data-chunks 60 made 600.)
timeout 300 "$psrun" local "${run_opts[@]}" -- "${train_opts[@]/#60/600}" --model-dir "$tmp/c" >"$tmp/c.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do
    [ "$(grep -Ec '\[workerd:0\] checkpoint /[^ ]*/ckpt-[0-9]+ \(' "$tmp/c.log")" -ge 3 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
sleep 0.2
ps0=$(grep -Eo "started ps 0 \(pid [0-9]+\)" "$tmp/c.log" | head -1 | grep -Eo "[0-9]+\)$" | tr -d ')')
[ -n "$ps0" ] && kill -KILL "$ps0"
wait "$pid"
code=$?
pid=
check "600 chunks: the run with psd 0 killed exits 0 (rc=$code)" test "$code" -eq 0
echo "  600 chunks: CHUNK requests that met the restart: $(grep -c 'the CHUNK request met a restarted psd' "$tmp/c.log")"
check "600 chunks: every complete epoch 60000 examples, none inexact" "$py" -c "
import json, sys
e = json.load(open('$tmp/c/summary.json'))['elastic']['data_chunks']
complete = [x for x in e['epochs'] if x['complete']]
print('  600 chunks: complete epochs', e['epochs_complete'], 'inexact', e['epochs_inexact'])
sys.exit(0 if complete and all(x['examples'] == 60000 for x in complete) and e['epochs_inexact'] == 0 else 1)"

# A resumed run: SIGTERM to psrun after the third checkpoint (exit 75, a coordinated checkpoint with the
# dispenser's state), then the same command again: psd 0 goes on with the epoch in progress.
"$psrun" local --ps 1 --workers 2 -- "${train_opts[@]}" --model-dir "$tmp/r" >"$tmp/r1.log" 2>&1 &
pid=$!
for _ in $(seq 1200); do
    [ "$(grep -Ec '\[workerd:0\] checkpoint /[^ ]*/ckpt-[0-9]+ \(' "$tmp/r1.log")" -ge 3 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -TERM "$pid"
wait "$pid"
code=$?
pid=
check "SIGTERM mid-run: psrun exits 75 (rc=$code)" test "$code" -eq 75
timeout 300 "$psrun" local --ps 1 --workers 2 -- "${train_opts[@]}" --model-dir "$tmp/r" >"$tmp/r2.log" 2>&1
code=$?
check "the rerun resumes and exits 0 (rc=$code)" test "$code" -eq 0
resumed=$(grep -Eo "data chunks: restored from [^ ]*: [0-9]+ complete epochs, epoch [0-9]+ goes on with [0-9]+ of 60 chunks done" "$tmp/r2.log" | head -1)
check "the resumed run's psd 0 goes on with the epoch in progress (${resumed:-no such line})" test -n "$resumed"
check "resumed: every complete epoch 60000 examples, none inexact, epochs before the stop kept" "$py" -c "
import json, sys
ref, s = json.load(open('$tmp/ref/summary.json')), json.load(open('$tmp/r/summary.json'))
e, r = s['elastic']['data_chunks'], ref['elastic']['data_chunks']['epochs_complete']
complete = [x for x in e['epochs'] if x['complete']]
print('  resumed: global step', s['global_step'], 'accuracy', s['test_accuracy'], 'complete epochs', e['epochs_complete'],
      'undisturbed', r)
sys.exit(0 if s['global_step'] >= $steps and complete and all(x['examples'] == 60000 for x in complete)
         and e['epochs_inexact'] == 0 and e['epochs_complete'] >= r - 1 else 1)"
[ "$fail" -eq 0 ] || { echo "--- reference log"; tail -20 "$tmp/ref.log"; echo "--- log"; tail -60 "$tmp/log"; }
exit "$fail"
