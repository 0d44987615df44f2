#!/usr/bin/env bash
# workerd and psrun on data as users keep it (docs/data.md): 500 Fashion-MNIST images per split
# written out by bench/idx_to_formats.py as a PNG image folder (class folders 0_tshirt ...),
# gzip TFRecord files of JPEG Examples, a CSV table and an .npz archive; workerd --standalone
# trains a few mnist_softmax steps from each; a short psrun local run into a model dir lets
# psrun predict print class names for a JPEG of another size and a PNG, and psrun eval
# --test-dir name the classes; every mismatch exits 2 naming the file (and record or line).
# Then regression and multi-label models on CSV tables through psd, and their evaluation figures.
# Needs Fashion-MNIST (psrun data fetch, Debian's dataset-fashion-mnist) and python3-numpy,
# python3-opencv (jobs/setup.sh).
# Usage: workerd_formats_cli_test.sh <workerd> <psrun>
set -u
workerd=$1
psrun=$2
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()

timeout 300 "$psrun" data fetch --dataset fashion-mnist --data-dir "$tmp/idx" >/dev/null ||
    { echo "FAILED: data fetch --dataset fashion-mnist"; exit 1; }
names=tshirt,trouser,pullover,dress,coat,sandal,shirt,sneaker,bag,boot
for f in folder-png tfrecord-jpeg csv npz; do
    extra=()
    [ "$f" = tfrecord-jpeg ] && extra=(--gzip --shards 3)
    "$py" bench/idx_to_formats.py "$tmp/idx" "$tmp/$f" "$f" --limit 500 --names "$names" "${extra[@]}" 2>/dev/null ||
        { echo "FAILED: writing $f"; exit 1; }
done

train() {  # train <name> <workerd data options...>: 30 mnist_softmax steps into $tmp/<name>
    local name=$1; shift
    timeout 120 "$workerd" --standalone --model mnist_softmax --steps 30 --batch-size 50 --threads 2 \
        --model-dir "$tmp/$name" "$@" >"$tmp/$name.log" 2>&1
}
summary() {  # summary <name> <python condition on s>
    "$py" -c "import json, sys; s = json.load(open('$tmp/$1/summary.json')); assert $2, s" 2>"$tmp/summary.err"
}
train folder --train-dir "$tmp/folder-png/train" --test-dir "$tmp/folder-png/test"
check "an image folder trains (rc=$?)" summary folder "s['global_step'] == 30 and s['test_accuracy'] > 0.3 and 'data_wait_percent' in s and 'data_handling_percent' in s"
check "... its classes recorded in classes.json" grep -q '"3_dress"' "$tmp/folder/classes.json"
check "... decoded into memory" grep -q "image folder $tmp/folder-png/train: 10 classes, 500 images, decoded into memory" "$tmp/folder.log"
train tfr --train-data "$tmp/tfrecord-jpeg/train-*" --test-data "$tmp/tfrecord-jpeg/test-00000-of-00001.tfrecord.gz"
check "gzip TFRecord files of JPEG Examples stream (rc=$?)" summary tfr "s['global_step'] == 30 and s['test_accuracy'] > 0.3"
check "... streamed" grep -q "3 TFRecord files (.*), streamed" "$tmp/tfr.log"
train csv --train-data "$tmp/csv/train.csv" --test-data "$tmp/csv/test.csv"
check "a CSV table of pixel columns trains (rc=$?)" summary csv "s['global_step'] == 30 and s['test_accuracy'] > 0.3"
train npz --train-data "$tmp/npz/train.npz" --test-data "$tmp/npz/test.npz"
check "an .npz archive trains (rc=$?)" summary npz "s['global_step'] == 30 and s['test_accuracy'] > 0.3"
train split --train-dir "$tmp/folder-png/train" --validation-split 0.2 --stream on
odd=$(printf 'caf\xe9')  # a Latin-1 directory name: not UTF-8
mkdir -p "$tmp/$odd" && cp "$tmp"/tfrecord-jpeg/* "$tmp/$odd/"
train odd --train-data "$tmp/$odd/train-*" --test-data "$tmp/$odd/test-00000-of-00001.tfrecord.gz"
check "data under a path that is not UTF-8 trains and writes summary.json (rc=$?)" summary odd "s['global_step'] == 30"
check "a folder with --validation-split, streamed (rc=$?)" summary split "s['global_step'] == 30"

# A model dir with a checkpoint: predict prints class names, eval names the classes.
timeout 240 "$psrun" local --ps 1 --workers 1 --grace 20 -- --model mnist_softmax --model-dir "$tmp/model" \
    --steps 100 --log-every 50 --threads 1 --train-dir "$tmp/folder-png/train" --test-dir "$tmp/folder-png/test" \
    >"$tmp/local.log" 2>&1
check "psrun local from an image folder (rc=$?)" test -f "$tmp/model/classes.json"
check "... its summary gives the time to its best accuracy, not MNIST's 99%" grep -q "time to the best test accuracy" "$tmp/local.log"
check "... summary.json's dataset is files" grep -q '"dataset": *"files"' "$tmp/model/summary.json"
"$py" - "$tmp" <<'PY'
import cv2, sys
t = sys.argv[1]
img = cv2.imread(t + "/folder-png/test/1_trouser/00002.png", cv2.IMREAD_GRAYSCALE)
cv2.imwrite(t + "/a.jpg", cv2.resize(cv2.cvtColor(img, cv2.COLOR_GRAY2BGR), (56, 70)), [cv2.IMWRITE_JPEG_QUALITY, 95])
cv2.imwrite(t + "/b.png", img)
PY
timeout 120 "$psrun" predict --model-dir "$tmp/model" --images "$tmp/a.jpg" "$tmp/b.png" >"$tmp/predict.out" 2>"$tmp/predict.err"
check "predict on a JPEG of 56x70 and a PNG (rc=$?)" test "$(wc -l <"$tmp/predict.out")" -eq 2
check "... prints class names" grep -qE "^$tmp/b.png 1 [0-9.]+ 1_trouser$" "$tmp/predict.out"
check "... the JPEG fitted by crop" grep -q "a.jpg: 56x70 pixels fitted to 28x28 (--image-resize crop)" "$tmp/predict.err"
timeout 120 "$psrun" eval --model-dir "$tmp/model" --test-dir "$tmp/folder-png/test" -o "$tmp/eval" >"$tmp/eval.out" 2>&1
check "eval --test-dir (rc=$?) names the classes" grep -qE "^ +9 .* 9_boot$" "$tmp/eval.out"

refuse() {  # refuse <description> <expected message> <workerd data options...>
    local what=$1 message=$2; shift 2
    timeout 60 "$workerd" --standalone --model mnist_softmax --steps 3 --threads 2 "$@" >"$tmp/out" 2>&1
    local code=$?
    check "$what exits 2 (rc=$code)" test "$code" -eq 2
    check "... saying: $message" grep -qF -- "$message" "$tmp/out"
}
# A flipped byte in the data of record 7 of an uncompressed TFRecord file.
"$py" bench/idx_to_formats.py "$tmp/idx" "$tmp/plain" tfrecord-png --limit 40 --shards 1 2>/dev/null
"$py" - "$tmp/plain/train-00000-of-00001.tfrecord" >"$tmp/offset" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
pos = 0
for _ in range(7):
    pos += 16 + struct.unpack("<Q", data[pos:pos + 8])[0]
data[pos + 40] ^= 0xFF
open(sys.argv[1], "wb").write(bytes(data))
print(pos)
PY
refuse "a corrupt TFRecord record" "$tmp/plain/train-00000-of-00001.tfrecord: record 7 at offset $(cat "$tmp/offset"): the CRC of its" \
    --train-data "$tmp/plain/train-00000-of-00001.tfrecord" --test-data "$tmp/plain/test-00000-of-00001.tfrecord" --batch-size 10
train skip --train-data "$tmp/plain/train-00000-of-00001.tfrecord" --test-data "$tmp/plain/test-00000-of-00001.tfrecord" \
    --corrupt-records skip --batch-size 10
check "--corrupt-records skip trains and counts it (rc=$?)" summary skip "s['skipped_records'] >= 1"
refuse "a missing Example key" "has no feature 'pixels' (it has: 'image/encoded' (bytes_list), 'image/class/label' (int64_list)); give --inputs" \
    --train-data "$tmp/plain/test-00000-of-00001.tfrecord" --test-data "$tmp/plain/test-00000-of-00001.tfrecord" --inputs pixels
mkdir -p "$tmp/other/only"
cp "$tmp/b.png" "$tmp/other/only/x.png"
refuse "a test folder of other classes" "$tmp/other: its classes (only) are not those of the training folder" \
    --train-dir "$tmp/folder-png/train" --test-dir "$tmp/other"
cp -r "$tmp/folder-png/test" "$tmp/broken"
echo "not an image" >"$tmp/broken/2_pullover/00000.png"
refuse "a file that is not an image" "$tmp/broken/2_pullover/00000.png: not a JPEG, PNG or PGM image" \
    --train-dir "$tmp/folder-png/train" --test-dir "$tmp/broken"
awk -F, -v OFS=, 'NR == 3 { $3 = "x" } 1' "$tmp/csv/test.csv" >"$tmp/bad.csv"
refuse "a CSV cell that is not a number" "$tmp/bad.csv: line 3, column 'p1': 'x' is not a number" \
    --train-data "$tmp/csv/train.csv" --test-data "$tmp/bad.csv"
refuse "a bad --stream" "--stream 'sometimes': expected auto, on or off" --train-dir "$tmp/folder-png/train" \
    --validation-split 0.1 --stream sometimes
refuse "--train-data with --train-images" "exclude --data-dir and --train-images" --train-dir "$tmp/folder-png/train" \
    --validation-split 0.1 --train-images "$tmp/x.npy"
# Regression (MSE) and multi-label (sigmoid cross-entropy) models on CSV tables through psd: the
# evaluation reports MSE/MAE or exact match and F1 per label (workerd/eval_metrics.h), and psrun
# eval reports the same figures from the checkpoint.
"$py" - "$tmp/tables" <<'PY' || { echo "FAILED: writing the regression tables"; fail=1; }
import os, sys
import numpy as np
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(1)
for split, n in (("train", 2000), ("test", 500)):
    x = rng.uniform(-1, 1, size=(n, 4))
    y = np.stack([x[:, 0] + x[:, 1] - x[:, 2], 2 * x[:, 3]], axis=1)            # regression targets
    labels = np.stack([x[:, 0] > 0, x[:, 1] + x[:, 2] > 0, x[:, 3] > 0.5], axis=1)  # multi-hot
    with open(f"{out}/{split}.csv", "w") as f:
        f.write("a,b,c,d,y1,y2,l1,l2,l3\n")
        for row in np.concatenate([x, y, labels.astype(float)], axis=1):
            f.write(",".join(f"{v:.5f}" for v in row) + "\n")
PY
for kind in mean_squared_error:2:y1,y2 sigmoid_cross_entropy:3:l1,l2,l3; do
    IFS=: read -r loss width targets <<<"$kind"
    cat >"$tmp/tables/$loss.json" <<JSON
{"format": 1, "name": "tiny_$loss", "input": {"shape": [4], "type": "float"}, "targets": $width,
 "layers": [{"kind": "dense", "name": "fc1", "units": 16}, {"kind": "relu"}, {"kind": "dense", "name": "fc2", "units": $width}],
 "loss": {"kind": "$loss", "reduction": "mean"}}
JSON
    timeout 120 "$psrun" local --ps 1 --workers 1 --grace 20 -- --model "$tmp/tables/$loss.json" \
        --train-data "$tmp/tables/train.csv" --test-data "$tmp/tables/test.csv" --inputs a,b,c,d --targets "$targets" \
        --steps 300 --batch-size 32 --optimizer adam --learning-rate 0.01 --threads 1 --eval-every 100 \
        --log-every 100 --model-dir "$tmp/$loss" >"$tmp/$loss.log" 2>&1
    check "$loss: trains through psd (rc=$?)" grep -q "done: global step 300" "$tmp/$loss.log"
    timeout 60 "$psrun" eval --model-dir "$tmp/$loss" --test-data "$tmp/tables/test.csv" --inputs a,b,c,d \
        --targets "$targets" -o "$tmp/$loss-eval" >"$tmp/$loss.eval" 2>&1
    check "$loss: psrun eval (rc=$?)" test -s "$tmp/$loss-eval/eval.json"
done
check "regression: the log reports test MSE and MAE" grep -q "final test MSE [0-9.e-]*, MAE" "$tmp/mean_squared_error.log"
check "regression: summary.json's test MSE is small (planted linear targets)" \
    summary mean_squared_error "0 <= s['test_mse'] < 0.05 and 0 <= s['test_mae'] < 0.2"
check "regression: psrun eval gives the run's MSE" "$py" -c "import json, sys
e = json.load(open('$tmp/mean_squared_error-eval/eval.json')); s = json.load(open('$tmp/mean_squared_error/summary.json'))
sys.exit(0 if abs(e['test_mse'] - s['test_mse']) < 1e-6 and e['examples'] == 500 else 1)"
check "multi-label: the log reports exact match and mean F1" grep -q "final test exact match [0-9.]*%, mean F1" \
    "$tmp/sigmoid_cross_entropy.log"
check "multi-label: F1 per label well above chance" \
    summary sigmoid_cross_entropy "len(s['test_f1']) == 3 and min(s['test_f1']) > 0.7 and s['test_accuracy'] > 0.5"
check "multi-label: psrun eval prints F1 per label" grep -q "^label 2: F1 " "$tmp/sigmoid_cross_entropy.eval"

exit $fail
