#!/usr/bin/env bash
# The sparse-table acceptance run (docs/sparse.md): a click model over one shared table of ROWS
# rows, trained by psrun local --ps 4 --workers 2 with --sparse-embedding emb on click logs from
# bench/click_data.py in DIR. Samples every daemon's peak RSS (VmHWM) until it exits and prints one
# JSON line: peak RSS per psd and per worker (MB), each psd's share of table + optimizer slots
# (MB), examples/s, test AUC against the planted model's, distinct ids and row bytes per step.
# Usage: bench/sparse_click.sh DIR STEPS [extra workerd options...]   (psrun from build/)
set -u
. "$(dirname "$0")/peak_rss.sh"  # peak_rss_json
dir=$1 steps=$2; shift 2
psrun=${PSRUN:-build/launcher/psrun}
out=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$out"' EXIT
"$psrun" local --ps 4 --workers 2 --no-auth --grace 60 -- --model "$dir/click.json" \
    --train-images "$dir/train_x.npy" --train-labels "$dir/train_y.npy" --test-images "$dir/test_x.npy" \
    --test-labels "$dir/test_y.npy" --steps "$steps" --batch-size 256 --optimizer "${OPTIMIZER:-adam}" --learning-rate "${LR:-0.002}" \
    --log-every 500 --sparse-embedding emb --model-dir "$out/run" "$@" >"$out/log" 2>&1 &
launcher=$!
rss=$(peak_rss_json "$launcher")
wait "$launcher"
rc=$?
/usr/bin/python3 - "$out" "$dir" "$rc" "$rss" <<'PY'
import json, re, sys
out, d, rc, rss = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
log = open(out + "/log").read()
s = json.load(open(out + "/run/summary.json")) if rc == 0 else {}
planted = json.load(open(d + "/planted.json"))
m = re.search(r"sparse table \S+ \[(\d+) x (\d+)\]: ([0-9.]+) distinct ids per batch of (\d+) lookups; rows pulled "
              r"and pushed ([0-9.]+) KB per step", log)
share = re.findall(r'"row_floats":(\d+),"row_slot_floats":(\d+)', log)
print(json.dumps({
    "rc": rc, "peak_rss_mb": rss,
    "psd_rows_and_slots_mb": [round((int(a) + int(b)) * 4 / 2**20) for a, b in share],
    "examples_per_s": s.get("images_per_sec"), "test_auc": s.get("test_auc"), "planted_auc": planted["auc"],
    "distinct_ids_per_batch": float(m.group(3)) if m else None, "lookups_per_batch": int(m.group(4)) if m else None,
    "row_kb_per_step": float(m.group(5)) if m else None, "steps": s.get("global_step")}))
if rc != 0:
    print(log[-3000:], file=sys.stderr)
PY
