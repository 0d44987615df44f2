#!/usr/bin/env bash
# DLRM on Criteo-shaped data (docs/sparse.md "DLRM"), psrun against PyTorch side by side.
# DIR holds bench/criteo_data.py's output. Each of ROUNDS rounds runs, in this order:
#   psrun   `psrun local --ps PS --workers WORKERS` on DIR/MODEL.json (MODEL: dlrm, dcn or wdl),
#           all 26 tables sparse on psd
#   torch   bench/torch_dlrm.py --variant dense, then sparse (SparseAdam), then bag (EmbeddingBag)
# each with the same recipe (Adam, LR, batch BATCH, STEPS updates in all). Prints one JSON line per
# run (examples/s over the run, test AUC) and, last, one with the medians per system, the CPU model
# and psrun's median speed over each torch variant's.
# Usage: bench/dlrm.sh DIR STEPS [ROUNDS]   (env: PS=4 WORKERS=2 BATCH=256 LR=0.001 MODEL=dlrm
#        VARIANTS="dense sparse bag" THREADS= PSRUN=build/launcher/psrun MODES=async)
# MODES: psrun's consistency, each run in every round: async (system "psrun"), sync (--sync:
# "psrun_sync", each update averages WORKERS gradients, so STEPS updates are WORKERS x the examples),
# hybrid (--sync --async-tables: "psrun_hybrid", dense layers sync, tables async).
# PyTorch picks its intra-op threads itself unless THREADS is set (on the 2-vCPU host of
# docs/benchmarks.md it picked 1; with 2, while two compilers shared the cores, its DLRM ran 3x
# slower: 416 against 1,294 examples/s).
set -u
dir=$1 steps=$2 rounds=${3:-3}
psrun=${PSRUN:-build/launcher/psrun}
here=$(cd "$(dirname "$0")" && pwd)
ps=${PS:-4} workers=${WORKERS:-2} batch=${BATCH:-256} lr=${LR:-0.001} model=${MODEL:-dlrm}
case $model in dlrm|dcn|wdl) ;; *) echo "MODEL must be dlrm, dcn or wdl, got '$model'" >&2; exit 2 ;; esac
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
files=()
for split in train test; do
    files+=("--$split-images" "$dir/${split}_dense.npy" "--$split-labels" "$dir/${split}_y.npy")
    for f in $(seq 0 25); do files+=("--$split-input" "c$f=$dir/${split}_c$f.npy"); done
done
tables=$(seq -s, -f 'emb%g' 0 25)
results=$out/results.jsonl
for round in $(seq 1 "$rounds"); do
  for mode in ${MODES:-async}; do
    case $mode in
        async) system=psrun consistency=() per_update=$batch ;;
        sync) system=psrun_sync consistency=(--sync) per_update=$((batch * workers)) ;;
        hybrid) system=psrun_hybrid consistency=(--sync --async-tables) per_update=$((batch * workers)) ;;
        *) echo "MODES: async, sync or hybrid, got '$mode'" >&2; exit 2 ;;
    esac
    run=$out/$mode$round
    start=$(date +%s.%N)
    "$psrun" local --ps "$ps" --workers "$workers" "${consistency[@]}" --no-auth --grace 60 -- --model "$dir/$model.json" \
        "${files[@]}" --optimizer adam --learning-rate "$lr" --batch-size "$batch" --steps "$steps" --log-every 1000 \
        --seed "$round" --sparse-embedding "$tables" --model-dir "$run" >"$run.log" 2>&1
    rc=$?
    end=$(date +%s.%N)
    /usr/bin/python3 - "$run/summary.json" "$rc" "$start" "$end" "$steps" "$per_update" "$round" "$system" <<'PY' | tee -a "$results"
import json, os, sys
path, rc, start, end, steps, per_update, rnd, system = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:5]), *map(int, sys.argv[5:8]), sys.argv[8]
s = json.load(open(path)) if rc == 0 and os.path.exists(path) else {}
print(json.dumps({"system": system, "round": rnd, "rc": rc, "test_auc": s.get("test_auc"),
                  "examples_per_s": s.get("images_per_sec"), "wall_examples_per_s": steps * per_update / (end - start)}))
PY
    [ "$rc" = 0 ] || tail -20 "$run.log" >&2
  done
    for variant in ${VARIANTS-dense sparse bag}; do
        /usr/bin/python3 "$here/torch_dlrm.py" "$dir" --model "$model" --steps "$steps" --batch-size "$batch" --learning-rate "$lr" \
            --variant "$variant" --seed "$round" ${THREADS:+--threads "$THREADS"} |
            /usr/bin/python3 -c "import json,sys; r=json.loads(sys.stdin.read()); r.update(system='torch_'+r['variant'], round=$round); print(json.dumps(r))" |
            tee -a "$results"
    done
done
/usr/bin/python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
med = {}
for system in sorted({r["system"] for r in rows}):
    runs = [r for r in rows if r["system"] == system and r.get("examples_per_s")]
    if runs:
        med[system] = {"examples_per_s": statistics.median(r["examples_per_s"] for r in runs),
                       "test_auc": statistics.median(r["test_auc"] for r in runs), "runs": len(runs)}
speedup = {k: med["psrun"]["examples_per_s"] / v["examples_per_s"] for k, v in med.items()
           if "psrun" in med and k.startswith("torch")}
print(json.dumps({"summary": med, "psrun_speedup": speedup, "cpu": cpu}))
PY
