#!/usr/bin/env bash
# The main job on one machine: installs what is missing and builds (jobs/setup.sh), fetches MNIST
# (`psrun data fetch`: a no-op when it is cached), then trains TF's mnist_deep with 1 psd and 2
# workerd (asynchronous; 1 compute thread each) and prints the final test accuracy.
# Usage: jobs/train-local.sh [extra training options, e.g. --steps 6000 --model-dir runs/x]
# Options given here replace the defaults below. The model dir holds summary.json, metrics.jsonl,
# the TensorBoard events (tensorboard --logdir runs/local) and curves.png.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs/setup.sh
build/launcher/psrun data fetch

# Defaults, each dropped when the caller gives the same option.
defaults=(--model-dir runs/local --batch-size 100 --learning-rate 1e-3 --steps 5000
          --lr-decay-rate 0.1 --lr-decay-steps 5000 --eval-every 500 --threads 1)
given=" $* "
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
for e in s.get("evaluations", []):
    if e["test_accuracy"] >= 0.99:
        print("train-local: 99.0%% first reached at global step %d after %.1f s" % (e["global_step"], e["elapsed_seconds"]))
        break
PY
