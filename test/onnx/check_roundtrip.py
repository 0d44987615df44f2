#!/usr/bin/python3
"""Round trip of trained weights (issue: graph engine acceptance): the ONNX file `psrun export`
wrote from a psrun-trained checkpoint, loaded back by tensor name into the original torch.nn
module (bench/networks.py), must predict what `psrun predict` predicted for the same inputs:
>= 99.9% of the classes agree and every probability is within 1e-4 (f32). The CNNs also run in
OpenCV's dnn module, which must agree the same way.

    check_roundtrip.py NETWORKS_PY NAME EXPORTED.onnx INPUT.npy PSRUN_PROBS.npy [opencv]

INPUT.npy: uint8 images [N, 1, 28, 28] (the module reads them / 255, as psrun does) or int token
ids [N, L]. Prints one line per consumer; exit 1 when one disagrees.
"""
import importlib.util
import sys

import numpy as np


def compare(what, ours, theirs):
    if ours.shape != theirs.shape:
        print(f"FAILED: {what}: shape {theirs.shape}, psrun predict's {ours.shape}")
        return False
    agree = float((ours.argmax(1) == theirs.argmax(1)).mean())
    diff = float(np.abs(ours - theirs).max())
    ok = agree >= 0.999 and diff <= 1e-4
    print(f"{'ok' if ok else 'FAILED'}: {what}: {agree * 100:.2f}% of {len(ours)} classes agree with psrun predict, "
          f"largest probability difference {diff:.2e} (limits 99.9%, 1e-4)")
    return ok


def main():
    if len(sys.argv) not in (6, 7):
        sys.exit(__doc__)
    networks_py, name, onnx_path, input_path, probs_path = sys.argv[1:6]
    spec = importlib.util.spec_from_file_location("networks", networks_py)
    networks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(networks)
    import torch

    data = np.load(input_path)
    ours = np.load(probs_path)
    model = networks.build(name)
    networks.load_onnx_weights(model, onnx_path)
    model.eval()
    tokens = data.dtype.kind in "iu" and data.ndim == 2
    x = torch.from_numpy(data.astype(np.int64)) if tokens else torch.from_numpy(data.astype(np.float32) / 255.0)
    with torch.no_grad():
        theirs = torch.softmax(model(x), dim=1).numpy()
    ok = compare(f"{name}: PyTorch module with the exported weights", ours, theirs)
    if len(sys.argv) == 7 and sys.argv[6] == "opencv":
        import cv2
        net = cv2.dnn.readNetFromONNX(onnx_path)
        net.setInput(data.astype(np.float32) / 255.0)
        ok = compare(f"{name}: OpenCV dnn on the exported file", ours, net.forward()) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
