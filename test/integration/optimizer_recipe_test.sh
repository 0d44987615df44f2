#!/usr/bin/env bash
# Issue 35: AdamW with weight decay and global-norm clipping through psd, and Nesterov with weight
# decay standalone, finish and record their settings in summary.json (and the checkpoint manifest);
# impossible values exit 2 naming the flag. Every process ends by itself (psrun local stops its own).
# Usage: optimizer_recipe_test.sh <psrun> (from the source root; needs ~/.cache/psrun/data/mnist)
set -u
psrun=$1
workerd=$(dirname "$psrun")/../workerd/workerd
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/psrun-optimizer-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()
require_mnist
timeout 180 "$psrun" local --ps 1 --workers 1 -- --model dls_mlp --optimizer adamw --weight-decay 0.1 \
    --clip-global-norm 1 --steps 50 --model-dir "$tmp/m" >"$tmp/log" 2>&1
code=$?
check "psrun local with adamw exits 0 (rc=$code)" test "$code" -eq 0
check "summary.json and the manifest record adamw, decay 0.1 on matrices, clipping at 1" "$py" - "$tmp/m" <<'PY'
import glob, json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
print({k: s.get(k) for k in ("optimizer", "optimizer_form", "weight_decay", "weight_decay_on", "clip_global_norm",
                             "chief_clipped_steps", "global_step", "test_accuracy")})
assert s["optimizer"] == "adamw" and s["optimizer_form"] == "torch", s
assert abs(s["weight_decay"] - 0.1) < 1e-6 and s["weight_decay_on"] == "matrices", s
assert s["clip_global_norm"] == 1.0 and s["global_step"] == 50, s
assert 0 < s["chief_clipped_steps"] <= 50, s  # dls_mlp sums its loss over the batch: large norms
assert s["test_accuracy"] > 0.5, s
m = json.load(open(sorted(glob.glob(sys.argv[1] + "/ckpt-*/manifest.json"))[-1]))["optimizer"]
assert m["kind"] == "adamw" and abs(m["weight_decay"] - 0.1) < 1e-6 and m["clip_global_norm"] == 1.0, m
PY
timeout 180 "$workerd" --standalone --model dls_mlp --optimizer nesterov --learning-rate 0.001 --weight-decay 5e-4 \
    --weight-decay-on all --steps 30 --model-dir "$tmp/s" >"$tmp/slog" 2>&1
code=$?
check "standalone nesterov exits 0 (rc=$code)" test "$code" -eq 0
check "standalone summary.json records nesterov, decay on all, no clipping" "$py" - "$tmp/s" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["optimizer"] == "nesterov" and s["weight_decay_on"] == "all" and s["clip_global_norm"] == 0, s
assert s["clipped_steps"] == 0 and s["test_accuracy"] > 0.5, s
PY
for bad in "--weight-decay -1" "--weight-decay-on biases" "--clip-global-norm nan" "--optimizer adamw --weight-decay 200" \
           "--optimizer lamb"; do
    timeout 60 "$workerd" --standalone --model dls_mlp --steps 1 $bad >"$tmp/bad" 2>&1
    code=$?
    flag=${bad%% *}
    check "$bad exits 2 (rc=$code) naming $flag" bash -c "test $code -eq 2 && grep -q -- '$flag' '$tmp/bad'"
done
exit $fail
