#!/usr/bin/env bash
# Issue 35: a recipe file beside the model (--recipe F). mnist_softmax (whose own recipe says sgd at
# 0.5, batch 100, 1000 steps) trained through psd with a recipe file of momentum, schedule,
# warm-up, decay, clipping, a parameter group, smoothing and EMA: summary.json shows the file's
# settings in effect; the chief records <model-dir>/recipe.json, which trains again through
# --recipe with --steps on the command line winning over it (the rest the same); psrun export
# carries it as the ONNX metadata entry psrun.recipe, which the import reads back (the exported file
# trains again with the run's recipe); bad recipe files exit 2 naming the file and the field. psrun local stops its own processes.
# Usage: recipe_file_test.sh <psrun> (from the source root; needs ~/.cache/psrun/data/mnist)
set -u
psrun=$1
workerd=$(dirname "$psrun")/../workerd/workerd
py=/usr/bin/python3
tmp=$(mktemp -d /tmp/psrun-recipe-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()
require_mnist
cat >"$tmp/r.json" <<'JSON'
{"recipe": {"optimizer": "momentum", "learning_rate": 0.05, "momentum": 0.8, "steps": 20, "batch_size": 32,
            "lr_schedule": "cosine:steps=20,alpha=0.1", "lr_warmup_steps": 2, "weight_decay": 1e-4,
            "weight_decay_on": "all", "clip_global_norm": 5, "param_groups": ["*/b:lr_mult=0.5"],
            "label_smoothing": 0.05, "ema_decay": 0.9}}
JSON
timeout 180 "$psrun" local --ps 1 --workers 1 -- --model mnist_softmax --recipe "$tmp/r.json" --model-dir "$tmp/d" \
    --checkpoint-secs 0 >"$tmp/log" 2>&1
code=$?
check "psrun local --recipe exits 0 (rc=$code)" test "$code" -eq 0
check "summary.json shows the file's recipe in effect over the model's" "$py" - "$tmp/d" <<'PY'
import sys, json
s = json.load(open(sys.argv[1] + "/summary.json"))
print({k: s.get(k) for k in ("optimizer", "learning_rate", "momentum", "global_step", "batch_size", "lr_schedule",
                             "weight_decay", "weight_decay_on", "clip_global_norm", "param_groups", "label_smoothing",
                             "ema_decay", "test_accuracy")})
close = lambda a, b: abs(a - b) <= 1e-6 * abs(b)
assert s["optimizer"] == "momentum" and close(s["learning_rate"], 0.05) and close(s["momentum"], 0.8), s
assert s["global_step"] == 20 and s["batch_size"] == 32, s
assert s["lr_schedule"] == "cosine:steps=20,alpha=0.1,warmup=2", s["lr_schedule"]
assert close(s["weight_decay"], 1e-4) and s["weight_decay_on"] == "all" and s["clip_global_norm"] == 5, s
assert s["param_groups"] == [{"pattern": "*/b", "lr_multiplier": 0.5}], s["param_groups"]
assert close(s["label_smoothing"], 0.05) and close(s["ema_decay"], 0.9), s
assert s["test_accuracy"] > 0.5, s
PY
check "the chief wrote recipe.json: the effective recipe, every field" "$py" - "$tmp/d" <<'PY'
import sys, json
r = json.load(open(sys.argv[1] + "/recipe.json"))["recipe"]
print(r)
want = {"optimizer": "momentum", "learning_rate": 0.05, "momentum": 0.8, "steps": 20, "batch_size": 32,
        "lr_schedule": "cosine:steps=20,alpha=0.1,warmup=2", "lr_warmup_steps": 2, "weight_decay": 0.0001,
        "weight_decay_on": "all", "clip_global_norm": 5.0, "param_groups": ["*/b:lr_mult=0.5"],
        "label_smoothing": 0.05, "ema_decay": 0.9, "accumulate_steps": 1}
assert r == want, (r, want)
PY
# The recorded recipe again, with --steps on the command line: 10 steps, everything else as recorded.
timeout 180 "$psrun" local --ps 1 --workers 1 -- --model mnist_softmax --recipe "$tmp/d/recipe.json" --steps 10 \
    --model-dir "$tmp/d2" --checkpoint-secs 0 >"$tmp/log2" 2>&1
code=$?
check "psrun local --recipe <model-dir>/recipe.json --steps 10 exits 0 (rc=$code)" test "$code" -eq 0
check "the command line's --steps wins over the file; the rest is the recorded recipe" "$py" - "$tmp/d" "$tmp/d2" <<'PY'
import sys, json
a = json.load(open(sys.argv[1] + "/recipe.json"))["recipe"]
b = json.load(open(sys.argv[2] + "/recipe.json"))["recipe"]
s = json.load(open(sys.argv[2] + "/summary.json"))
assert s["global_step"] == 10 and b["steps"] == 10, (s["global_step"], b)
assert {k: v for k, v in a.items() if k != "steps"} == {k: v for k, v in b.items() if k != "steps"}, (a, b)
assert s["optimizer"] == "momentum" and s["lr_schedule"] == "cosine:steps=20,alpha=0.1,warmup=2", s
PY
timeout 120 "$psrun" export --model-dir "$tmp/d" -o "$tmp/m.onnx" >"$tmp/export" 2>&1
code=$?
check "psrun export exits 0 (rc=$code) and says the recipe is in the metadata" \
    bash -c "test $code -eq 0 && grep -qF 'recipe in metadata psrun.recipe' '$tmp/export'"
check "the ONNX file's psrun.recipe metadata holds recipe.json's recipe" "$py" - "$tmp" <<'PY'
import sys, json
import onnx
t = sys.argv[1]
meta = {p.key: p.value for p in onnx.load(t + "/m.onnx").metadata_props}
print(sorted(meta))
assert "psrun.model" in meta and "psrun.recipe" in meta, sorted(meta)
assert json.loads(meta["psrun.recipe"]) == json.load(open(t + "/d/recipe.json")), meta["psrun.recipe"]
PY
# The exported file trained again with no recipe option: the metadata's recipe is the model's, so the
# run follows the one it came from (psrun model show prints it; --steps on the command line wins).
timeout 60 "$psrun" model show "$tmp/m.onnx" >"$tmp/show" 2>&1
check "psrun model show m.onnx prints the run's recipe (momentum 0.05), not mnist_softmax's sgd" \
    bash -c "grep -qF 'recipe: optimizer momentum, learning_rate 0.05' '$tmp/show'"
timeout 180 "$psrun" local --ps 1 --workers 1 -- --model "$tmp/m.onnx" --steps 5 --model-dir "$tmp/d3" \
    --checkpoint-secs 0 >"$tmp/log3" 2>&1
code=$?
check "psrun local --model m.onnx --steps 5 exits 0 (rc=$code)" test "$code" -eq 0
check "the run from the ONNX file used the recorded recipe (momentum, its schedule, EMA), --steps 5 winning" \
    "$py" - "$tmp/d" "$tmp/d3" <<'PY'
import sys, json
a = json.load(open(sys.argv[1] + "/recipe.json"))["recipe"]
b = json.load(open(sys.argv[2] + "/recipe.json"))["recipe"]
s = json.load(open(sys.argv[2] + "/summary.json"))
print(b)
assert s["global_step"] == 5 and b["steps"] == 5, (s["global_step"], b)
assert {k: v for k, v in a.items() if k != "steps"} == {k: v for k, v in b.items() if k != "steps"}, (a, b)
PY
timeout 60 "$py" - "$tmp" <<'PY'
import sys
import onnx
m = onnx.load(sys.argv[1] + "/m.onnx")
for p in m.metadata_props:
    if p.key == "psrun.recipe":
        p.value = '{"recipe": {"momentum": 2}}'
onnx.save(m, sys.argv[1] + "/damaged.onnx")
PY
timeout 60 "$psrun" model show "$tmp/damaged.onnx" >"$tmp/bad" 2>&1
code=$?
check "a damaged psrun.recipe exits 2 (rc=$code) naming the entry and the field" \
    bash -c "test $code -eq 2 && grep -qF 'metadata psrun.recipe' '$tmp/bad' && grep -qF 'momentum' '$tmp/bad'"
# Bad files: exit 2 naming the file and the field (through psrun local, and standalone).
printf '{"recipe": {"ema_decay": 1.5}}' >"$tmp/bad_ema.json"
timeout 60 "$psrun" local --ps 1 --workers 1 -- --model mnist_softmax --recipe "$tmp/bad_ema.json" --steps 1 >"$tmp/bad" 2>&1
code=$?
check "psrun local with ema_decay 1.5 in the file exits 2 (rc=$code) naming the file and ema_decay" \
    bash -c "test $code -eq 2 && grep -qF -- '--recipe $tmp/bad_ema.json: recipe: field \"ema_decay\"' '$tmp/bad'"
printf '{"lr_schedule": "cosine"}' >"$tmp/bad_schedule.json"
printf '{"param_groups": ["*/b:lr=2"]}' >"$tmp/bad_groups.json"
printf '{"learnig_rate": 0.1}' >"$tmp/bad_name.json"
printf '{"steps": 3,\n "batch_size": }' >"$tmp/bad_syntax.json"
for case in "bad_schedule:field \"lr_schedule\"" "bad_groups:field \"param_groups\"" \
            "bad_name:unknown field \"learnig_rate\" (did you mean \"learning_rate\"" "bad_syntax:JSON syntax error at line 2"; do
    name=${case%%:*}
    want=${case#*:}
    timeout 60 "$workerd" --standalone --model mnist_softmax --recipe "$tmp/$name.json" --steps 1 >"$tmp/bad" 2>&1
    code=$?
    check "standalone --recipe $name.json exits 2 (rc=$code) naming it: $want" \
        bash -c "test $code -eq 2 && grep -qF -- '$name.json' '$tmp/bad' && grep -qF -- '$want' '$tmp/bad'"
done
exit $fail
