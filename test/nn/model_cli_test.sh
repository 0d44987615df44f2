#!/usr/bin/env bash
# psrun model list/show/check and psrun doctor end to end: the built-ins are listed, mnist_deep's
# table and JSON have the right totals, bad files and unknown names exit 2 with the message;
# model check passes the zoo's networks and refuses bad batches with exit 2; doctor names the
# build's ISA and, capped to AVX2, the AVX2 paths of oneDNN and the hand kernels.
# Usage: model_cli_test.sh <psrun>
set -u
psrun=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()

timeout 30 "$psrun" model list >"$tmp/list" 2>&1
rc=$?
check "model list exits 0 (rc=$rc)" test "$rc" -eq 0
for name in mnist_deep mnist_softmax dls_mlp mnist_cnn512 mnist_low_level lenet5 cifar_vgg_small resnet20 transformer_rows; do
    check "model list names $name" grep -q "^$name " "$tmp/list"
done

timeout 30 "$psrun" model show mnist_deep >"$tmp/show" 2>&1
rc=$?
check "model show mnist_deep exits 0 (rc=$rc)" test "$rc" -eq 0
check "... totals 3,274,634 parameters, 13,098,536 bytes" \
    grep -q "^total: 3,274,634 parameters, 13,098,536 bytes as f32" "$tmp/show"
check "... pool2 row is 64x7x7" grep -Eq "^ +5  pool2 +max_pool +64x7x7 " "$tmp/show"
check "... the recipe" grep -q "^recipe: optimizer adam, learning_rate 0.0001, batch_size 50, steps 20000" "$tmp/show"
# The engine's training memory (workerd/nn/buffer_plan.h), planned and one buffer each.
check "... the training memory at batch 128" grep -Eq \
    "^training memory \(activations, their gradients, temporaries; batch 128, f32\): planned [0-9.]+ [KMG]B = [0-9.]+ [KM]?B per example; one buffer each [0-9.]+ [KMG]B" \
    "$tmp/show"
timeout 30 "$psrun" model show mnist_deep --batch-size 0 >"$tmp/out" 2>&1
rc=$?
check "model show --batch-size 0 exits 2 (rc=$rc)" test "$rc" -eq 2

timeout 30 "$psrun" model show --json models/dls_mlp.json >"$tmp/json" 2>&1
rc=$?
check "model show --json FILE exits 0 (rc=$rc)" test "$rc" -eq 0
python3 - "$tmp/json" <<'PY' || fail=1
import json, sys
s = json.load(open(sys.argv[1]))
assert s["total"]["parameters"] == 784 * 100 + 100 + 100 * 10 + 10, s["total"]
assert s["loss"]["reduction"] == "sum" and s["recipe"]["optimizer"] == "adagrad"
assert [l["name"] for l in s["layers"]] == ["fc1", "relu1", "fc2"]
assert len(s["architecture_sha256"]) == 64
m = s["training_memory"]
assert m["batch"] == 128 and m["planned"] and 0 < m["planned_bytes"] <= m["unplanned_bytes"], m
print("ok: --json fields")
PY

printf '{"input": {"channels": 1, "height": 1, "width": 1}, "classes": 10,\n "layers": [{"kind": "max_pool", "window": 2}, {"kind": "dense", "units": 10}]}\n' >"$tmp/bad.json"
timeout 30 "$psrun" model show "$tmp/bad.json" >"$tmp/out" 2>&1
rc=$?
check "a bad file exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming layer and problem" grep -q "layer 0 (max_pool): window 2x2 stride 2 on a 1x1 input" "$tmp/out"
printf '{"layers": [\n' >"$tmp/syntax.json"
timeout 30 "$psrun" model show "$tmp/syntax.json" >"$tmp/out" 2>&1
rc=$?
check "a JSON syntax error exits 2 (rc=$rc)" test "$rc" -eq 2
check "... with line and column" grep -q "JSON syntax error at line 2, column 1" "$tmp/out"
timeout 30 "$psrun" model show mnist_dep >"$tmp/out" 2>&1
rc=$?
check "an unknown name exits 2 (rc=$rc)" test "$rc" -eq 2
check "... suggesting mnist_deep" grep -q 'did you mean "mnist_deep"' "$tmp/out"
# The whole-network gradient check on built-in networks (random batch), and its refusals.
for name in lenet5 resnet20 transformer_rows; do
    timeout 120 "$psrun" model check "$name" --batch 4 --json >"$tmp/check-$name" 2>&1
    rc=$?
    check "model check $name exits 0 (rc=$rc)" test "$rc" -eq 0
    python3 - "$tmp/check-$name" <<'PY' || fail=1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] and r["tensors"], r
worst = max(t["relative_error"] for t in r["tensors"])
assert worst <= r["tolerance"], worst
print(f"ok: {r['model']}: {len(r['tensors'])} tensors, worst relative error {worst:.1e}")
PY
done
# --gradients: every trainable tensor by name, its f32 gradient (and bf16's where the CPU has
# bf16, unless --no-bf16), the outputs and --input-gradients' dL/d(input), as float32 text.
for extra in "" --no-bf16; do
    timeout 120 "$psrun" model check lenet5 --batch 3 --no-finite-differences --input-gradients $extra \
        --gradients "$tmp/grads$extra.json" >"$tmp/out" 2>&1
    rc=$?
    check "model check --gradients $extra exits 0 (rc=$rc)" test "$rc" -eq 0
    python3 - "$tmp/grads$extra.json" "$extra" <<'PY' || fail=1
import json, sys
g = json.load(open(sys.argv[1]))
assert set(g) == {"loss", "outputs", "tensors", "inputs"}, sorted(g)
assert len(g["outputs"]) == 3 * 10 and len(g["inputs"]["input"]["gradient"]) == 3 * 28 * 28, g["inputs"].keys()
bf16 = open("/proc/cpuinfo").read().count("avx512_bf16") > 0 and sys.argv[2] != "--no-bf16"
for name, t in g["tensors"].items():
    n = 1
    for d in t["shape"]:
        n *= d
    assert len(t["gradient"]) == n and all(isinstance(v, float) for v in t["gradient"]), name
    assert ("bf16_gradient" in t) == bf16, (name, sorted(t))
print(f"ok: --gradients {sys.argv[2] or '(bf16 where the CPU has it)'}: {len(g['tensors'])} tensors, bf16 {bf16}")
PY
done
/usr/bin/python3 -c 'import numpy as np; np.save("'"$tmp"'/x.npy", np.zeros((3, 5), np.float32))'
timeout 30 "$psrun" model check mnist_deep --input "$tmp/x.npy" >"$tmp/out" 2>&1
rc=$?
check "model check with a batch of the wrong shape exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the model's input" grep -q "its rows are not examples of the model's input" "$tmp/out"
timeout 30 "$psrun" model check mnist_deep --batch 0 >"$tmp/out" 2>&1
check "model check --batch 0 exits 2" test $? -eq 2

timeout 30 "$psrun" doctor >"$tmp/doctor" 2>&1
rc=$?
check "doctor exits 0 on the build host (rc=$rc)" test "$rc" -eq 0
check "... names the build's ISA" grep -Eq "^binary built for +(x86-64-v3|native|[a-z0-9-]+)" "$tmp/doctor"
check "... and oneDNN's" grep -Eq "^oneDNN runs +(AVX2|AVX-512)" "$tmp/doctor"
check "... and the hand kernels' blocks" grep -Eq "^hand-written kernels +(AVX-512|AVX2 \+ FMA)" "$tmp/doctor"
# Capped to AVX2 (as an AVX2 node runs): oneDNN and the hand kernels both on their AVX2 paths.
ONEDNN_MAX_CPU_ISA=AVX2 timeout 30 "$psrun" doctor >"$tmp/doctor2" 2>&1
check "doctor under ONEDNN_MAX_CPU_ISA=AVX2: oneDNN on AVX2" grep -Eq "^oneDNN runs +AVX2 " "$tmp/doctor2"
check "... the hand kernels on 8-channel AVX2 blocks" grep -Eq "^hand-written kernels +AVX2 \+ FMA \(8-channel" "$tmp/doctor2"
exit $fail
