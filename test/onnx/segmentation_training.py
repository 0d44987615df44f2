#!/usr/bin/python3
"""A segmentation network trained through psd: scores per pixel, the per-pixel cross-entropy in
the graph, the masks an int input of their own (docs/models.md, "Segmentation").

The task, on real MNIST: label every pixel of a 28x28 image with 0 (background, intensity below
0.5) or 1 + the digit (the digit's strokes), 11 classes. A fully convolutional torch module (3x3
convs, dilations 1, 2, 4, 8, and image pooling as DeepLab's ASPP: a stroke's class needs the
whole digit) ends in F.cross_entropy(scores [N, 11, 28, 28], masks [N, 28, 28]); torch.onnx
exports it at opset 17 in training mode, and

  - `psrun local --ps 1 --workers 2 --sync` trains it STEPS steps (Adam 5e-3, batch 32 per
    worker) on 12,000 images
    with `--train-input y=masks.npy`, evaluating on 2,000 test images with their masks: the
    reported test loss falls from ln 11 = 2.40 to below LOSS_BOUND;
  - `psrun export` writes the trained graph; its weights loaded into the torch module give the
    test loss psrun reported (within 1e-3) and a pixel accuracy above PIXEL_BOUND on the stroke
    pixels (background alone would score 0 there);
  - the run's summary.json scores the per-pixel head psrun found (test_pixel_accuracy/H,
    test_mean_iou/H) as torch scores those weights; psrun eval writes the same figures to
    eval.json, and psrun predict --output the probabilities [N, 11, 28, 28] (argmax = torch's)
    from the images alone (the masks, which only the loss reads, left out).
Measured 2026-12-05 (2-core host, 60-85 s): test loss 0.063, stroke pixels 84.3%, background 99.9%,
pixel accuracy 97.97% and mean IoU 0.763 (psrun and torch alike)
(the same 800 steps asynchronous: 0.256 and 24%, stale gradients slow this start).

Prints one line per check; exits 1 when one fails, 77 without torch or onnx.
Usage: segmentation_training.py PSRUN [--data MNIST_DIR]
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    import torch
    from onnx import numpy_helper
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench"))
sys.path.insert(0, here)
import networks  # noqa: E402
from psrun_cli import mnist_dir  # noqa: E402
from torch_compare import Checks  # noqa: E402

LOSS_BOUND = 0.15
STEPS = 800
PIXEL_BOUND = 0.7
TRAIN_N, TEST_N = 12000, 2000


class StrokeClasses(nn.Module):
    """x [N, 1, 28, 28], masks [N, 28, 28] -> the mean per-pixel cross-entropy over 11 classes."""

    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(c_in, 24, 3, padding=d, dilation=d)
                                   for c_in, d in ((1, 1), (24, 2), (24, 4), (24, 8)))
        self.context = nn.Linear(24, 24)
        self.classes = nn.Conv2d(24, 11, 1)

    def scores(self, x):
        for conv in self.convs:
            x = F.relu(conv(x))
        # Image pooling as DeepLab's ASPP does: the whole digit's features beside each pixel's.
        context = F.relu(self.context(x.mean((2, 3))))
        return self.classes(x + context[:, :, None, None])

    def forward(self, x, masks):
        return F.cross_entropy(self.scores(x), masks)


def masks_of(images, labels):
    """0 where the pixel is below 0.5, else 1 + the digit."""
    return np.where(images[:, 0] >= 0.5, labels[:, None, None] + 1, 0).astype(np.int64)


def run(args, log):
    """Runs a psrun command with its output in the file `log`: the exit code."""
    with open(log, "w") as f:
        return subprocess.run(args, stdout=f, stderr=subprocess.STDOUT, timeout=900).returncode


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    data = mnist_dir(sys.argv[2:])
    read = lambda name: networks.read_idx(networks.idx_file(data, name))  # noqa: E731
    splits = {"train": (read("train-images-idx3-ubyte")[:TRAIN_N], read("train-labels-idx1-ubyte")[:TRAIN_N]),
              "test": (read("t10k-images-idx3-ubyte")[:TEST_N], read("t10k-labels-idx1-ubyte")[:TEST_N])}
    torch.set_num_threads(1)
    checks = Checks()

    def check(what, ok, log=None):
        """One check; a failure shows the end of the command's log."""
        tail = open(log).read()[-3000:] if log and os.path.exists(log) else ""
        return checks(what, ok, tail)

    with tempfile.TemporaryDirectory(prefix="segmentation_") as tmp:
        files, test = [], {}
        for split, (images, labels) in splits.items():
            x = (images.reshape(-1, 1, 28, 28) / 255.0).astype(np.float32)
            masks = masks_of(x, labels.astype(np.int64))
            np.save(f"{tmp}/{split}-x.npy", x)
            np.save(f"{tmp}/{split}-labels.npy", labels.astype(np.int32))
            np.save(f"{tmp}/{split}-masks.npy", masks.astype(np.int32))
            files += [f"--{split}-images", f"{tmp}/{split}-x.npy", f"--{split}-labels", f"{tmp}/{split}-labels.npy",
                      f"--{split}-input", f"y={tmp}/{split}-masks.npy"]
            test = {"x": x, "masks": masks} if split == "test" else test
        torch.manual_seed(1)
        model = StrokeClasses().train()
        path = f"{tmp}/strokes.onnx"
        torch.onnx.export(model, (torch.from_numpy(test["x"][:2]), torch.from_numpy(test["masks"][:2])), path,
                          opset_version=17, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["x", "y"], output_names=["loss"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
        run_dir, log = f"{tmp}/run", f"{tmp}/train.log"
        rc = run([psrun, "local", "--ps", "1", "--workers", "2", "--sync", "--grace", "30", "--", "--model", path,
                  "--model-dir", run_dir, "--steps", str(STEPS), "--batch-size", "32", "--optimizer", "adam_torch",
                  "--learning-rate", "5e-3", "--threads", "1", "--log-every", "1000"] + files, log)
        if not check(f"trains {STEPS} steps through psd, 2 workers (rc={rc})", rc == 0, log):
            checks.finish()
        loss = json.load(open(f"{run_dir}/summary.json")).get("test_loss", float("nan"))
        check(f"the per-pixel test loss {loss:.4f} < {LOSS_BOUND} (ln 11 = 2.40 untrained)", 0 < loss < LOSS_BOUND, log)
        exported = f"{tmp}/trained.onnx"
        rc = run([psrun, "export", "--model-dir", run_dir, "-o", exported], log)
        if not check(f"psrun export writes the trained graph (rc={rc})", rc == 0, log):
            checks.finish()
        weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(exported).graph.initializer}
        missing = [n for n, _ in model.named_parameters() if n not in weights]
        if not check("the export holds every parameter by its torch name", not missing, log):
            checks.finish()
        with torch.no_grad():
            for n, p in model.named_parameters():
                p.copy_(torch.from_numpy(weights[n].copy()))
            x, masks = torch.from_numpy(test["x"]), torch.from_numpy(test["masks"])
            torch_loss = float(model(x, masks))
            predicted = model.scores(x).argmax(1)
        check(f"the exported weights in torch give the test loss psrun reported ({torch_loss:.4f} vs {loss:.4f})",
              abs(torch_loss - loss) <= 1e-3 * max(1.0, loss))
        strokes = masks > 0
        accuracy = float((predicted[strokes] == masks[strokes]).float().mean())
        background = float((predicted[~strokes] == 0).float().mean())
        check(f"stroke pixels classed by digit: {accuracy:.4f} > {PIXEL_BOUND} (background right: {background:.4f})",
              accuracy > PIXEL_BOUND and background > 0.95)
        # The per-pixel head psrun found (the scores the loss reads against y), scored as torch
        # scores the same weights: pixel accuracy and mean IoU over the classes present.
        want_pixel = float((predicted == masks).float().mean())
        present = [c for c in range(11) if bool(((predicted == c) | (masks == c)).any())]
        want_iou = sum(float(((predicted == c) & (masks == c)).sum()) / float(((predicted == c) | (masks == c)).sum())
                       for c in present) / len(present)
        summary = json.load(open(f"{run_dir}/summary.json"))
        keys = [k for k in summary if k.startswith("test_pixel_accuracy/")]
        if check(f"summary.json scores one per-pixel head ({keys})", len(keys) == 1, log):
            head = keys[0].split("/", 1)[1]
            got_pixel, got_iou = summary[keys[0]], summary.get(f"test_mean_iou/{head}", -1)
            check(f"its pixel accuracy {got_pixel:.4f} = torch's {want_pixel:.4f} (within 1e-3)",
                  abs(got_pixel - want_pixel) <= 1e-3)
            check(f"its mean IoU {got_iou:.4f} = torch's {want_iou:.4f} (within 2e-3)", abs(got_iou - want_iou) <= 2e-3)
            # psrun eval of the run reports the same figures in eval.json; psrun predict writes the
            # per-pixel probabilities [N, 11, 28, 28].
            test_files = ["--test-images", f"{tmp}/test-x.npy", "--test-labels", f"{tmp}/test-labels.npy",
                          "--test-input", f"y={tmp}/test-masks.npy"]
            rc = run([psrun, "eval", "--model-dir", run_dir, "-o", tmp] + test_files, f"{tmp}/eval.log")
            figures = json.load(open(f"{tmp}/eval.json")) if rc == 0 else {}
            check(f"psrun eval: pixel accuracy {figures.get(keys[0], -1):.4f}, mean IoU "
                  f"{figures.get(f'test_mean_iou/{head}', -1):.4f} in eval.json (rc={rc})",
                  rc == 0 and abs(figures.get(keys[0], -1) - got_pixel) <= 1e-6
                  and abs(figures.get(f"test_mean_iou/{head}", -1) - got_iou) <= 1e-6, f"{tmp}/eval.log")
            # (No masks given: only the loss reads y, so predict feeds zeros there.)
            rc = run([psrun, "predict", "--model-dir", run_dir, "--images", f"{tmp}/test-x.npy",
                      "--output", f"{tmp}/p.npy"], f"{tmp}/predict.log")
            probs = np.load(f"{tmp}/p.npy") if rc == 0 else np.zeros((0,))
            agree = float((probs.argmax(1) == predicted.numpy()).mean()) if probs.shape == (TEST_N, 11, 28, 28) else 0
            check(f"psrun predict writes per-pixel probabilities {probs.shape}, argmax = torch's on {agree:.4%} "
                  f"of the pixels (rc={rc})", rc == 0 and agree >= 0.999
                  and np.allclose(probs.sum(1), 1.0, atol=1e-4), f"{tmp}/predict.log")
    checks.finish()

if __name__ == "__main__":
    main()
