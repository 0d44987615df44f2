#!/usr/bin/env bash
# Issue 38: psd 0's last-resort shard file keeps the data dispenser. psd and one workerd (the chief,
# --data-chunks 60: an epoch of MNIST is 600 global steps of 100) are started by hand on ipc; the chief
# has no --model-dir, so no checkpoint can hold psd's final step. Once psd logged epoch 1 complete,
# both get SIGTERM by PID: psd exits 1 and saves ps-0.shard as a last resort. Then a standby psd on
# the same model dir loads that file alone, and a chief trains on to global step 3000: psd 0 logs that
# the dispenser goes on with the epoch in progress, and at its exit every complete epoch counts 60,000
# examples, none inexact, epochs 0..k-1 with k >= 4 (a dispenser starting again at epoch 0 reaches 2:
# the run's second part is under 3 epochs of steps).
# Every process is stopped by PID; the temp dir is removed.
# Usage: shard_file_chunks_test.sh <psrun> (from the source root; needs MNIST; KEEP_TMP=1 keeps the logs)
set -u
psrun=$1
workerd=$(dirname "$psrun")/../workerd/workerd
psd_bin=$(dirname "$psrun")/../psd/psd
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/psrun-shard-chunks-XXXXXX)
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
# chief STEPS LOG: the one workerd, reading data chunks leased by psd 0.
chief() {
    timeout 120 "$workerd" --index 0 --chief --ps "$ps" --num-workers 1 --no-auth --model dls_mlp --data-dir "$idx" \
        --steps "$1" --batch-size 100 --data-chunks 60 --threads 1 --log-every 500 --connect-timeout 10 >"$tmp/$2" 2>&1
}
# exit_json LOG: psd's counters from its "exiting with code" line.
exit_json() { grep "exiting with code" "$1" | tail -1 | sed 's/^[^(]*(//; s/)$//'; }

# 1. Stopped by a signal with no checkpoint: the shard file is the only record.
"$psd_bin" --index 0 --ps "$ps" --num-workers 1 --no-auth --model-dir "$tmp/m" --signal-grace 4 >"$tmp/psd1.log" 2>&1 &
p=$!; pids+=("$p")
chief 6000 w1.log & w=$!; pids+=("$w")
for _ in $(seq 600); do grep -q "data chunks: epoch 1 complete" "$tmp/psd1.log" && break; sleep 0.05; done
kill -TERM "$p" "$w"
wait "$w"
wait "$p"; rc=$?
check "the stopped psd exits 1 (no checkpoint holds its step) (rc=$rc)" test "$rc" -eq 1
check "... and saves ps-0.shard as a last resort" grep -Eq "saved this shard \(step [0-9]+\) to .*/ps-0.shard as a last resort" "$tmp/psd1.log"
before=$(exit_json "$tmp/psd1.log")
read -r complete done_chunks < <("$py" -c "
import json, sys
c = json.loads(sys.argv[1])['data_chunks']
open_ = [e for e in c['epochs'] if not e['complete']]
print(c['epochs_complete'], open_[0]['chunks_done'] if open_ else 0)" "$before")
echo "  stopped: ${complete:-?} complete epochs, ${done_chunks:-?} chunks of the next done"

# 2. Resumed from the shard file alone: a standby psd loads it at the first HELLO.
"$psd_bin" --index 0 --ps "$ps" --num-workers 1 --no-auth --model-dir "$tmp/m" --standby >"$tmp/psd2.log" 2>&1 &
p=$!; pids+=("$p")
chief 3000 w2.log; rc=$?
check "the resumed chief trains to step 3000 and exits 0 (rc=$rc)" test "$rc" -eq 0
check "... from psd's step, not 0" grep -Eq "training from global step [1-9][0-9]* to 3000" "$tmp/w2.log"
kill -TERM "$p"
wait "$p"; rc=$?
check "the standby psd exits 0 (rc=$rc)" test "$rc" -eq 0
check "psd 0 restores the dispenser from the shard file: epoch ${complete:-?} goes on with ${done_chunks:-?} chunks done" \
    grep -Eq "data chunks: restored from [^ ]*/ps-0.shard: $complete complete epochs, epoch $complete goes on with $done_chunks of 60 chunks done" "$tmp/psd2.log"
check "dispenser at exit: epochs 0..k-1 complete with k >= 4, each 60000 examples, none inexact" "$py" -c "
import json, sys
c = json.loads(sys.argv[1])['data_chunks']
complete = [e for e in c['epochs'] if e['complete']]
print('  resumed: complete epochs', c['epochs_complete'], [(e['epoch'], e['examples']) for e in complete], 'inexact',
      c['epochs_inexact'], 'leased', c['leased'])
sys.exit(0 if c['epochs_complete'] >= 4 and [e['epoch'] for e in complete] == list(range(len(complete)))
         and all(e['examples'] == 60000 for e in complete) and c['epochs_inexact'] == 0 else 1)" "$(exit_json "$tmp/psd2.log")"
grep -h "as a last resort\|restored shard\|data chunks: restored" "$tmp"/psd*.log | sed 's/^/  /'
[ "$fail" -eq 0 ] || for f in "$tmp"/*.log; do echo "--- $f"; tail -15 "$f" | cut -c1-400; done
exit "$fail"
