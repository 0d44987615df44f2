#!/usr/bin/env bash
# workerd --standalone on data given as files (docs/data.md): trains a few steps from .npy files
# made out of the real MNIST by NumPy, and refuses mismatched files with exit 2 and a message
# naming the file. Needs MNIST (fetched here) and python3-numpy (jobs/setup.sh).
# Usage: workerd_data_cli_test.sh <workerd> <psrun>
set -u
workerd=$1
psrun=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()

timeout 300 "$psrun" data fetch >/dev/null || { echo "FAILED: data fetch"; exit 1; }
mnist=${XDG_CACHE_HOME:-$HOME/.cache}/psrun/data/mnist

# The IDX files as a user's NumPy arrays: train images N x 28 x 28 x 1 uint8 (NHWC), int64 labels;
# test images float32 N x 1 x 28 x 28 already in [0, 1], int32 labels. Plus mismatched files.
/usr/bin/python3 - "$mnist" "$tmp" <<'PY' || { echo "FAILED: converting MNIST with NumPy"; exit 1; }
import numpy as np, sys
src, out = sys.argv[1], sys.argv[2]
def idx(name, offset):
    return np.frombuffer(open(f"{src}/{name}", "rb").read(), dtype=np.uint8, offset=offset)
x_train = idx("train-images-idx3-ubyte", 16).reshape(-1, 28, 28, 1)
y_train = idx("train-labels-idx1-ubyte", 8).astype(np.int64)
x_test = idx("t10k-images-idx3-ubyte", 16).reshape(-1, 1, 28, 28).astype(np.float32) / 255
y_test = idx("t10k-labels-idx1-ubyte", 8).astype(np.int32)
np.save(f"{out}/x_train.npy", x_train)
np.save(f"{out}/y_train.npy", y_train)
np.save(f"{out}/x_test.npy", x_test)
np.save(f"{out}/y_test.npy", y_test)
np.save(f"{out}/y_short.npy", y_train[:-1])
np.save(f"{out}/x_rgb.npy", np.zeros((10000, 32, 32, 3), dtype=np.uint8))
np.save(f"{out}/y_eleven.npy", np.where(np.arange(10000) == 5, 11, y_test))
# Two CIFAR-10 records: label byte, then 3 x 32 x 32 pixel bytes.
open(f"{out}/cifar.bin", "wb").write(bytes([3] + [7] * 3072 + [9] + [1] * 3072))
PY

timeout 120 "$workerd" --standalone --steps 20 --batch-size 20 --threads 2 --learning-rate 1e-3 \
    --train-images "$tmp/x_train.npy" --train-labels "$tmp/y_train.npy" \
    --test-images "$tmp/x_test.npy" --test-labels "$tmp/y_test.npy" \
    --normalize 0.1307,0.3081 --model-dir "$tmp/model" >"$tmp/out" 2>&1
rc=$?
check "training from .npy files exits 0 (rc=$rc)" test "$rc" -eq 0
check "... on 60000 train / 10000 test images" grep -q "files (60000 train / 10000 test images)" "$tmp/out"
python3 - "$tmp/model/summary.json" <<'PY' || fail=1
import json, sys
s = json.load(open(sys.argv[1]))
assert s["global_step"] == 20 and s["dataset"] == "files", s
assert 0.0 <= s["test_accuracy"] <= 1.0 and s["final_loss"] > 0
print("ok: summary.json", {k: s[k] for k in ("global_step", "test_accuracy", "dataset")})
PY

refuse() {  # refuse <description> <expected message> <workerd data options...>
    local what=$1 message=$2; shift 2
    timeout 60 "$workerd" --standalone --steps 1 --threads 2 "$@" >"$tmp/out" 2>&1
    local code=$?
    check "$what exits 2 (rc=$code)" test "$code" -eq 2
    check "... saying: $message" grep -qF -- "$message" "$tmp/out"
}
refuse "one label short" "train labels $tmp/y_short.npy: holds 59999 labels but train images $tmp/x_train.npy holds 60000 images" \
    --train-images "$tmp/x_train.npy" --train-labels "$tmp/y_short.npy" \
    --test-images "$tmp/x_test.npy" --test-labels "$tmp/y_test.npy"
refuse "3x32x32 images" "test images $tmp/x_rgb.npy: 3x32x32 per example, the model mnist_deep takes 1x28x28" \
    --train-images "$tmp/x_train.npy" --train-labels "$tmp/y_train.npy" \
    --test-images "$tmp/x_rgb.npy" --test-labels "$tmp/y_test.npy"
refuse "label 11" "test labels $tmp/y_eleven.npy: label 11 at index 5 is out of range 0-9" \
    --train-images "$tmp/x_train.npy" --train-labels "$tmp/y_train.npy" \
    --test-images "$tmp/x_test.npy" --test-labels "$tmp/y_eleven.npy"
refuse "labels given as images" "$tmp/y_test.npy: dtype '<i4' is not supported for images" \
    --train-images "$tmp/x_train.npy" --train-labels "$tmp/y_train.npy" \
    --test-images "$tmp/y_test.npy" --test-labels "$tmp/y_test.npy"
refuse "a missing file" "$tmp/none.npy: cannot open" \
    --train-images "$tmp/none.npy" --train-labels "$tmp/y_train.npy" \
    --test-images "$tmp/x_test.npy" --test-labels "$tmp/y_test.npy"
refuse "--train-images without --test-images" "give both --train-images and --test-images" \
    --train-images "$tmp/x_train.npy" --train-labels "$tmp/y_train.npy"
refuse "CIFAR-10 batches (3x32x32)" "train images cifar10:$tmp/cifar.bin: 3x32x32 per example, the model mnist_deep takes 1x28x28" \
    --train-images "cifar10:$tmp/cifar.bin" --test-images "cifar10:$tmp/cifar.bin"
refuse "a bad --image-layout" "--image-layout 'hwc'" --image-layout hwc
refuse "a bad --normalize" "--normalize '0.5'" --normalize 0.5
exit $fail
