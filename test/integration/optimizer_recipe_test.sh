#!/usr/bin/env bash
# Issue 35: AdamW with weight decay, betas, epsilon, label smoothing and global-norm clipping through
# psd, Nesterov with weight decay and momentum standalone, and a model file's recipe (flags win over
# it) finish and record their settings in summary.json (and the checkpoint manifest); impossible
# values exit 2 naming the flag. Every process ends by itself (psrun local stops its own).
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
    --clip-global-norm 1 --beta1 0.85 --beta2 0.95 --epsilon 1e-6 --label-smoothing 0.1 --steps 50 \
    --model-dir "$tmp/m" >"$tmp/log" 2>&1
code=$?
check "psrun local with adamw exits 0 (rc=$code)" test "$code" -eq 0
check "summary.json and the manifest record adamw, decay 0.1 on matrices, clipping at 1, betas, epsilon, smoothing" \
    "$py" - "$tmp/m" <<'PY'
import glob, json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
print({k: s.get(k) for k in ("optimizer", "optimizer_form", "weight_decay", "weight_decay_on", "clip_global_norm",
                             "chief_clipped_steps", "global_step", "test_accuracy")})
assert s["optimizer"] == "adamw" and s["optimizer_form"] == "torch", s
assert abs(s["weight_decay"] - 0.1) < 1e-6 and s["weight_decay_on"] == "matrices", s
assert s["clip_global_norm"] == 1.0 and s["global_step"] == 50, s
assert 0 < s["chief_clipped_steps"] <= 50, s  # dls_mlp sums its loss over the batch: large norms
assert s["test_accuracy"] > 0.5, s
close = lambda a, b: abs(a - b) <= 1e-6 * b
assert close(s["beta1"], 0.85) and close(s["beta2"], 0.95) and close(s["epsilon"], 1e-6), s
assert close(s["label_smoothing"], 0.1) and "momentum" not in s, s
manifest = json.load(open(sorted(glob.glob(sys.argv[1] + "/ckpt-*/manifest.json"))[-1]))
m = manifest["optimizer"]
assert m["kind"] == "adamw" and abs(m["weight_decay"] - 0.1) < 1e-6 and m["clip_global_norm"] == 1.0, m
assert close(m["beta1"], 0.85) and close(m["beta2"], 0.95) and close(m["epsilon"], 1e-6), m
assert close(manifest["extra"]["label_smoothing"], 0.1), manifest["extra"]
PY
timeout 180 "$workerd" --standalone --model dls_mlp --optimizer nesterov --learning-rate 0.001 --weight-decay 5e-4 \
    --weight-decay-on all --momentum 0.8 --steps 30 --model-dir "$tmp/s" >"$tmp/slog" 2>&1
code=$?
check "standalone nesterov exits 0 (rc=$code)" test "$code" -eq 0
check "standalone summary.json records nesterov, momentum 0.8, decay on all, no clipping" "$py" - "$tmp/s" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["optimizer"] == "nesterov" and s["weight_decay_on"] == "all" and s["clip_global_norm"] == 0, s
assert abs(s["momentum"] - 0.8) < 1e-6 and "beta1" not in s and s["label_smoothing"] == 0, s
assert s["clipped_steps"] == 0 and s["test_accuracy"] > 0.5, s
PY
# A model file's recipe: its momentum, weight decay and label smoothing apply; --momentum wins over
# the recipe's; --optimizer adam drops the recipe's momentum (adam has none) and keeps the rest.
cat >"$tmp/tiny.json" <<'JSON'
{"name": "tiny", "input": {"channels": 1, "height": 28, "width": 28}, "classes": 10,
 "layers": [{"kind": "dense", "units": 10}], "loss": {"kind": "softmax_cross_entropy"},
 "recipe": {"optimizer": "nesterov", "learning_rate": 0.01, "momentum": 0.8, "weight_decay": 5e-4,
            "label_smoothing": 0.1}}
JSON
cat >"$tmp/tiny_mse.json" <<'JSON'
{"name": "tiny_mse", "input": {"channels": 1, "height": 28, "width": 28}, "targets": 10,
 "layers": [{"kind": "dense", "units": 10}], "loss": {"kind": "mean_squared_error"}}
JSON
for flags in "" "--momentum 0.7" "--optimizer adam"; do
    dir=$tmp/r$(echo "$flags" | tr -dc 'a-z0-9')
    timeout 60 "$workerd" --standalone --model "$tmp/tiny.json" --steps 10 --model-dir "$dir" $flags >"$tmp/rlog" 2>&1
    code=$?
    check "recipe run [$flags] exits 0 (rc=$code)" test "$code" -eq 0
    check "recipe run [$flags] records the merged settings" "$py" - "$dir" "$flags" <<'PY'
import json, sys
s, flags = json.load(open(sys.argv[1] + "/summary.json")), sys.argv[2]
close = lambda a, b: abs(a - b) <= 1e-6 * b
assert close(s["weight_decay"], 5e-4) and close(s["label_smoothing"], 0.1), s
if flags == "--optimizer adam":
    assert s["optimizer"] == "adam" and "momentum" not in s and close(s["beta1"], 0.9), s
else:
    assert s["optimizer"] == "nesterov" and close(s["momentum"], 0.7 if flags else 0.8), s
PY
done
for bad in "--weight-decay -1" "--weight-decay-on biases" "--clip-global-norm nan" "--optimizer adamw --weight-decay 200" \
           "--optimizer lamb --beta1 1" "--optimizer lamb --epsilon 0" "--optimizer momentum --momentum 1" \
           "--optimizer nesterov --momentum -0.1" \
           "--optimizer adamw --beta1 1" "--optimizer adam --beta2 nan" "--optimizer adam_torch --epsilon 0" \
           "--optimizer adam --epsilon inf" "--optimizer sgd --beta1 0.9" "--optimizer adam --momentum 0.9" \
           "--label-smoothing 1" "--label-smoothing -0.5" "--model $tmp/tiny_mse.json --label-smoothing 0.1"; do
    timeout 60 "$workerd" --standalone --model dls_mlp --steps 1 $bad >"$tmp/bad" 2>&1
    code=$?
    flag=$(echo "$bad" | grep -o -- '--[a-z0-9-]*' | tail -1)  # the last flag: the one at fault
    check "$bad exits 2 (rc=$code) naming $flag" bash -c "test $code -eq 2 && grep -q -- '$flag' '$tmp/bad'"
done
exit $fail
