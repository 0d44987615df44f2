#!/usr/bin/python3
"""The convolution family from PyTorch (issue 34): small torch.nn modules using nn.Conv1d
(stride, padding, dilation, groups, no bias), nn.MaxPool1d / AvgPool1d (padding, ceil_mode),
nn.ConvTranspose1d / 2d (stride, padding, output_padding, groups, dilation, no bias) and
nn.Upsample / F.interpolate (nearest and (bi)linear, up and down), exported by torch.onnx.export
at opsets 13, 14 and 17 (training mode, no constant folding, a dynamic batch axis). Each must
import (`psrun model show` exits 0), and `psrun predict --onnx` on a batch must give the
probabilities torch computes (every one within 1e-4), align_corners=True included (imported as
interpolation matrices, since oneDNN's resampling has no such mode). Then the export: one
module trained a few steps through psd (`psrun local`), `psrun export`ed, loaded back into torch
by tensor name, must predict what `psrun predict` predicts.

    conv_family_test.py PSRUN [OPSET ...]
Prints one line per check; exit 1 when one fails, 77 (skipped) without torch.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
    from torch import nn
    import torch.nn.functional as F
except ImportError:  # meson: skipped
    print("torch is not installed: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import networks  # noqa: E402  (load_onnx_weights)


class Conv1dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(8, 12, 3, padding=1)
        self.c2 = nn.Conv1d(12, 12, 5, stride=2, padding=2, groups=3)
        self.c3 = nn.Conv1d(12, 8, 3, dilation=2, bias=False)
        self.bn = nn.BatchNorm1d(8)
        self.fc = nn.Linear(8 * 6, 5)

    def forward(self, x):  # [N, 8, 20]
        x = F.relu(self.c2(F.relu(self.c1(x))))
        return self.fc(F.relu(self.bn(self.c3(x))).flatten(1))


class Pool1dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv1d(8, 8, 3, padding=1)
        self.pools = nn.Sequential(nn.MaxPool1d(2), nn.AvgPool1d(3, stride=2, padding=1),
                                   nn.MaxPool1d(3, stride=1, padding=1), nn.AvgPool1d(2, ceil_mode=True),
                                   nn.MaxPool1d(2, ceil_mode=True))
        self.fc = nn.Linear(8 * 2, 5)

    def forward(self, x):  # [N, 8, 20] -> 10 -> 5 -> 5 -> 3 -> 2
        return self.fc(self.pools(self.c(x)).flatten(1))


class ConvTranspose2dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.t1 = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)
        self.t2 = nn.ConvTranspose2d(6, 4, 2, stride=2, groups=2)
        self.t3 = nn.ConvTranspose2d(4, 4, 3, padding=2, dilation=2, bias=False)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):  # [N, 4, 6, 6] -> 12 -> 24 -> 24 -> 6
        x = F.relu(self.t2(F.relu(self.t1(x))))
        return self.fc(F.avg_pool2d(self.t3(x), 4).flatten(1))


class ConvTranspose1dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.t1 = nn.ConvTranspose1d(8, 6, 4, stride=2, padding=1)
        self.t2 = nn.ConvTranspose1d(6, 4, 3, stride=3, padding=1, output_padding=2, bias=False)
        self.fc = nn.Linear(4 * 60, 5)

    def forward(self, x):  # [N, 8, 10] -> 20 -> 60
        return self.fc(self.t2(F.relu(self.t1(x))).flatten(1))


class UpsampleNearest(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.c2 = nn.Conv2d(4, 4, 3, stride=2)
        self.fc = nn.Linear(4 * 5 * 5, 5)

    def forward(self, x):  # [N, 3, 6, 6] -> 12 -> 5
        return self.fc(self.c2(self.up(F.relu(self.c1(x)))).flatten(1))


class UpsampleBilinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):  # [N, 3, 6, 6] -> 12 -> 6
        x = self.up(F.relu(self.c1(x)))
        return self.fc(F.interpolate(x, scale_factor=0.5, mode="bilinear", align_corners=False).flatten(1))


class Upsample1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv1d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 60, 5)

    def forward(self, x):  # [N, 4, 10] -> 30 -> 60
        x = F.interpolate(self.c(x), scale_factor=3, mode="nearest")
        return self.fc(F.interpolate(x, scale_factor=2, mode="linear", align_corners=False).flatten(1))


class UpsampleSizes(nn.Module):  # output sizes instead of scales: Resize's sizes input
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 12 * 12 + 4 * 9 * 9, 5)

    def forward(self, x):  # [N, 3, 6, 6] -> 12 (nearest) and 9 (bilinear)
        y = self.c(x)
        a = F.interpolate(y, size=(12, 12), mode="nearest")
        b = F.interpolate(y, size=(9, 9), mode="bilinear", align_corners=False)
        return self.fc(torch.cat([a.flatten(1), b.flatten(1)], dim=1))


class AlignCorners(nn.Module):  # oneDNN has no align_corners: interpolation matrices
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3 * 12 * 12, 5)

    def forward(self, x):
        return self.fc(F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True).flatten(1))


MODULES = {
    "conv1d_net": (Conv1dNet, (8, 20)),
    "pool1d_net": (Pool1dNet, (8, 20)),
    "conv_transpose2d_net": (ConvTranspose2dNet, (4, 6, 6)),
    "conv_transpose1d_net": (ConvTranspose1dNet, (8, 10)),
    "upsample_nearest": (UpsampleNearest, (3, 6, 6)),
    "upsample_bilinear": (UpsampleBilinear, (3, 6, 6)),
    "upsample_1d": (Upsample1d, (4, 10)),
    "upsample_sizes": (UpsampleSizes, (3, 6, 6)),
    "upsample_align_corners": (AlignCorners, (3, 6, 6)),
}


def build(name, seed=0):
    torch.manual_seed(seed)
    return MODULES[name][0]()


def export(model, shape, path, opset):
    model.train(True)
    torch.onnx.export(model, torch.zeros((2,) + shape), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})


def torch_probs(model, x):
    model.eval()
    with torch.no_grad():
        return torch.softmax(model(torch.from_numpy(x)), dim=1).numpy()


def run(args, log):
    with open(log, "w") as f:
        return subprocess.run(args, stdout=f, stderr=subprocess.STDOUT, timeout=300).returncode


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    opsets = [int(a) for a in sys.argv[2:]] or [13, 14, 17]
    ok = True

    def check(what, cond, log=None):
        nonlocal ok
        print(f"{'ok' if cond else 'FAILED'}: {what}")
        if not cond:
            ok = False
            if log and os.path.exists(log):
                print("    " + open(log).read()[-1500:].replace("\n", "\n    "))

    tmp = tempfile.mkdtemp(prefix="conv_family_")
    rng = np.random.default_rng(1)
    for opset in opsets:
        for name, (_, shape) in MODULES.items():
            path = f"{tmp}/{name}.{opset}.onnx"
            model = build(name)
            export(model, shape, path, opset)
            log = path + ".log"
            check(f"{name} opset {opset}: psrun model show exits 0", run([psrun, "model", "show", path], log) == 0, log)
            x = rng.uniform(-1, 1, (16,) + shape).astype(np.float32)
            np.save(f"{tmp}/{name}.x.npy", x)
            out = f"{tmp}/{name}.{opset}.probs.npy"
            rc = run([psrun, "predict", "--onnx", path, "--images", f"{tmp}/{name}.x.npy", "--output", out], log)
            if rc != 0:
                check(f"{name} opset {opset}: psrun predict exits 0", False, log)
                continue
            ours, theirs = np.load(out), torch_probs(model, x)
            diff = float(np.abs(ours - theirs).max()) if ours.shape == theirs.shape else float("inf")
            check(f"{name} opset {opset}: psrun predict = torch within 1e-4 (largest difference {diff:.1e})", diff <= 1e-4)

    # Opset 18's Resize (torch 1.13 writes at most 17): scales for the named axes only.
    import onnx
    from onnx import helper, numpy_helper
    w = rng.uniform(-0.1, 0.1, (5, 3 * 12 * 12)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Resize", ["input", "", "scales"], ["up"], axes=[2, 3], mode="linear",
                          coordinate_transformation_mode="half_pixel"),
         helper.make_node("Flatten", ["up"], ["flat"]),
         helper.make_node("Gemm", ["flat", "w"], ["logits"], transB=1)],
        "resize18", [helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, ["N", 3, 6, 6])],
        [helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["N", 5])],
        [numpy_helper.from_array(np.array([2.0, 2.0], np.float32), "scales"), numpy_helper.from_array(w, "w")])
    path = f"{tmp}/resize18.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    x = rng.uniform(-1, 1, (8, 3, 6, 6)).astype(np.float32)
    np.save(f"{tmp}/resize18.x.npy", x)
    rc = run([psrun, "predict", "--onnx", path, "--images", f"{tmp}/resize18.x.npy", "--output", f"{tmp}/r18.npy"],
             path + ".log")
    if rc == 0:
        up = F.interpolate(torch.from_numpy(x), scale_factor=2, mode="bilinear", align_corners=False)
        want = torch.softmax(up.flatten(1) @ torch.from_numpy(w).T, dim=1).numpy()
        diff = float(np.abs(np.load(f"{tmp}/r18.npy") - want).max())
    check(f"opset 18 Resize with axes [2, 3]: psrun predict = torch (rc={rc}, largest difference "
          f"{diff if rc == 0 else float('inf'):.1e})", rc == 0 and diff <= 1e-4, path + ".log")

    # The export: three modules trained a few steps through psd, exported, loaded into torch.
    for name in ("conv1d_net", "conv_transpose2d_net", "upsample_bilinear"):
        shape = MODULES[name][1]
        path = f"{tmp}/{name}.train.onnx"
        export(build(name), shape, path, opsets[-1])
        x = rng.uniform(-1, 1, (64,) + shape).astype(np.float32)
        y = rng.integers(0, 5, 64).astype(np.int32)
        for split in ("train", "test"):
            np.save(f"{tmp}/{name}.{split}-x.npy", x)
            np.save(f"{tmp}/{name}.{split}-y.npy", y)
        run_dir, log = f"{tmp}/run-{name}", f"{tmp}/{name}.train.log"
        rc = run([psrun, "local", "--ps", "1", "--workers", "1", "--grace", "30", "--", "--model", path,
                  "--model-dir", run_dir, "--steps", "5", "--batch-size", "16", "--learning-rate", "1e-2",
                  "--precision", "f32", "--threads", "1", "--log-every", "1000",
                  "--train-images", f"{tmp}/{name}.train-x.npy", "--train-labels", f"{tmp}/{name}.train-y.npy",
                  "--test-images", f"{tmp}/{name}.test-x.npy", "--test-labels", f"{tmp}/{name}.test-y.npy"], log)
        check(f"{name}: trains 5 steps through psd (rc={rc})", rc == 0, log)
        if rc != 0:
            continue
        exported = f"{tmp}/{name}.trained.onnx"
        rc = run([psrun, "export", "--model-dir", run_dir, "-o", exported], log)
        check(f"{name}: psrun export exits 0", rc == 0, log)
        out = f"{tmp}/{name}.trained.probs.npy"
        rc = run([psrun, "predict", "--model-dir", run_dir, "--images", f"{tmp}/{name}.test-x.npy", "--output", out], log)
        check(f"{name}: psrun predict --model-dir exits 0", rc == 0, log)
        if rc != 0:
            continue
        model = build(name)
        networks.load_onnx_weights(model, exported)
        diff = float(np.abs(np.load(out) - torch_probs(model, x)).max())
        check(f"{name}: the exported weights, loaded into torch by name, predict as psrun (largest difference "
              f"{diff:.1e})", diff <= 1e-4)
        import onnx
        try:
            onnx.checker.check_model(onnx.load(exported), full_check=True)
            check(f"{name}: the export passes onnx.checker (full_check)", True)
        except Exception as e:  # noqa: BLE001 (the checker's own exception types vary)
            check(f"{name}: the export passes onnx.checker (full_check): {e}", False)
        # Node by node: without the embedded description the importer reads the exported
        # Conv / ConvTranspose / Resize nodes themselves.
        graph_only = onnx.load(exported)
        keep = [p for p in graph_only.metadata_props if p.key != "psrun.model"]
        del graph_only.metadata_props[:]
        graph_only.metadata_props.extend(keep)
        stripped = f"{tmp}/{name}.graph-only.onnx"
        onnx.save(graph_only, stripped)
        again = f"{tmp}/{name}.graph-only.probs.npy"
        rc = run([psrun, "predict", "--onnx", stripped, "--images", f"{tmp}/{name}.test-x.npy", "--output", again], log)
        diff = float(np.abs(np.load(again) - np.load(out)).max()) if rc == 0 else float("inf")
        check(f"{name}: the export's graph, imported node by node, predicts as psrun (largest difference {diff:.1e})",
              diff <= 1e-4, log)
        if name == "upsample_bilinear":  # OpenCV 4.6 reads it (not a dilated ConvTranspose, not 1-D)
            import cv2
            try:
                net = cv2.dnn.readNetFromONNX(exported)
                net.setInput(x)
                diff = float(np.abs(net.forward() - np.load(out)).max())
            except cv2.error as e:
                print(f"    {e}")
                diff = float("inf")
            check(f"{name}: OpenCV dnn on the export predicts as psrun (largest difference {diff:.1e})", diff <= 1e-4)
    if ok:
        shutil.rmtree(tmp)
    else:
        print(f"files kept in {tmp}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
