#!/usr/bin/env bash
# Issue 38 item 2: a model dir whose disk fills mid-run. psrun local trains dls_mlp into a
# 64 MiB tmpfs mounted here; after the first checkpoint a file fills all but ~256 KiB of it.
# Checked: failed checkpoints back off (a handful of logged failures, not one per step), metrics
# keep flowing, summary.json names the failures and the newest step a checkpoint holds, and the
# run ends with exit 74 (kExitNoFinalCheckpoint). The tmpfs is unmounted and every process
# stopped by PID. Skipped (77) where tmpfs cannot be mounted (not root).
# Usage: disk_full_run_test.sh <psrun>
set -u
psrun=$1
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/psrun-diskfull-run-XXXXXX)
mnt=$tmp/mnt
pid=
keeper=
mounted=0
cleanup() {
    [ -n "$keeper" ] && kill "$keeper" 2>/dev/null && wait "$keeper" 2>/dev/null
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    [ "$mounted" = 1 ] && umount "$mnt"
    rm -rf "$tmp"
}
trap cleanup EXIT
mkdir -p "$mnt"
mount -t tmpfs -o size=64m psrun-diskfull-run "$mnt" 2>/dev/null || { echo "cannot mount a tmpfs: skipping"; exit 77; }
mounted=1
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()
steps=30000
"$psrun" local --ps 1 --workers 2 -- --model dls_mlp --steps $steps --checkpoint-steps 1000 \
    --keep-checkpoints 100 --log-every 500 --model-dir "$mnt/m" >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 600); do  # the first checkpoint
    ls -d "$mnt"/m/ckpt-* >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
avail=$(df --output=avail -k "$mnt" | tail -1)
dd if=/dev/zero of="$mnt/filler" bs=1k count=$((avail - 256)) status=none 2>/dev/null
echo "filled $mnt: $(df --output=avail -k "$mnt" | tail -1) KiB left"
# A checkpoint in flight at the fill (its temporary dir) can take the room left when it commits,
# and the chief then cannot write summary.json (exit 1, not 74). The keeper gives the run's small
# files (metrics, summary, ~60 KiB in all) their 256 KiB back whenever no checkpoint is being
# written: never room for a checkpoint (~620 KiB).
(
    while kill -0 "$pid" 2>/dev/null; do
        avail=$(df --output=avail -k "$mnt" | tail -1)
        if [ "$avail" -lt 192 ] && ! ls -d "$mnt"/m/.ckpt-*.tmp* >/dev/null 2>&1; then
            size=$(stat -c %s "$mnt/filler")
            truncate -s $((size - (256 - avail) * 1024)) "$mnt/filler"
        fi
        sleep 0.1
    done
) &
keeper=$!
for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then echo "FAILED: psrun still running after 120 s"; exit 1; fi
wait "$pid"
code=$?
pid=
kill "$keeper" 2>/dev/null
wait "$keeper" 2>/dev/null
keeper=
failures=$(grep -c "\[workerd:0\] checkpoint at step [0-9]* not \(written\|committed\) .*(failure [0-9]*;" "$tmp/log")
newest=$(ls -d "$mnt"/m/ckpt-* 2>/dev/null | sort | tail -1 | sed 's/.*ckpt-0*//')
echo "psrun exit $code, $failures failed checkpoints logged, newest checkpoint step ${newest:-none}"
check "psrun exits 74: the final checkpoint was not written (rc=$code)" test "$code" -eq 74
check "failed checkpoints back off: 2 to 12 logged, not one per step ($failures)" \
    test "$failures" -ge 2 -a "$failures" -le 12
check "the chief names the missing final checkpoint" grep -q "the final checkpoint (global step [0-9]*) was not written" "$tmp/log"
check "summary.json records the failures and the newest checkpoint's step" "$py" - "$mnt/m" "$steps" "${newest:-0}" "$failures" <<'PY'
import json, sys
d, steps, newest, failures = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = json.load(open(d + "/summary.json"))
print({k: s.get(k) for k in ("global_step", "checkpoint_step", "checkpoint_failures", "checkpoint_error")})
assert s["global_step"] >= steps, s["global_step"]
assert s["checkpoint_step"] == newest and 0 < newest < steps, (s["checkpoint_step"], newest)
assert s["checkpoint_failures"] == failures, (s["checkpoint_failures"], failures)
assert "No space left" in s["checkpoint_error"] or "space" in s["checkpoint_error"], s["checkpoint_error"]
PY
check "metrics.jsonl goes on after the disk filled (loss records to the end, failures recorded)" "$py" - "$mnt/m" "$steps" <<'PY'
import json, sys
records = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
loss_steps = [r["step"] for r in records if "loss" in r]
failed = [r for r in records if "checkpoint_failed" in r]
print("last loss record at step", max(loss_steps), "; checkpoint_failed records:", len(failed))
assert max(loss_steps) >= int(sys.argv[2]) - 1000, max(loss_steps)
assert failed, "no checkpoint_failed record"
PY
[ "$fail" -eq 0 ] || { echo "--- log"; grep -v "step [0-9]*/$steps" "$tmp/log" | tail -40; }
exit "$fail"
