#!/bin/bash
# Same-host comparison of the compute engine with PyTorch (docs/benchmarks.md): N rounds of
# `psrun bench train` with the hand-written kernels, without them, and bench/pytorch_mnist_deep.py
# in PyTorch's best configuration, one after the other so that all three see the same minutes of a
# shared host. Prints one line per round (img/s as mean / median step) and the median ratios.
#
#   bench/compare_pytorch.sh [ROUNDS=8] [BATCH=100]
#
# Needs Debian's python3-torch and libopenblas0-openmp (not installed by jobs/setup.sh;
# `apt-get install python3-torch libopenblas0-openmp`)
# and a built tree (build/launcher/psrun).
set -euo pipefail
cd "$(dirname "$0")/.."
bench/check_blas.sh
rounds=${1:-8}
batch=${2:-100}
tunables=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824
fields='import json,sys; d=json.load(sys.stdin); print("%.0f %.0f" % (d["images_per_sec"], d.get("images_per_sec_median_step", 0)))'

psrun_train() {
  build/launcher/psrun bench train --batch-size "$batch" --threads 2 --steps 100 --hand-kernels "$1" |
    python3 -c "$fields"
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((i = 1; i <= rounds; i++)); do
  hand=$(psrun_train 1)
  plain=$(psrun_train 0)
  torch=$(GLIBC_TUNABLES=$tunables /usr/bin/python3 bench/pytorch_mnist_deep.py --batch-size "$batch" \
            --threads 2 --channels-last --steps 60 2>/dev/null | python3 -c "$fields")
  echo "$hand $plain $torch" >>"$out"
  echo "round $i: psrun $hand | psrun --hand-kernels 0 $plain | pytorch $torch (img/s: mean median-step)"
done
python3 - "$out" <<'PY'
import statistics, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1])]
def med(i, j):
    return statistics.median(r[i] / r[j] for r in rows)
print("median ratios over %d rounds: psrun/pytorch %.2f (median step) %.2f (mean); "
      "oneDNN-only/pytorch %.2f (median step); psrun/oneDNN-only %.2f (median step)"
      % (len(rows), med(1, 5), med(0, 4), med(3, 5), med(1, 3)))
PY
