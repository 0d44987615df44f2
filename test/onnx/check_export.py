#!/usr/bin/python3
"""Checks one file `psrun export` wrote against the run that trained it.

onnx.checker (full_check) accepts it; OpenCV's dnn module runs it on the 10,000 MNIST test
images (pixels / 255, as psrun reads them) and its arg-max accuracy matches the run's own final
test accuracy (summary.json) within 0.05 points; the outputs are probabilities. With PREDICT.npy
(`psrun predict --output`, the same 10,000 images) and EVAL.json (`psrun eval`), also: OpenCV's
arg-max equals psrun predict's on >= 99.9% of the images, and OpenCV's accuracy equals psrun
eval's within 0.05 points.

Usage: check_export.py FILE.onnx SUMMARY.json MNIST_DIR [PREDICT.npy EVAL.json]
"""
import gzip
import json
import os
import sys

import cv2
import numpy as np
import onnx


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(data_dir, name)):
            return os.path.join(data_dir, name)
    sys.exit(f"no {stem} in {data_dir}")


def main():
    if len(sys.argv) not in (4, 6):
        sys.exit(__doc__)
    path, summary_path, data_dir = sys.argv[1:4]
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 13, model.opset_import
    assert [i.name for i in model.graph.input] == ["images"]
    assert [o.name for o in model.graph.output] == ["probabilities"]
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    assert all(n.op_type != "Dropout" for n in model.graph.node)

    images = read_idx(find(data_dir, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0
    labels = read_idx(find(data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64)
    images = images.reshape(-1, 1, 28, 28)
    net = cv2.dnn.readNetFromONNX(path)
    classes = []
    for start in range(0, len(images), 500):
        net.setInput(images[start:start + 500])
        probs = net.forward()
        assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-4), probs.sum(axis=1)[:5]
        classes.append(probs.argmax(axis=1))
    classes = np.concatenate(classes)
    opencv = float((classes == labels).mean())
    with open(summary_path) as f:
        psrun = json.load(f)["test_accuracy"]
    print(f"{path}: onnx.checker full_check ok; OpenCV {opencv * 100:.2f}% on {len(images)} test images, "
          f"psrun's evaluation {psrun * 100:.2f}%")
    if abs(opencv - psrun) > 0.0005:
        sys.exit(f"FAILED: OpenCV's accuracy {opencv:.4f} differs from psrun's {psrun:.4f} by more than 0.05 points")
    if len(sys.argv) == 6:
        predicted = np.load(sys.argv[4])
        assert predicted.shape == (len(images), 10) and predicted.dtype == np.float32, predicted.shape
        agree = float((predicted.argmax(axis=1) == classes).mean())
        with open(sys.argv[5]) as f:
            evaluated = json.load(f)["accuracy"]
        print(f"  psrun predict's arg-max = OpenCV's on {agree * 100:.2f}% of the images; "
              f"psrun eval {evaluated * 100:.2f}%, OpenCV {opencv * 100:.2f}%")
        if agree < 0.999:
            sys.exit(f"FAILED: psrun predict and OpenCV agree on only {agree * 100:.2f}% of the images (< 99.9%)")
        if abs(opencv - evaluated) > 0.0005:
            sys.exit(f"FAILED: psrun eval's accuracy {evaluated:.4f} differs from OpenCV's {opencv:.4f} "
                     f"by more than 0.05 points")


if __name__ == "__main__":
    main()
