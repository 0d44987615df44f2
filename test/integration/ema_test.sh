#!/usr/bin/env bash
# Issue 35: psd's moving average of the weights (--ema-decay). A run through 2 psd shards records
# the decay and evaluates the average at its end (ema_test_accuracy); psrun eval --ema reads the
# same average from the checkpoint and gets the same accuracy, eval without it the weights'; the
# average exported (--ema) scores the same; a run without the average, --ema with --onnx, standalone training and
# impossible decays exit 2 naming what to do. psrun local stops its own processes.
# Usage: ema_test.sh <psrun> (from the source root; needs ~/.cache/psrun/data/mnist)
set -u
psrun=$1
workerd=$(dirname "$psrun")/../workerd/workerd
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/psrun-ema-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()
require_mnist
timeout 300 "$psrun" local --ps 2 --workers 1 -- --model dls_mlp --ema-decay 0.9 --steps 60 \
    --model-dir "$tmp/m" >"$tmp/log" 2>&1
code=$?
check "psrun local with --ema-decay 0.9 exits 0 (rc=$code)" test "$code" -eq 0
check "summary.json and the manifest record the decay; the average was evaluated" "$py" - "$tmp/m" <<'PY'
import glob, json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
print({k: s.get(k) for k in ("ema_decay", "ema_test_accuracy", "test_accuracy", "global_step")})
assert abs(s["ema_decay"] - 0.9) < 1e-6 and s["global_step"] == 60, s
assert 0.5 < s["ema_test_accuracy"] <= 1 and 0.5 < s["test_accuracy"] <= 1, s
m = json.load(open(sorted(glob.glob(sys.argv[1] + "/ckpt-*/manifest.json"))[-1]))["optimizer"]
assert abs(m["ema_decay"] - 0.9) < 1e-6, m
PY
timeout 120 "$psrun" eval --model-dir "$tmp/m" --ema -o "$tmp/e_avg" >"$tmp/eval_avg" 2>&1
code=$?
check "psrun eval --ema exits 0 (rc=$code)" test "$code" -eq 0
timeout 120 "$psrun" eval --model-dir "$tmp/m" -o "$tmp/e_w" >"$tmp/eval_w" 2>&1
check "eval --ema gives the run's ema_test_accuracy, eval without it the run's test_accuracy" "$py" - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
s = json.load(open(t + "/m/summary.json"))
a = json.load(open(t + "/e_avg/eval.json"))
w = json.load(open(t + "/e_w/eval.json"))
print(a["accuracy"], s["ema_test_accuracy"], w["accuracy"], s["test_accuracy"], a["source"])
assert a["accuracy"] == s["ema_test_accuracy"] and "moving average" in a["source"], (a, s)
assert w["accuracy"] == s["test_accuracy"] and "moving average" not in w["source"], (w, s)
PY
timeout 120 "$psrun" export --model-dir "$tmp/m" --ema >"$tmp/export" 2>&1
code=$?
check "export --ema writes model-60-ema.onnx (rc=$code)" bash -c "test $code -eq 0 && test -s '$tmp/m/model-60-ema.onnx'"
timeout 120 "$psrun" eval --onnx "$tmp/m/model-60-ema.onnx" -o "$tmp/e_onnx" >"$tmp/eval_onnx" 2>&1
check "the exported average scores as eval --ema does" "$py" - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
a = json.load(open(t + "/e_avg/eval.json"))["accuracy"]
o = json.load(open(t + "/e_onnx/eval.json"))["accuracy"]
print(a, o)
assert abs(a - o) <= 0.0005, (a, o)
PY
timeout 120 "$psrun" eval --onnx "$tmp/m/model-60-ema.onnx" --ema >"$tmp/bad" 2>&1
code=$?
check "eval --onnx --ema exits 2 naming --ema (rc=$code)" bash -c "test $code -eq 2 && grep -q -- '--ema' '$tmp/bad'"

timeout 300 "$psrun" local --ps 1 --workers 1 -- --model dls_mlp --steps 5 --model-dir "$tmp/n" >"$tmp/nlog" 2>&1
timeout 120 "$psrun" eval --model-dir "$tmp/n" --ema >"$tmp/bad" 2>&1
code=$?
check "eval --ema of a run without --ema-decay exits 2 naming --ema-decay (rc=$code)" \
    bash -c "test $code -eq 2 && grep -q -- '--ema-decay' '$tmp/bad'"
timeout 120 "$psrun" export --model-dir "$tmp/n" --ema >"$tmp/bad" 2>&1
code=$?
check "export --ema of a run without --ema-decay exits 2 (rc=$code)" \
    bash -c "test $code -eq 2 && grep -q -- '--ema-decay' '$tmp/bad'"
for bad in "--ema-decay 1" "--ema-decay -0.5" "--ema-decay nan" "--ema-decay 0.9"; do
    timeout 60 "$workerd" --standalone --model dls_mlp --steps 1 $bad >"$tmp/bad" 2>&1
    code=$?
    check "standalone $bad exits 2 (rc=$code) naming --ema-decay" bash -c "test $code -eq 2 && grep -q -- '--ema-decay' '$tmp/bad'"
done
exit $fail
