#!/usr/bin/python3
"""Checks export_zoo's files: every built-in model's export passes onnx.checker (full_check),
OpenCV's dnn module loads and runs it, and its probabilities equal those of psrun's engine on
the random batch within 1e-4.

Usage: check_zoo_exports.py DIR NAME...
"""
import sys

import cv2
import numpy as np
import onnx


def main():
    d, names = sys.argv[1], sys.argv[2:]
    if not names:
        sys.exit(__doc__)
    for name in names:
        path = f"{d}/{name}.onnx"
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        dims = [x.dim_value for x in model.graph.input[0].type.tensor_type.shape.dim[1:]]
        expected = np.fromfile(f"{d}/{name}.probs.f32", np.float32)
        classes = model.graph.output[0].type.tensor_type.shape.dim[1].dim_value
        expected = expected.reshape(-1, classes)
        images = np.fromfile(f"{d}/{name}.input.f32", np.float32).reshape([len(expected)] + dims)
        net = cv2.dnn.readNetFromONNX(path)
        net.setInput(images)
        probs = net.forward()
        assert probs.shape == expected.shape, (probs.shape, expected.shape)
        assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-4)
        worst = float(np.abs(probs - expected).max())
        print(f"{name}: onnx.checker full_check ok; OpenCV's probabilities differ from psrun's engine by at most "
              f"{worst:.2e} ({len(expected)} images, arg-max classes {sorted(set(expected.argmax(axis=1)))})")
        if worst > 1e-4:
            sys.exit(f"FAILED: {name}: OpenCV's probabilities differ from the engine's by {worst}")

if __name__ == "__main__":
    main()
