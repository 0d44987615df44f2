#!/usr/bin/env bash
# Issue 38: `psrun local --restart-ps N` starts a dead psd again and the chief restores it. psrun
# local trains dls_mlp with 2 psd and 2 workers, checkpointing every 100 steps; ps 1 (its PID from
# psrun's "started ps 1 (pid N)" line) is SIGKILLed mid-run. psrun starts it again on the same
# endpoint, the workers wait for it (--reconnect-wait defaults to 60 s with --restart-ps), the chief
# restores every shard from the newest checkpoint, the run ends 0 with a sane accuracy, the steps
# lost stay within the checkpoint interval and summary.json lists the restart. With --restart-ps 2,
# ps 0 is killed twice (the second time the process psrun restarted; psd 1 reports the global step).
# Without --restart-ps the same kill ends the run (exit 1, as before). Impossible values exit 2.
# Every process is stopped by PID; the temp dir is removed.
# Usage: ps_restart_test.sh <psrun> (from the source root; needs ~/.cache/psrun/data/mnist)
set -u
psrun=$1
py=/usr/bin/python3
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist(), scratch_dir()
scratch_dir psrun-ps-restart  # $tmp, $pid: removed and killed by PID at exit
require_mnist
# dls_mlp runs ~400-800 global steps a second here: 6000 steps leave the kill (after the 2nd checkpoint)
# in the middle of the run.
steps=6000 every=500
train=(--model dls_mlp --steps $steps --threads 1 --log-every 250 --eval-every 0 --checkpoint-steps $every
       --checkpoint-secs 0)

# Waits (up to $2 tenths of a second) for the log $1 to match the extended regex $3 while psrun runs.
wait_for() {
    for _ in $(seq "$2"); do
        grep -Eq "$3" "$1" && return 0
        kill -0 "$pid" 2>/dev/null || { grep -Eq "$3" "$1"; return; }
        sleep 0.1
    done
    return 1
}
# kill_ps LOG SHARD CHECKPOINTS START: once the chief logging to LOG (psrun's) has written CHECKPOINTS
# checkpoints, SIGKILLs the START-th process psrun started as ps SHARD (its PID from psrun's
# "started ps SHARD (pid N)" lines); prints that PID.
kill_ps() {
    for _ in $(seq 600); do  # the chief's "checkpoint <dir>/ckpt-N (.. ms)" lines
        [ "$(grep -Ec '\[workerd:0\] checkpoint /[^ ]*/ckpt-[0-9]+ \(' "$1")" -ge "$3" ] && break
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    sleep 0.2  # some steps past the checkpoint
    local ps
    ps=$(grep -Eo "started ps $2 \(pid [0-9]+\)" "$1" | sed -n "$4p" | grep -Eo "[0-9]+\)$" | tr -d ')')
    [ -n "$ps" ] && kill -KILL "$ps" && echo "$ps"
}
# Waits up to $1 seconds for psrun to exit; sets code to its exit code (124 when it did not) and
# clears pid (not in a subshell: only this shell can wait for psrun).
wait_psrun() {
    for _ in $(seq $(($1 * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then code=124; return; fi
    wait "$pid"
    code=$?
    pid=
}

# 1. --restart-ps 1: the run survives the kill.
start=$(date +%s)
"$psrun" local --ps 2 --workers 2 --restart-ps 1 --grace 20 -- "${train[@]}" --model-dir "$tmp/m" >"$tmp/log" 2>&1 &
pid=$!
ps1=$(kill_ps "$tmp/log" 1 2 1)
check "ps 1 found and SIGKILLed (pid ${ps1:-none})" test -n "$ps1"
wait_psrun 120
check "psrun local --restart-ps 1 exits 0 after the kill (rc=$code, $(($(date +%s) - start)) s)" test "$code" -eq 0
check "psrun logs the restart" \
    grep -Eq "ps 1 \(pid $ps1\) was killed by Killed at global step [0-9]+: starting it again \(restart 1 of --restart-ps 1\)" "$tmp/log"
check "ps 1 is started a second time" test "$(grep -c "started ps 1 (pid" "$tmp/log")" -eq 2
check "the workers wait for it (--reconnect-wait 60 by default with --restart-ps)" \
    grep -q "closed the connection; waiting up to 60 s" "$tmp/log"
check "the chief restores ps 1 from a checkpoint" grep -Eq "ps 1 restarted: restored every shard from .* at global step [0-9]+: [0-9]+ steps lost" "$tmp/log"
check "the chief finishes the run" grep -q "done: global step $steps" "$tmp/log"
grep -E "was killed by Killed at global step|restored every shard from|done: global step" "$tmp/log" | sed 's/^/  /'
check "steps lost within the checkpoint interval; summary.json lists the restart; accuracy > 0.9" \
    "$py" - "$tmp/m" "$tmp/log" "$every" "$steps" <<'PY'
import json, re, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
log = open(sys.argv[2]).read()
every, steps = int(sys.argv[3]), int(sys.argv[4])
at_kill = int(re.search(r"ps 1 \(pid \d+\) was killed by Killed at global step (\d+)", log).group(1))
restored, lost = map(int, re.search(r"ps 1 restarted: restored every shard from .* at global step (\d+): (\d+) steps lost", log).groups())
print({"global_step_at_kill": at_kill, "restored_step": restored, "steps_lost": lost,
       "restarts": s.get("restarts"), "test_accuracy": s.get("test_accuracy"), "global_step": s.get("global_step")})
assert restored >= 2 * every, restored  # the chief checkpoints every N of its steps, not at multiples of N
# psd 0's step when psrun saw ps 1 die. The newest checkpoint may still have been written by psd in
# the background (committed a poll interval or more after its step, while training went on: at
# this model's thousands of steps a second, hundreds of steps): the one the chief had committed
# before the kill (or a later one whose shards were written before it) is restored.
kill_at = log.index("was killed by Killed")
committed = [int(n) for n in re.findall(r"\[workerd:0\] checkpoint /\S*/ckpt-0*(\d+) \(", log[:kill_at])]
assert committed and restored >= committed[-1], (committed, restored)
assert 0 <= at_kill - restored <= 3 * every, (at_kill, restored)
assert lost <= 3 * every, lost
r = s["restarts"]
assert len(r) == 1 and r[0]["role"] == "ps" and r[0]["ps"] == 1 and r[0]["status"] == "was killed by Killed", r
assert r[0]["global_step"] == at_kill and len(r[0]["time"]) == 20, r
assert s["global_step"] == steps and s["test_accuracy"] > 0.9, s
PY
check "psrun's closing summary names the restart" grep -q "restart: ps 1 at " "$tmp/log"

# 2. --restart-ps 2: ps 0 (whose death psd 1 reports the global step of) killed twice, the second time
# the process psrun restarted.
"$psrun" local --ps 2 --workers 2 --restart-ps 2 --grace 20 -- "${train[@]}" --model-dir "$tmp/z" >"$tmp/logz" 2>&1 &
pid=$!
first=$(kill_ps "$tmp/logz" 0 2 1)
check "ps 0 found and SIGKILLed (pid ${first:-none})" test -n "$first"
wait_for "$tmp/logz" 300 "ps 0 restarted: restored every shard" || true
second=$(kill_ps "$tmp/logz" 0 4 2)
check "the restarted ps 0 found and SIGKILLed (pid ${second:-none})" test -n "$second"
wait_psrun 120
check "psrun local --restart-ps 2 exits 0 after two kills of ps 0 (rc=$code)" test "$code" -eq 0
check "restart 2 of --restart-ps 2 is logged" \
    grep -Eq "ps 0 \(pid $second\) was killed by Killed at global step [0-9]+: starting it again \(restart 2 of --restart-ps 2\)" "$tmp/logz"
grep -E "was killed by Killed at global step|restored every shard from|done: global step" "$tmp/logz" | sed 's/^/  /'
check "the chief restored twice and finished; summary.json lists both restarts with psd 1's global step" \
    "$py" - "$tmp/z" "$tmp/logz" "$steps" <<'PY'
import json, re, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
log = open(sys.argv[2]).read()
restores = re.findall(r"ps 0 restarted: restored every shard from .* at global step (\d+): (\d+) steps lost", log)
r = s["restarts"]
print({"restores": restores, "restarts": r, "test_accuracy": s.get("test_accuracy")})
assert len(restores) == 2, restores
assert [e["role"] for e in r] == ["ps", "ps"] and [e["ps"] for e in r] == [0, 0], r
assert all(isinstance(e["global_step"], int) for e in r) and r[0]["global_step"] < r[1]["global_step"], r
assert s["global_step"] == int(sys.argv[3]) and s["test_accuracy"] > 0.9, s
PY

# 3. Without --restart-ps (the default 0): the kill of ps 1 stops the run, as before.
"$psrun" local --ps 2 --workers 2 --grace 20 -- "${train[@]}" --model-dir "$tmp/n" >"$tmp/log0" 2>&1 &
pid=$!
ps1=$(kill_ps "$tmp/log0" 1 2 1)
check "ps 1 found and SIGKILLed without --restart-ps (pid ${ps1:-none})" test -n "$ps1"
wait_psrun 60
check "psrun local without --restart-ps exits 1 (rc=$code)" test "$code" -eq 1
check "it names the dead psd" grep -q "ps 1 (pid $ps1) was killed by Killed" "$tmp/log0"
check "and starts nothing again" bash -c "! grep -q 'starting it again' '$tmp/log0' && test \$(grep -c 'started ps 1 (pid' '$tmp/log0') -eq 1"

# 4. Usage errors exit 2 naming the option; --dry-run shows the 60 s default.
for bad in "--restart-ps -1" "--restart-ps nan" "--restart-ps 1e30" "--restart-ps 99999999999"; do
    timeout 30 "$psrun" local --ps 1 --workers 1 $bad -- --model-dir "$tmp/u" >"$tmp/bad" 2>&1
    code=$?
    check "$bad exits 2 naming --restart-ps (rc=$code)" bash -c "test $code -eq 2 && grep -q -- --restart-ps '$tmp/bad'"
done
timeout 30 "$psrun" local --ps 1 --workers 1 --restart-ps 1 >"$tmp/bad" 2>&1
code=$?
check "--restart-ps without --model-dir exits 2 naming --model-dir (rc=$code)" \
    bash -c "test $code -eq 2 && grep -q -- '--restart-ps needs --model-dir' '$tmp/bad'"
timeout 30 "$psrun" local --ps 1 --workers 1 --restart-ps 1 --reconnect-wait 0 -- --model-dir "$tmp/u" >"$tmp/bad" 2>&1
code=$?
check "--restart-ps with --reconnect-wait 0 exits 2 naming --reconnect-wait (rc=$code)" \
    bash -c "test $code -eq 2 && grep -q -- 'give --reconnect-wait S > 0' '$tmp/bad'"
timeout 30 "$psrun" local --ps 0 --workers 1 --restart-ps 1 -- --model-dir "$tmp/u" >"$tmp/bad" 2>&1
code=$?
check "--restart-ps with --ps 0 exits 2 (rc=$code)" bash -c "test $code -eq 2 && grep -q -- '--restart-ps needs --ps 1' '$tmp/bad'"
timeout 30 "$psrun" local --ps 1 --workers 1 --restart-ps 1 --dry-run -- --model-dir "$tmp/u" >"$tmp/dry" 2>&1
check "--dry-run: psd and workerd get --reconnect-wait 60" test "$(grep -c -- '--reconnect-wait 60' "$tmp/dry")" -eq 2
timeout 30 "$psrun" local --ps 1 --workers 1 --restart-ps 1 --reconnect-wait 5 --dry-run -- --model-dir "$tmp/u" >"$tmp/dry" 2>&1
check "--dry-run: an explicit --reconnect-wait 5 is kept" test "$(grep -c -- '--reconnect-wait 5' "$tmp/dry")" -eq 2

[ "$fail" -eq 0 ] || { echo "--- log"; tail -60 "$tmp/log"; echo "--- logz"; tail -40 "$tmp/logz" 2>/dev/null
                     echo "--- log0"; tail -20 "$tmp/log0" 2>/dev/null; }
exit "$fail"
