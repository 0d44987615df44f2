#!/usr/bin/env bash
# The seeds' training jobs reproduced with psrun (docs/models.md "The seeds' jobs, reproduced"):
# one line per job with its exit code, wall time, test accuracy and training seconds.
# Usage: bench/seed_jobs.sh [OUT_DIR]   (after jobs/setup.sh and `psrun data fetch`)
set -uo pipefail
cd "$(dirname "$0")/.."
P=$PWD/build/launcher/psrun
out=${1:-runs/seed-jobs}
mkdir -p "$out"

report() {  # name, start time, exit code
  python3 - "$out/$1/summary.json" "$1" "$2" "$3" <<'PY'
import json, sys, time
path, name, start, rc = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
try:
    s = json.load(open(path))
    print(f"{name}: rc={rc} wall={time.time() - start:.1f}s accuracy={100 * s['test_accuracy']:.2f}% "
          f"training={s['train_seconds']:.1f}s steps={s['global_step']}")
except OSError as e:
    print(f"{name}: rc={rc} no summary ({e})")
PY
}

run() {  # name, then psrun arguments (the model dir is added)
  local name=$1; shift
  rm -rf "${out:?}/$name"
  local start; start=$(date +%s.%N)
  "$P" "$@" --model-dir "$out/$name" >"$out/$name.log" 2>&1
  report "$name" "$start" $?
}

run mnist01 local --ps 0 --workers 1 -- --batch-size 50 --steps 1000 --threads 1
run mnist02 local --ps 0 --workers 1 -- --batch-size 50 --steps 1000 --threads 1 --eval-every 100
run mnist03 local --ps 1 --workers 3 -- --batch-size 50 --steps 1000
run mnist04 local --ps 1 --workers 3 --sync -- --global-batch-size 60 --steps 1000
run lowlevel local --ps 1 --workers 2 -- --model mnist_low_level
run cnn512 local --ps 1 --workers 2 --evaluators 1 -- --model mnist_cnn512 --checkpoint-steps 230

# The DLS example as its users launched it: one task per TF_CONFIG role, worker 0 the chief.
rm -rf "${out:?}/dls"
ports=($(python3 -c "
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(('127.0.0.1', 0))
print(' '.join(str(x.getsockname()[1]) for x in s))"))
cluster="\"cluster\": {\"ps\": [\"127.0.0.1:${ports[0]}\"], \"worker\": [\"127.0.0.1:${ports[1]}\", \"127.0.0.1:${ports[2]}\"]}"
start=$(date +%s.%N)
pids=()
for task in "ps 0" "worker 0" "worker 1"; do
  set -- $task
  TF_CONFIG="{$cluster, \"task\": {\"type\": \"$1\", \"index\": $2}}" timeout 600 "$P" run --no-auth -- \
    --model dls_mlp --model-dir "$out/dls" --threads 1 >"$out/dls-$1-$2.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
report dls "$start" "$rc"
