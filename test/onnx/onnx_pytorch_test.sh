#!/usr/bin/env bash
# ONNX end to end with the real binaries on real MNIST (docs/models.md "Exporting", "Importing
# from PyTorch"):
#  1. every built-in model's export, and that of models/odd_shapes.json (what the zoo does not
#     use: no bias, strided asymmetric same padding, padded avg_pool, sigmoid), passes
#     onnx.checker (full_check) and OpenCV computes the engine's probabilities from it
#     (export_zoo + check_zoo_exports.py); transformer_rows, which OpenCV 4.6 cannot parse, is
#     checked by loading its exported weights into PyTorch's nn.TransformerEncoder instead;
#  2. an MLP, LeNet-5 and mnist_deep defined in PyTorch (pytorch_models.py) import (model show),
#     train briefly through a real psd (psrun local --ps 1 --workers 1), and `psrun export` of
#     each run passes onnx.checker and OpenCV's accuracy on the 10,000 test images matches the
#     run's own final test accuracy within 0.05 points; the MLP reaches > 90% in 300 steps;
#  2b. zoo models (mnist_softmax, lenet5, mnist_deep) trained briefly and exported: OpenCV's arg-max
#     equals `psrun predict`'s on >= 99.9% of the test images and its accuracy equals `psrun eval`'s
#     within 0.05 points;
#  3. training starts from PyTorch's weights, or from fresh ones with --init description;
#  4. refusals exit 2 naming the node (make_refusals.py), a damaged checkpoint is not exported.
# Usage: onnx_pytorch_test.sh <psrun> <export_zoo>
set -u
psrun=$1
export_zoo=$2
py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()

timeout 300 "$psrun" data fetch --dataset mnist >/dev/null || { echo "FAILED: psrun data fetch"; exit 1; }
mnist=${XDG_CACHE_HOME:-$HOME/.cache}/psrun/data/mnist

# 1. The zoo.
mkdir "$tmp/zoo"
timeout 300 "$export_zoo" "$tmp/zoo" "$here/models/odd_shapes.json" >"$tmp/zoo/names" 2>&1
check "export_zoo exits 0" test $? -eq 0
timeout 120 "$py" "$here/check_zoo_exports.py" "$tmp/zoo" $(cat "$tmp/zoo/names")
check "every built-in model's export (and odd_shapes.json's): onnx.checker and OpenCV = engine" test $? -eq 0

# 2. PyTorch models: import, train through psd, export, check.
mkdir "$tmp/pt"
timeout 180 "$py" "$here/pytorch_models.py" "$tmp/pt" >/dev/null 2>"$tmp/pt/export.log"
check "pytorch_models.py exports mlp, lenet5, mnist_deep" test -s "$tmp/pt/mnist_deep.onnx"
timeout 30 "$psrun" model show "$tmp/pt/mnist_deep.onnx" >"$tmp/show" 2>&1
check "model show mnist_deep.onnx exits 0" test $? -eq 0
check "... its table has mnist_deep's 3,274,634 parameters" grep -q "^total: 3,274,634 parameters" "$tmp/show"
check "... and the dropout PyTorch's training-mode export keeps" grep -Eq "^ +[0-9]+  [^ ]*Dropout +dropout +1024 " "$tmp/show"

train() {  # train <name> <steps> <batch> [extra workerd options...]
    local name=$1 steps=$2 batch=$3; shift 3
    timeout 300 "$psrun" local --ps 1 --workers 1 --grace 30 -- --model "$tmp/pt/$name.onnx" \
        --model-dir "$tmp/run-$name" --steps "$steps" --batch-size "$batch" --learning-rate 1e-3 \
        --precision f32 --threads 1 --log-every 1000 "$@" >"$tmp/$name.log" 2>&1
}
accuracy() { "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' "$1/summary.json"; }

for spec in "mlp 300 100" "lenet5 200 100" "mnist_deep 60 50"; do
    set -- $spec
    train "$1" "$2" "$3"
    rc=$?
    check "$1: psrun local trains the imported model through psd (rc=$rc)" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || { tail -20 "$tmp/$1.log"; continue; }
    timeout 120 "$psrun" export --model-dir "$tmp/run-$1" >"$tmp/$1.export" 2>&1
    check "$1: psrun export exits 0" test $? -eq 0
    check "$1: ... writes model-$2.onnx" test -s "$tmp/run-$1/model-$2.onnx"
    timeout 180 "$py" "$here/check_export.py" "$tmp/run-$1/model-$2.onnx" "$tmp/run-$1/summary.json" "$mnist"
    check "$1: onnx.checker and OpenCV's accuracy = psrun's within 0.05 points" test $? -eq 0
done

# 2b. Zoo models (mnist_softmax, lenet5, mnist_deep): train briefly, export, and OpenCV against psrun's own
# predict (arg-max on >= 99.9% of the 10,000 test images) and eval (accuracy within 0.05 points).
for spec in "mnist_softmax 200 100" "lenet5 150 64" "mnist_deep 60 50"; do
    set -- $spec
    run="$tmp/zoo-$1"
    timeout 300 "$psrun" local --ps 1 --workers 1 --grace 30 -- --model "$1" --model-dir "$run" --steps "$2" \
        --batch-size "$3" --learning-rate 1e-3 --optimizer adam --precision f32 --threads 1 --log-every 1000 \
        >"$tmp/zoo-$1.log" 2>&1
    rc=$?
    check "zoo $1: psrun local trains it (rc=$rc)" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || { tail -20 "$tmp/zoo-$1.log"; continue; }
    timeout 120 "$psrun" export --model-dir "$run" >"$tmp/zoo-$1.export" 2>&1
    check "zoo $1: psrun export exits 0" test $? -eq 0
    timeout 120 "$psrun" predict --model-dir "$run" --images "$mnist/t10k-images-idx3-ubyte" \
        --output "$run/predict.npy" >"$tmp/zoo-$1.predict" 2>&1
    check "zoo $1: psrun predict --output exits 0" test $? -eq 0
    timeout 120 "$psrun" eval --model-dir "$run" >"$tmp/zoo-$1.eval" 2>&1
    check "zoo $1: psrun eval exits 0" test $? -eq 0
    timeout 180 "$py" "$here/check_export.py" "$run/model-$2.onnx" "$run/summary.json" "$mnist" \
        "$run/predict.npy" "$run/eval.json"
    check "zoo $1: OpenCV on the export = psrun predict (>= 99.9%) and eval (within 0.05 points)" test $? -eq 0
done
check "mlp: > 90% after 300 steps ($(accuracy "$tmp/run-mlp"))" \
    "$py" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0.90 else 1)' "$(accuracy "$tmp/run-mlp")"

# 3. Initial weights: PyTorch's (default), or drawn from the description (--init description).
# One SGD step at a learning rate too small to move an f32 weight leaves the initial values.
for init in model description; do
    rm -rf "$tmp/run-mlp"
    train mlp 1 10 --optimizer sgd --learning-rate 1e-12 --init "$init"
    check "--init $init: a one-step run exits 0" test $? -eq 0
    timeout 60 "$psrun" export --model-dir "$tmp/run-mlp" -o "$tmp/init-$init.onnx" >/dev/null 2>&1
    check "--init $init: ... exports" test $? -eq 0
done
"$py" - "$tmp/pt/mlp.onnx" "$tmp/init-model.onnx" "$tmp/init-description.onnx" <<'PY' || fail=1
import sys
import numpy as np
import onnx
from onnx import numpy_helper
def weights(path):
    return [numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer]
torch_w, kept, fresh = (weights(p) for p in sys.argv[1:])
assert [w.shape for w in torch_w] == [w.shape for w in kept] == [w.shape for w in fresh]
worst = max(float(np.abs(a - b).max()) for a, b in zip(torch_w, kept))
assert worst < 1e-6, f"--init model: the trained weights moved {worst} from PyTorch's"
moved = float(np.abs(torch_w[0] - fresh[0]).max())
assert moved > 1e-2, f"--init description: still PyTorch's first weights ({moved})"
print(f"ok: training starts from PyTorch's weights (max diff {worst:.1e}); --init description draws others")
PY

# 4. Refusals.
mkdir "$tmp/bad"
"$py" "$here/make_refusals.py" "$tmp/bad"
while IFS=$'\t' read -r file expected; do
    timeout 30 "$psrun" model show "$tmp/bad/$file" >/dev/null 2>"$tmp/err"
    rc=$?
    if [ -z "$expected" ]; then
        check "model show $file (the unbroken graph) exits 0 (rc=$rc)" test "$rc" -eq 0
    else
        check "model show $file exits 2 (rc=$rc)" test "$rc" -eq 2
        check "... naming it: $expected" grep -qF "$expected" "$tmp/err"
    fi
done <"$tmp/bad/expected.tsv"
timeout 120 "$psrun" local --ps 1 --workers 1 --grace 30 -- --model "$tmp/bad/storage_order.onnx" \
    --model-dir "$tmp/run-bad" --steps 10 >"$tmp/bad.log" 2>&1
rc=$?
check "training a refused graph exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the node" grep -qF "node 'pool' (MaxPool): storage_order 1 (column major) is not supported" "$tmp/bad.log"

# A damaged checkpoint is refused, as a restore refuses it; so is a step that is not there.
ckpt=$(ls -d "$tmp"/run-mlp/ckpt-* | tail -1)
tensors=$(ls "$ckpt"/*.tensors | head -1)
"$py" -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[len(b)//2]^=0xff; open(p,"wb").write(b)' "$tensors"
timeout 60 "$psrun" export --model-dir "$tmp/run-mlp" -o "$tmp/damaged.onnx" >/dev/null 2>"$tmp/err"
rc=$?
check "export of a damaged checkpoint exits 2 (rc=$rc)" test "$rc" -eq 2
check "... saying it is damaged" grep -q "is damaged" "$tmp/err"
check "... and writing nothing" test ! -e "$tmp/damaged.onnx"
timeout 60 "$psrun" export --model-dir "$tmp/run-mlp" --checkpoint 12345 >/dev/null 2>"$tmp/err"
rc=$?
check "export --checkpoint of a missing step exits 2 (rc=$rc)" test "$rc" -eq 2
check "... listing the steps" grep -q "no such checkpoint" "$tmp/err"

exit $fail
