#!/usr/bin/env bash
# The main job on one machine: installs what is missing and builds the three programs it runs
# (jobs/setup.sh --binaries: psrun, psd, workerd; test/run.sh builds the rest), fetches MNIST
# (`psrun data fetch`: a no-op when it is cached), then trains TF's mnist_deep with 1 psd and 2
# workerd (asynchronous; 1 compute thread each) and prints the final test accuracy.
# The recipe is the fastest measured to 99.2% (docs/benchmarks.md "Time to accuracy"): batch
# 128, Adam with a one-cycle schedule peaking at 4e-3 over the run's steps, bf16 where the CPU
# has it (f32 otherwise).
# Usage: jobs/train-local.sh [extra training options, e.g. --steps 6000 --model-dir runs/x]
# Options given here replace the defaults below. The model dir holds summary.json, metrics.jsonl,
# the TensorBoard events (tensorboard --logdir runs/local) and curves.png.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs/setup.sh --binaries
build/launcher/psrun data fetch

# Defaults, each dropped when the caller gives the same option.
given=" $* "
steps=2600
prev=
for a in "$@"; do
  [ "$prev" = "--steps" ] && steps=$a
  case "$a" in --steps=*) steps=${a#--steps=};; esac
  prev=$a
done
precision=f32
grep -qE 'avx512_bf16|amx_bf16' /proc/cpuinfo && precision=bf16
# The one-cycle schedule spans the run, also when --steps is given (an explicit --lr-schedule wins).
defaults=(--model-dir runs/local --batch-size 128 --learning-rate 4e-3 --steps "$steps"
          --lr-schedule "onecycle:total=$steps" --precision "$precision" --eval-every 200 --threads 1)
case "$given" in *" --lr-decay-rate "*|*" --lr-decay-steps "*) defaults=("${defaults[@]:0:8}" "${defaults[@]:10}");; esac
args=()
for ((i = 0; i < ${#defaults[@]}; i += 2)); do
  opt=${defaults[i]}
  case "$given" in *" $opt "*|*" $opt="*) ;; *) args+=("$opt" "${defaults[i + 1]}");; esac
done
args+=("$@")
model_dir=
prev=
for a in "${args[@]}"; do
  [ "$prev" = "--model-dir" ] && model_dir=$a
  case "$a" in --model-dir=*) model_dir=${a#--model-dir=};; esac
  prev=$a
done

status=0
build/launcher/psrun local --ps 1 --workers 2 -- "${args[@]}" || status=$?
if [ "$status" -ne 0 ]; then
  echo "train-local: psrun local failed (exit $status); see the log above" >&2
  exit "$status"
fi
python3 - "$model_dir/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("train-local: final test accuracy %.2f%% at global step %d (%.0f img/s, %.1f s of training, %d workers)"
      % (100 * s["test_accuracy"], s["global_step"], s["images_per_sec"], s["train_seconds"], s["workers"]))
for t in (s.get("targets") or {}).get("targets", []):
    what = {"best": "the best accuracy, %.2f%%,", "near_best": "%.2f%% (1 point below the best)"}.get(
        t["kind"], "%.2f%%") % (100 * t["threshold"])
    if t["reached"] and "seconds" in t:
        print("train-local: %s first reached at global step %d after %.1f s" % (what, t["global_step"], t["seconds"]))
    else:
        print("train-local: %s not reached" % what)
PY
