#!/usr/bin/env bash
# Issue 35: --param-group through psd and standalone. A run through 2 psd shards with the biases
# frozen (lr_mult=0) and the output layer at twice the rate with its own decay: between its
# checkpoints of steps 10 and 20 the biases stay bit for bit and the weights move; summary.json and
# the manifest record the groups. Bad groups exit 2 naming the fault. psrun local stops its own processes.
# Usage: param_groups_test.sh <psrun> (from the source root; needs ~/.cache/psrun/data/mnist)
set -u
psrun=$1
workerd=$(dirname "$psrun")/../workerd/workerd
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/psrun-groups-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()
require_mnist
timeout 300 "$psrun" local --ps 2 --workers 1 -- --model dls_mlp --optimizer momentum --learning-rate 0.01 \
    --param-group '*/b:lr_mult=0' --param-group 'fc2/*:lr_mult=2,weight_decay=0.001' --steps 20 \
    --checkpoint-steps 10 --model-dir "$tmp/m" >"$tmp/log" 2>&1
code=$?
check "psrun local with two --param-group exits 0 (rc=$code)" test "$code" -eq 0
for step in 10 20; do
    timeout 120 "$psrun" export --model-dir "$tmp/m" --checkpoint $step -o "$tmp/m$step.onnx" >"$tmp/export" 2>&1
done
check "frozen biases do not move between steps 10 and 20; the weights do" "$py" - "$tmp" <<'PY'
import sys
import numpy as np
import onnx
from onnx import numpy_helper
t = sys.argv[1]
a, b = ({i.name: numpy_helper.to_array(i) for i in onnx.load(f"{t}/m{s}.onnx").graph.initializer} for s in (10, 20))
moved = {n: float(np.max(np.abs(a[n] - b[n]))) for n in a if a[n].size > 1}
print(moved)
biases = [n for n in moved if a[n].ndim == 1]
weights = [n for n in moved if a[n].ndim == 2]
assert len(biases) == 2 and len(weights) == 2, moved
assert all(moved[n] == 0 for n in biases) and all(moved[n] > 0 for n in weights), moved
PY
check "summary.json and the manifest record both groups" "$py" - "$tmp/m" <<'PY'
import glob, json, sys
want = [{"pattern": "*/b", "lr_multiplier": 0.0}, {"pattern": "fc2/*", "lr_multiplier": 2.0, "weight_decay": 0.001}]
def same(groups):
    return len(groups) == 2 and all(g["pattern"] == w["pattern"] and g["lr_multiplier"] == w["lr_multiplier"] and
                                    abs(g.get("weight_decay", -1) - w.get("weight_decay", -1)) < 1e-6
                                    for g, w in zip(groups, want))
s = json.load(open(sys.argv[1] + "/summary.json"))
m = json.load(open(sorted(glob.glob(sys.argv[1] + "/ckpt-*/manifest.json"))[-1]))["optimizer"]
print(s["param_groups"], m["param_groups"])
assert same(s["param_groups"]) and same(m["param_groups"]), (s["param_groups"], m["param_groups"])
PY
timeout 120 "$workerd" --standalone --model dls_mlp --steps 5 --param-group 'fc1/*:lr_mult=0.5' >"$tmp/slog" 2>&1
code=$?
check "standalone with a --param-group exits 0 (rc=$code)" test "$code" -eq 0
for bad in "nothing*:lr_mult=2" "fc1/w:lr_mult=-1" "fc1/w" "fc1/w:lr=2" "fc1/w:lr_mult=1e6,weight_decay=1"; do
    timeout 60 "$workerd" --standalone --model dls_mlp --optimizer sgd --steps 1 --param-group "$bad" >"$tmp/bad" 2>&1
    code=$?
    check "--param-group '$bad' exits 2 (rc=$code) naming it" bash -c "test $code -eq 2 && grep -qF -- '$bad' '$tmp/bad'"
done
exit $fail
