#!/usr/bin/env bash
# Checkpoints of a large sparse table while training (docs/sparse.md, "Checkpoints"; issue 36): the click model of bench/click_data.py (one shared table of ROWS x 16, Adagrad:
# every checkpoint writes the whole table and its slots), `psrun local --ps 1 --workers 2` async,
# a checkpoint every EVERY steps, each round once per mode, interleaved (psd --checkpoint-writer):
#   thread  a thread of psd writes it from a copy-on-write snapshot of the rows (the default here)
#   fork    a forked child writes it from the kernel's copy-on-write snapshot
#   loop    psd's poll loop writes it, every worker waits
# A mode MODE:N also passes psd --checkpoint-full-every N (1: every checkpoint holds the table
# whole; N > 1: the others only its rows changed since that one, common/row_delta.h).
# Prints one JSON line per run: each worker's step times end to end (median, p99, longest: the
# workers' "step times of this worker" lines), psd's write times, the checkpoint's size, psd's
# peak RSS and the forked writer's own memory (private pages, sampled every 0.5 s); then the
# medians per mode with the CPU model.
# Usage: bench/checkpoint_stall.sh DIR STEPS EVERY [ROUNDS]   (DIR: click_data.py DIR --rows ROWS;
#        env PSRUN=build/launcher/psrun, MODES="thread fork loop")
set -u
dir=$1 steps=$2 every=$3 rounds=${4:-2}
psrun=${PSRUN:-build/launcher/psrun}
bin=$(cd "$(dirname "$psrun")/.." && pwd)
[ -f "$dir/click.json" ] || { echo "$dir lacks click_data.py's output" >&2; exit 2; }
out=$(mktemp -d)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$out"' EXIT; echo "work dir $out" >&2
# Each mode's daemons: psd with --checkpoint-writer MODE, workerd as built.
for mode in ${MODES:-thread fork loop}; do
    mkdir -p "$out/$mode-bin"
    full=""
    [ "${mode#*:}" != "$mode" ] && full="--checkpoint-full-every ${mode#*:}"
    printf '#!/bin/sh\nexec %s/psd/psd --checkpoint-writer %s %s "$@"\n' "$bin" "${mode%%:*}" "$full" >"$out/$mode-bin/psd"
    chmod +x "$out/$mode-bin/psd"
    ln -s "$bin/workerd/workerd" "$out/$mode-bin/workerd"
done
for round in $(seq 1 "$rounds"); do
    for mode in ${MODES:-thread fork loop}; do
        run="$out/$mode-$round"
        PSRUN_BIN_DIR="$out/$mode-bin" "$psrun" local --ps 1 --workers 2 --no-auth --grace 120 -- --model "$dir/click.json" \
            --train-images "$dir/train_x.npy" --train-labels "$dir/train_y.npy" --test-images "$dir/test_x.npy" \
            --test-labels "$dir/test_y.npy" --steps "$steps" --batch-size 256 --optimizer adagrad --learning-rate 0.05 \
            --log-every 1000 --sparse-embedding emb --checkpoint-steps "$every" --checkpoint-secs 0 \
            --model-dir "$run" >"$run.log" 2>&1 &
        launcher=$!
        peak=0 writer=0
        while kill -0 "$launcher" 2>/dev/null; do
            for pid in $(ps -o pid= --ppid "$launcher"); do
                { tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null | awk '{print $1}' | grep -q 'psd$' || continue
                hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null)
                [ -n "$hwm" ] && [ "$hwm" -gt "$peak" ] && peak=$hwm
                # The forked checkpoint writer: the memory it holds of its own (pages it wrote or
                # copied on write), not the pages it shares with psd.
                for child in $(ps -o pid= --ppid "$pid"); do
                    own=$(awk '/^Private_(Dirty|Clean)/ {s += $2} END {print s + 0}' "/proc/$child/smaps_rollup" 2>/dev/null)
                    [ -n "$own" ] && [ "$own" -gt "$writer" ] && writer=$own
                done
            done
            sleep 0.5
        done
        wait "$launcher"
        rc=$?
        size=$(du -sb "$run"/ckpt-* 2>/dev/null | sort -n | tail -1 | cut -f1)
        sizes=$(du -sb "$run"/ckpt-* 2>/dev/null | awk '{printf "%s%d", (NR > 1 ? "," : ""), $1 / 1048576}')
        /usr/bin/python3 - "$run.log" "$mode" "$round" "$rc" "$((peak / 1024))" "${size:-0}" "$((writer / 1024))" "${sizes:-}" <<'PY'
import json, re, sys
log, mode, rnd, rc, peak, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
writer = int(sys.argv[7])
sizes = [int(x) for x in sys.argv[8].split(",") if x]
text = open(log).read()
workers = {}
for w, med, p99, lng in re.findall(r"\[workerd:(\d+)\] step times of this worker: median ([0-9.]+) ms, p99 ([0-9.]+) ms, "
                                   r"longest ([0-9.]+) ms", text):
    workers[w] = {"median_ms": float(med), "p99_ms": float(p99), "longest_ms": float(lng),
                  "longest_over_median": round(float(lng) / max(float(med), 1e-9), 2)}
writes = [int(ms) for ms in re.findall(r"checkpoint: shard at step \d+ .* written to \S+ in (\d+) ms", text)]
differential = len(re.findall(r"checkpoint: shard at step .* rows changed since step", text))
print(json.dumps({"mode": mode, "round": rnd, "rc": rc, "workers": workers, "psd_write_ms": writes,
                  "checkpoint_mb": round(size / 2**20), "checkpoints_mb": sizes,
                  "differential_writes": differential, "psd_peak_rss_mb": peak,
                  "writer_own_mb": writer}), flush=True)
if rc != 0:
    print(text[-3000:], file=sys.stderr)
PY
    done
done | tee "$out/runs.jsonl"
/usr/bin/python3 - "$out/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
res = {"cpu": cpu}
for mode in dict.fromkeys(r["mode"] for r in runs):
    rs = [r for r in runs if r["mode"] == mode and r["rc"] == 0]
    if not rs:
        continue
    med = lambda xs: statistics.median(xs) if xs else None
    res[mode] = {w: {k: med([r["workers"][w][k] for r in rs if w in r["workers"]])
                     for k in ("median_ms", "longest_ms", "longest_over_median")} for w in ("0", "1")}
    res[mode]["psd_write_ms"] = med([x for r in rs for x in r["psd_write_ms"]])
    res[mode]["psd_peak_rss_mb"] = med([r["psd_peak_rss_mb"] for r in rs])
    res[mode]["writer_own_mb"] = med([r["writer_own_mb"] for r in rs])
    res[mode]["checkpoint_mb"] = med([r["checkpoint_mb"] for r in rs])
print(json.dumps(res))
PY
