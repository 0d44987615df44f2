#!/usr/bin/env bash
# Networks written as ordinary torch.nn modules and exported by torch.onnx.export for training
# (bench/networks.py: the seven of the graph-engine acceptance, ResNet-20, a BatchNorm CNN, a
# MobileNet-style block, an MLP with LayerNorm and GELU, an LSTM over image rows, a Transformer
# encoder, an embedding-bag classifier; bench/more_networks.py: eighteen more, GroupNorm,
# InstanceNorm, PReLU, MobileNetV3, ConvNeXt, ViT, MLP-Mixer, U-Net, 1-D CNNs, a BiLSTM, a GPT, masks,
# a TCN, a soft mixture of experts, a BiLSTM over packed sequences)
# at the opset given: each imports (`psrun model show` exits 0) and trains on real MNIST (images,
# or MNIST turned into token ids) through a real psd (`psrun local --ps 1 --workers 1`) to a test
# accuracy well above chance after a short run. Then the round trip: the trained weights, written
# by `psrun export` (to a bare file name in the working directory), loaded back by name into the
# same torch.nn module, predict what `psrun predict` predicts on 1000 test examples (>= 99.9%
# agreement, probabilities within 1e-4), and the CNNs named `opencv` in the list run in OpenCV's
# dnn module the same way (check_roundtrip.py).
# The figures against PyTorch are benchmarks (docs/benchmarks.md), not this test.
# Usage: networks_test.sh <psrun> [<networks.py> <list> <opset>]
#   list: lines "name steps batch learning-rate minimum-accuracy images|tokens [opencv]";
#   default: bench/networks.py, test/onnx/networks.list, opset 13.
set -u
psrun=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")  # absolute: the export runs in another directory
py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
base=$here/../../bench/networks.py  # MNIST as tokens, the round-trip inputs
networks=${2:-$base}
list=${3:-$here/networks.list}
opset=${4:-13}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()

timeout 300 "$psrun" data fetch --dataset mnist >/dev/null || { echo "FAILED: psrun data fetch"; exit 1; }
mnist=${XDG_CACHE_HOME:-$HOME/.cache}/psrun/data/mnist
names=$(awk '!/^#/ && NF {print $1}' "$list")
timeout 600 "$py" "$networks" export "$tmp" --opset "$opset" $names >"$tmp/export.log" 2>&1
check "$(basename "$networks") exports $(echo $names | wc -w) networks at opset $opset" test $? -eq 0
timeout 120 "$py" "$base" tokens "$mnist" "$tmp/tokens" >/dev/null 2>&1
check "networks.py writes MNIST as token ids" test -s "$tmp/tokens/train-tokens.npy"

"$py" - "$base" "$mnist" "$tmp" <<'PY' || { echo "FAILED: writing the round-trip inputs"; fail=1; }
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location("networks", sys.argv[1])
networks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(networks)
images = networks.read_idx(networks.idx_file(sys.argv[2], "t10k-images-idx3-ubyte"))[:1000]
np.save(sys.argv[3] + "/roundtrip-images.npy", images.reshape(-1, 1, 28, 28))
np.save(sys.argv[3] + "/roundtrip-tokens.npy", np.load(sys.argv[3] + "/tokens/test-tokens.npy")[:1000])
PY

accuracy() { "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' "$1/summary.json" 2>/dev/null; }

# name steps batch learning-rate minimum-accuracy [data options]
while read -r name steps batch lr minimum data consumers; do
    case $name in '#'*|'') continue ;; esac
    timeout 30 "$psrun" model show "$tmp/$name.onnx" >"$tmp/$name.show" 2>&1
    check "$name: model show exits 0" test $? -eq 0
    extra=()
    [ "$data" = tokens ] && extra=(--train-images "$tmp/tokens/train-tokens.npy" --train-labels "$tmp/tokens/train-labels.npy"
                                   --test-images "$tmp/tokens/test-tokens.npy" --test-labels "$tmp/tokens/test-labels.npy")
    timeout 300 "$psrun" local --ps 1 --workers 1 --grace 30 -- --model "$tmp/$name.onnx" --model-dir "$tmp/run-$name" \
        --steps "$steps" --batch-size "$batch" --learning-rate "$lr" --precision f32 --threads 1 --log-every 1000 \
        "${extra[@]}" >"$tmp/$name.log" 2>&1
    rc=$?
    check "$name: trains through psd (rc=$rc)" test "$rc" -eq 0
    [ "$rc" -eq 0 ] || { tail -5 "$tmp/$name.log"; continue; }
    acc=$(accuracy "$tmp/run-$name")
    check "$name: test accuracy ${acc:-?} > $minimum after $steps steps" \
        "$py" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "${acc:-0}" "$minimum"
    (cd "$tmp" && timeout 60 "$psrun" export --model-dir "run-$name" -o "$name.trained.onnx" >/dev/null 2>"$name.export.err")
    check "$name: psrun export to a bare file name" test $? -eq 0 -a -s "$tmp/$name.trained.onnx"
    input=$tmp/roundtrip-images.npy
    [ "$data" = tokens ] && input=$tmp/roundtrip-tokens.npy
    timeout 120 "$psrun" predict --model-dir "$tmp/run-$name" --images "$input" --output "$tmp/$name.psrun.npy" \
        >/dev/null 2>"$tmp/$name.predict.err"
    check "$name: psrun predict writes probabilities" test $? -eq 0 -a -s "$tmp/$name.psrun.npy"
    opencv=()
    [ "${consumers:-}" = opencv ] && opencv=(opencv)
    timeout 120 "$py" "$here/check_roundtrip.py" "$networks" "$name" "$tmp/$name.trained.onnx" "$input" \
        "$tmp/$name.psrun.npy" "${opencv[@]}" || fail=1
done <"$list"

exit $fail
