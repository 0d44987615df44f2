#!/usr/bin/env bash
# Issue 38: a psd restarted while workers are still in the start barrier no longer ends them. psd
# (--num-workers 3) and workerd are started by hand on ipc; the chief (waiting for every worker's
# HELLO) and worker 1 (waiting for the chief's INIT) are in the barrier when psd is SIGKILLed by PID
# and started again on its endpoint. Both say HELLO to the new psd and wait on; worker 2 then
# joins, the chief sends INIT and all three train to the last step and exit 0. With
# --reconnect-wait 0 the same kill still ends a waiting worker at once (exit 1, fail-fast).
# Every process is stopped by PID; the temp dir is removed.
# Usage: barrier_restart_test.sh <psrun> (from the source root; needs MNIST, as psrun data fetch leaves it;
# KEEP_TMP=1 keeps the logs)
set -u
psrun=$1
workerd=$(dirname "$psrun")/../workerd/workerd
psd_bin=$(dirname "$psrun")/../psd/psd
tmp=$(mktemp -d /tmp/psrun-barrier-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()
require_mnist
ps="ipc://$tmp/ps-0"
start_psd() { "$psd_bin" --index 0 --ps "$ps" --num-workers 3 --no-auth >>"$tmp/psd$1.log" 2>&1 & }
# worker INDEX WAIT [options]: one workerd of the 3, --reconnect-wait WAIT, logging to $tmp/wINDEX.log.
worker() {
    local i=$1 wait=$2; shift 2
    timeout 240 "$workerd" --index "$i" --ps "$ps" --num-workers 3 --no-auth --model dls_mlp --data-dir "$idx" \
        --steps 300 --batch-size 50 --threads 1 --log-every 50 --reconnect-wait "$wait" --connect-timeout 10 \
        "$@" >"$tmp/w$i.log" 2>&1
}
# wait_log FILE REGEX: up to 30 s for FILE to match.
wait_log() {
    for _ in $(seq 300); do grep -Eq "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}

# 1. The kill during the barrier: both waiting workers survive it.
start_psd 1; p=$!; pids+=("$p")
worker 0 30 --chief & w0=$!; pids+=("$w0")
worker 1 30 & w1=$!; pids+=("$w1")
check "the chief waits in the start barrier for every HELLO" wait_log "$tmp/w0.log" "start barrier: waiting for all 3 workers"
check "worker 1 waits in the start barrier for the chief's INIT" wait_log "$tmp/w1.log" "start barrier: waiting for the chief's INIT"
sleep 0.5
kill -KILL "$p"; wait "$p" 2>/dev/null
killed_at=$(date +%s.%N)
sleep 1
start_psd 2; p=$!; pids+=("$p")
check "the chief meets the restarted psd and waits on" \
    wait_log "$tmp/w0.log" "start barrier: ps 0 \(ipc://[^)]*\) restarted; saying HELLO to every psd again"
check "worker 1 meets it and waits on" \
    wait_log "$tmp/w1.log" "start barrier: ps 0 \(ipc://[^)]*\) restarted; saying HELLO to every psd again"
check "neither ended (both still running after the restart)" kill -0 "$w0" "$w1"
worker 2 30 & w2=$!; pids+=("$w2")
wait "$w0"; rc0=$?
wait "$w1"; rc1=$?
wait "$w2"; rc2=$?
for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
wait "$p"; rcp=$?
echo "  psd SIGKILLed at $killed_at; exits: chief $rc0, worker 1 $rc1, worker 2 $rc2, restarted psd $rcp"
check "all three workers finish (exit 0)" test "$rc0" -eq 0 -a "$rc1" -eq 0 -a "$rc2" -eq 0
check "the restarted psd served every step to the last and exits 0" test "$rcp" -eq 0
check "... every worker trained to step 300" grep -q "done: global step 300" "$tmp/w0.log"
grep -h "restarted; saying HELLO\|every psd answers\|training from global step" "$tmp"/w*.log | sed 's/^/  /'

# 2. Fail-fast stays: with --reconnect-wait 0 the waiting worker ends at once.
mkdir -p "$tmp/part1" && mv "$tmp"/w*.log "$tmp/part1/"
start_psd 3; p=$!; pids+=("$p")
worker 1 0 & w1=$!; pids+=("$w1")
check "fail-fast: worker 1 waits for INIT" wait_log "$tmp/w1.log" "start barrier: waiting for the chief's INIT"
kill -KILL "$p"; wait "$p" 2>/dev/null
for _ in $(seq 100); do kill -0 "$w1" 2>/dev/null || break; sleep 0.1; done
wait "$w1"; rc1=$?
check "fail-fast: --reconnect-wait 0 ends the waiting worker with exit 1 (rc=$rc1)" test "$rc1" -eq 1
[ "$fail" -eq 0 ] || for f in "$tmp"/*.log; do echo "--- $f"; tail -15 "$f"; done
exit "$fail"
