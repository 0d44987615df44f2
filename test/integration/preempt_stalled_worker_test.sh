#!/usr/bin/env bash
# Issue 38 item 1: a preemption while one worker is stalled keeps its checkpoint. psrun local
# trains dls_mlp with 2 workers; worker 1 is SIGSTOPped, then psrun gets SIGTERM. psd answers the
# chief's drain request after the drain budget's hold (half of --signal-grace) and the chief waits
# that long (common/drain_budget.h), so the coordinated checkpoint is written, psrun exits 75 and a
# rerun resumes from it. Every process is stopped by PID; the temp dir is removed.
# Usage: preempt_stalled_worker_test.sh <psrun>
set -u
psrun=$1
tmp=$(mktemp -d /tmp/psrun-preempt-stall-XXXXXX)
pid= w1=
cleanup() {
    [ -n "$w1" ] && kill -CONT "$w1" 2>/dev/null
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist(), worker_pid()

"$psrun" local --ps 1 --workers 2 -- --model dls_mlp --steps 1000000 --log-every 200 \
    --model-dir "$tmp/m" >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 600); do  # training runs: a progress line
    grep -q "step [0-9]*/1000000" "$tmp/log" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
sleep 2
w1=$(worker_pid "$pid" 1)
check "worker 1 found (pid ${w1:-none})" test -n "$w1"
[ -n "$w1" ] || { cat "$tmp/log"; exit 1; }
kill -STOP "$w1"
sleep 1
kill -TERM "$pid"
for _ in $(seq 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then echo "FAILED: psrun still running 40 s after SIGTERM"; exit 1; fi
wait "$pid"
code=$?
pid=
kill -CONT "$w1" 2>/dev/null
w1=
check "psrun exits 75 (preempted, checkpoint written) (rc=$code)" test "$code" -eq 75
check "psd logs the drain budget" grep -q "\[psd:0\].*drain budget of --signal-grace 8.0 s: psd answers the chief's drain request within 4.0 s, the chief waits up to 5.0 s" "$tmp/log"
check "the chief asks psd to drain with the same budget" grep -q "\[workerd:0\].*asking psd to drain (drain budget of --signal-grace 8.0 s" "$tmp/log"
check "the chief does not give up on psd" bash -c "! grep -q 'still waiting for psd' '$tmp/log'"
check "no 'no checkpoint holds it'" bash -c "! grep -q 'no checkpoint holds it' '$tmp/log'"
ckpt=$(ls -d "$tmp"/m/ckpt-* 2>/dev/null | sort -t- -k2 -n | tail -1)
check "a checkpoint is in the model dir (${ckpt:-none})" test -n "$ckpt"
if [ -n "$ckpt" ]; then
    step=$(basename "$ckpt" | sed 's/^ckpt-0*//')
    check "the checkpoint is the preemption's (step ${step:-?} > 0)" test "${step:-0}" -gt 0
    # A rerun resumes from it and trains 300 more steps.
    timeout 120 "$psrun" local --ps 1 --workers 2 -- --model dls_mlp --steps $((step + 300)) --log-every 100 \
        --model-dir "$tmp/m" >"$tmp/log2" 2>&1
    code2=$?
    check "the rerun exits 0 (rc=$code2)" test "$code2" -eq 0
    check "the rerun restores global step $step" grep -q "restored global step $step " "$tmp/log2"
fi
[ "$fail" -eq 0 ] || { echo "--- log"; tail -40 "$tmp/log"; echo "--- rerun"; tail -20 "$tmp/log2" 2>/dev/null; }
exit "$fail"
