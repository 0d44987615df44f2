#!/usr/bin/python3
"""Volumetric networks from PyTorch (N x C x D x H x W: nn.Conv3d, ConvTranspose3d, BatchNorm3d,
MaxPool3d, AvgPool3d, AdaptiveAvgPool3d(1)) through ONNX Conv / ConvTranspose /
BatchNormalization / MaxPool / AveragePool / GlobalAveragePool over 5-D values, end to end
through the psrun CLI:

  six small modules (Conv3d with stride 2, padding 1, groups 2 and a dilated one;
  Conv3d + BatchNorm3d + ReLU + MaxPool3d; AvgPool3d with ceil_mode, with and without
  count_include_pad; Conv3d + AdaptiveAvgPool3d(1) / AdaptiveMaxPool3d(1) / a mean over D, H, W
  + flatten + Linear; a tiny 3-D U-Net: Conv3d stride 2 down, ConvTranspose3d stride 2,
  padding 1, output_padding 1, groups 2 back up, the skip concatenated, Conv3d, MaxPool3d,
  Linear; a dilated ConvTranspose3d without bias, per-axis stride and output_padding), exported in training
  mode without constant folding at opsets 13, 14 and 17, batch axis dynamic:
    - `psrun model show F.onnx` exits 0 and lists the expected kinds;
    - `psrun model check F.onnx --gradients G.json` gives torch's forward outputs, loss and
      every parameter's gradient, tensor by tensor, in float64 within TOLERANCE (relative to
      the tensor's largest value, at least 1e-2 of the network's largest; the worst printed);
    - `psrun predict --onnx F.onnx` gives torch's softmax (eval mode; modules without a batch norm);
  the export: Conv3d + BatchNorm3d + ReLU + MaxPool3d, the AvgPool3d module and the U-Net trained
  5 steps through psd, `psrun export`ed (3-D Conv, ConvTranspose, MaxPool, AveragePool), pass onnx.checker
  (full_check), loaded into torch by name predict as psrun, and their graphs alone (the
  embedded description removed) import and predict the same;
  a refusal: a 5-D ConvTranspose with auto_pad SAME_UPPER (as the 2-D one) exits 2 naming the node.

Prints one line per check; exits 1 when one fails, 77 when torch or onnx cannot be imported.
Usage: volumetric_models.py PSRUN [WORK_DIR]   (VOLUMETRIC_MODELS=a,b: a subset)
"""
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "bench"))
from psrun_cli import predict, run  # noqa: E402
from torch_compare import Checks, check_model, export  # noqa: E402
import networks  # noqa: E402  (load_onnx_weights)

BATCH = 4
check = Checks()


class Conv3dNet(nn.Module):
    """[N, 4, 7, 8, 7]: stride 2, padding 1, groups 2 -> [N, 6, 4, 4, 4]; dilation (1, 2, 1) with
    pads (1, 0, 1) -> [N, 4, 5, 2, 5]; linear to 10."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv3d(4, 6, 3, stride=2, padding=1, groups=2)
        self.b = nn.Conv3d(6, 4, (2, 2, 2), dilation=(1, 2, 1), padding=(1, 0, 1), bias=False)
        self.head = nn.Linear(4 * 5 * 2 * 5, 10)

    def forward(self, x):
        return self.head(self.b(torch.tanh(self.a(x))).flatten(1))


class ConvBnPool(nn.Module):
    """[N, 3, 6, 6, 6]: Conv3d 3 pad 1, BatchNorm3d, ReLU, MaxPool3d 2 -> [N, 8, 3, 3, 3]; linear."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.head = nn.Conv3d(3, 8, 3, padding=1), nn.BatchNorm3d(8), nn.Linear(8 * 27, 10)

    def forward(self, x):
        return self.head(F.max_pool3d(F.relu(self.bn(self.conv(x))), 2).flatten(1))


class AvgCeil(nn.Module):
    """[N, 2, 5, 7, 5]: a 1x1x1 conv, then AvgPool3d 2/2 ceil_mode -> [N, 4, 3, 4, 3] and
    AvgPool3d 3/2 pad 1 ceil_mode without the pads counted -> [N, 4, 3, 4, 3]; linear."""

    def __init__(self):
        super().__init__()
        self.conv, self.head = nn.Conv3d(2, 4, 1), nn.Linear(2 * 4 * 36, 10)
        self.p1 = nn.AvgPool3d(2, stride=2, ceil_mode=True)
        self.p2 = nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)

    def forward(self, x):
        h = self.conv(x)
        return self.head(torch.cat([self.p1(h).flatten(1), self.p2(h).flatten(1)], 1))


class AdaptiveHead(nn.Module):
    """[N, 3, 5, 6, 6]: Conv3d 3, ReLU, AdaptiveAvgPool3d(1) (GlobalAveragePool), flatten, linear;
    beside it AdaptiveMaxPool3d(1) (a MaxPool over the whole volume) and a mean over D, H, W (ReduceMean)."""

    def __init__(self):
        super().__init__()
        self.conv, self.pool, self.head = nn.Conv3d(3, 6, 3), nn.AdaptiveAvgPool3d(1), nn.Linear(18, 10)

    def forward(self, x):
        h = F.relu(self.conv(x))
        return self.head(torch.cat([torch.flatten(self.pool(h), 1), F.adaptive_max_pool3d(h, 1).flatten(1),
                                    torch.tanh(self.conv(x)).mean(dim=(2, 3, 4))], 1))


class UNet3d(nn.Module):
    """[N, 2, 6, 6, 6]: Conv3d 3 pad 1 -> [N, 4, 6, 6, 6] (the skip); Conv3d stride 2 pad 1 ->
    [N, 8, 3, 3, 3]; ConvTranspose3d 3 stride 2 pad 1 output_padding 1 groups 2 -> [N, 4, 6, 6, 6];
    concat with the skip, Conv3d 3 pad 1, MaxPool3d 2 -> [N, 4, 3, 3, 3]; linear."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Conv3d(2, 4, 3, padding=1)
        self.down = nn.Conv3d(4, 8, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose3d(8, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.dec = nn.Conv3d(8, 4, 3, padding=1)
        self.head = nn.Linear(4 * 27, 10)

    def forward(self, x):
        skip = torch.relu(self.enc(x))
        h = torch.tanh(self.up(torch.relu(self.down(skip))))
        h = torch.relu(self.dec(torch.cat([h, skip], 1)))
        return self.head(F.max_pool3d(h, 2).flatten(1))


class DilatedTranspose(nn.Module):
    """[N, 3, 4, 3, 4]: ConvTranspose3d (2, 3, 2), stride (1, 2, 1), dilation (2, 1, 2), padding
    (1, 0, 1), output_padding (0, 1, 0), no bias -> [N, 4, 4, 8, 4]; tanh; linear."""

    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose3d(3, 4, (2, 3, 2), stride=(1, 2, 1), dilation=(2, 1, 2), padding=(1, 0, 1),
                                     output_padding=(0, 1, 0), bias=False)
        self.head = nn.Linear(4 * 4 * 8 * 4, 10)

    def forward(self, x):
        return self.head(torch.tanh(self.up(x)).flatten(1))


# name -> (builder, input shape, kinds expected in `psrun model show`, eval predictions comparable)
MODELS = {
    "conv3d": (Conv3dNet, (4, 7, 8, 7), ["conv2d"], True),
    "conv_bn_pool": (ConvBnPool, (3, 6, 6, 6), ["conv2d", "batch_norm", "max_pool"], False),
    "avg_ceil": (AvgCeil, (2, 5, 7, 5), ["avg_pool"], True),
    "adaptive_head": (AdaptiveHead, (3, 5, 6, 6), ["global_avg_pool", "max_pool", "reduce_mean"], True),
    "unet3d": (UNet3d, (2, 6, 6, 6), ["conv2d", "conv_transpose", "concat", "max_pool"], True),
    "dilated_transpose": (DilatedTranspose, (3, 4, 3, 4), ["conv_transpose"], True),
}


def export_back(psrun, name, ops, work):
    """MODELS[name] trained 5 steps through psd, exported (writing `ops` with 3-D kernel_shape),
    read back by onnx.checker, torch (by name) and psrun (the graph alone)."""
    torch.manual_seed(2)
    build, shape = MODELS[name][0], MODELS[name][1]
    path = os.path.join(work, f"{name}.train.onnx")
    export(build().train(), torch.zeros((2,) + shape), path, 17)
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (32,) + shape).astype(np.float32)
    y = rng.integers(0, 10, 32).astype(np.int32)
    for split in ("train", "test"):
        np.save(os.path.join(work, f"{split}-x.npy"), x)
        np.save(os.path.join(work, f"{split}-y.npy"), y)
    run_dir = os.path.join(work, f"run-{name}")
    r = run([psrun, "local", "--ps", "1", "--workers", "1", "--grace", "30", "--", "--model", path,
             "--model-dir", run_dir, "--steps", "5", "--batch-size", "16", "--learning-rate", "1e-2",
             "--precision", "f32", "--threads", "1", "--log-every", "1000",
             "--train-images", os.path.join(work, "train-x.npy"), "--train-labels", os.path.join(work, "train-y.npy"),
             "--test-images", os.path.join(work, "test-x.npy"), "--test-labels", os.path.join(work, "test-y.npy")], 300)
    if not check(f"export {name}: trains 5 steps through psd", r.returncode == 0, r.stdout[-1500:]):
        return
    exported = os.path.join(work, f"{name}.trained.onnx")
    r = run([psrun, "export", "--model-dir", run_dir, "-o", exported])
    if not check(f"export {name}: psrun export exits 0", r.returncode == 0, r.stdout[-1500:]):
        return
    written = {n.op_type: len(onnx.helper.get_attribute_value(a)) for n in onnx.load(exported).graph.node
               for a in n.attribute if a.name == "kernel_shape"}
    check(f"export {name}: writes {', '.join(ops)} with 3-D kernel_shape", all(written.get(o) == 3 for o in ops),
          str(written))
    try:
        onnx.checker.check_model(onnx.load(exported), full_check=True)
        check(f"export {name}: passes onnx.checker (full_check)", True)
    except Exception as e:  # noqa: BLE001 (the checker's exception types vary)
        check(f"export {name}: passes onnx.checker (full_check): {e}", False)
    probs = os.path.join(work, f"{name}.probs.npy")
    r = run([psrun, "predict", "--model-dir", run_dir, "--images", os.path.join(work, "test-x.npy"), "--output", probs])
    if not check(f"export {name}: psrun predict --model-dir exits 0", r.returncode == 0, r.stdout[-1500:]):
        return
    model = build()
    networks.load_onnx_weights(model, exported)
    with torch.no_grad():
        want = torch.softmax(model.eval()(torch.from_numpy(x)), dim=1).numpy()
    diff = float(np.abs(np.load(probs) - want).max())
    check(f"export {name}: loaded into torch by name, predicts as psrun", diff <= 1e-4, f"largest difference {diff:.1e}",
          True)
    graph_only = onnx.load(exported)
    keep = [p for p in graph_only.metadata_props if p.key != "psrun.model"]
    del graph_only.metadata_props[:]
    graph_only.metadata_props.extend(keep)
    stripped = os.path.join(work, f"{name}.graph-only.onnx")
    onnx.save(graph_only, stripped)
    got, err = predict(psrun, stripped, x, work, f"{name}.graph_only")
    diff = float(np.abs(got - np.load(probs)).max()) if got is not None else float("inf")
    check(f"export {name}: its graph alone imports and predicts as psrun", diff <= 1e-4,
          err or f"largest difference {diff:.1e}", True)


def refusals(psrun, work):
    """A 5-D ConvTranspose with auto_pad SAME_UPPER (torch never writes it; the 2-D path refuses it too)."""
    from onnx import TensorProto, helper
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 2, 2, 2, 2], [0.1] * 32)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="up_same", kernel_shape=[2, 2, 2],
                            strides=[2, 2, 2], auto_pad="SAME_UPPER")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 6, 6, 6])], [w])
    path = os.path.join(work, "refused_conv_transpose3d_same.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    r = run([psrun, "model", "show", path])
    check("refused 5-D ConvTranspose auto_pad SAME_UPPER: exit 2 naming the node",
          r.returncode == 2 and "up_same" in r.stdout and "auto_pad SAME_UPPER" in r.stdout,
          f"exit {r.returncode}: {r.stdout.strip()[-300:]}", True)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    only = os.environ.get("VOLUMETRIC_MODELS")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = sys.argv[2] if len(sys.argv) == 3 else tmp
        os.makedirs(work, exist_ok=True)
        for name, (build, shape, kinds, comparable) in MODELS.items():
            if not only or name in only.split(","):
                # psrun's own central differences are the coarse check (ReLU and max kinks);
                # torch's float64 gradients the fine one.
                check_model(check, psrun, name, build, shape, kinds, work, batch=BATCH, seed=3, check_tolerance=0.25,
                            gradient_floor=1e-2, compare_predict=comparable)
        if not only or "export" in only.split(","):
            export_back(psrun, "conv_bn_pool", ["Conv", "MaxPool"], work)
            export_back(psrun, "avg_ceil", ["Conv", "AveragePool"], work)
            export_back(psrun, "unet3d", ["Conv", "ConvTranspose", "MaxPool"], work)
        if not only or "refusals" in only.split(","):
            refusals(psrun, work)
    check.finish()


if __name__ == "__main__":
    main()
