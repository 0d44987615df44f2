#!/usr/bin/python3
"""Standard networks as torchvision 0.14 (Debian's python3-torchvision) builds them, exported in
training mode at opset 17 and checked whole against PyTorch with test/onnx/torch_compare.py:
`psrun model show` imports each, `psrun model check --no-finite-differences`'s outputs, loss and
every parameter's gradient match torch's in float64 (within TOLERANCE of each tensor's largest, or of 1e-3 of the
network's largest gradient: a conv bias before a batch norm has a zero gradient but for
rounding).

  efficientnet_b0     MBConv blocks, squeeze-and-excitation, SiLU, stochastic depth (set to 0:
                      torch cannot export its Bernoulli)
  convnext_tiny       7x7 depthwise convs, LayerNorm2d (permutes around LayerNorm), GELU, layer scale
  swin_t              shifted windows (torch.roll), relative position bias (a parameter gathered by
                      a constant index), the attention mask built by slice assignment (ScatterND of
                      constants)
  mobilenet_v3_small  hardswish, hardsigmoid squeeze-and-excitation
  vit                 VisionTransformer (2 layers, patch 8): class token, positional embedding
  lraspp              segmentation (lraspp_mobilenet_v3_large, 5 classes, 64x64): scores per
                      pixel upsampled by Resize, trained with the loss in the graph,
                      forward(x, y) = F.cross_entropy(scores, y) over int masks y [N, 64, 64]

Dropout is set to 0 so both sides compute the same function. Networks with ReLU kinks
(resnet18, densenet121, shufflenet_v2) match too but their float32 forward error can move an
activation across a kink on another CPU, so they are not asserted here.

Prints one line per check; exits 1 when one fails, 77 without torch or torchvision.
Usage: torchvision_models.py PSRUN [WORK_DIR]   (TORCHVISION_MODELS=a,b: a subset)
"""
import json
import os
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torchvision.models as tm
    import torchvision.models.segmentation as segmentation
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from psrun_cli import run  # noqa: E402
from torch_compare import Checks, check_model, relative  # noqa: E402

TOLERANCE = 2e-3

MODELS = {
    "efficientnet_b0": (lambda: tm.efficientnet_b0(num_classes=10, stochastic_depth_prob=0.0), (3, 32, 32),
                        ["swish", "sigmoid", "global_avg_pool"]),
    "convnext_tiny": (lambda: tm.convnext_tiny(num_classes=10, stochastic_depth_prob=0.0), (3, 32, 32),
                      ["layer_norm", "gelu", "transpose"]),
    "swin_t": (lambda: tm.swin_t(num_classes=10), (3, 64, 64), ["gather", "softmax", "layer_norm"]),
    "mobilenet_v3_small": (lambda: tm.mobilenet_v3_small(num_classes=10), (3, 32, 32),
                           ["hard_swish", "hard_sigmoid"]),
    "vit": (lambda: tm.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                         mlp_dim=64, num_classes=10), (3, 32, 32), ["layer_norm", "softmax"]),
}


def deterministic(build):
    """The network with dropout and stochastic depth off."""
    def make():
        model = build()
        for module in model.modules():
            if isinstance(module, nn.Dropout) or type(module).__name__ == "StochasticDepth":
                module.p = 0.0
        return model
    return make


class Segmentation(nn.Module):
    """A segmentation network with its loss, as it is exported for psrun: scores [N, C, H, W]
    cannot be a classifier's logits, so the per-pixel cross-entropy is part of the graph."""

    def __init__(self):
        super().__init__()
        self.net = segmentation.lraspp_mobilenet_v3_large(num_classes=5, weights_backbone=None)

    def forward(self, x, y):
        return F.cross_entropy(self.net(x)["out"], y)


def segmentation_check(check, psrun, work):
    """lraspp with the loss in the graph: psrun model check's loss and every parameter gradient on
    one batch against torch's in float64 (gradients relative to 1e-3 of the largest)."""
    torch.manual_seed(1)
    model = Segmentation().train()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 64, 64)).astype(np.float32)
    y = rng.integers(0, 5, size=(2, 64, 64)).astype(np.int64)
    path, grads_path = os.path.join(work, "lraspp.onnx"), os.path.join(work, "lraspp.grads.json")
    xf, yf = os.path.join(work, "lraspp.x.npy"), os.path.join(work, "lraspp.y.npy")
    np.save(xf, x)
    np.save(yf, y)
    torch.onnx.export(model, (torch.from_numpy(x), torch.from_numpy(y)), path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, input_names=["x", "y"],
                      output_names=["loss"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    show = run([psrun, "model", "show", path])
    if not check("lraspp: psrun model show exits 0", show.returncode == 0, show.stdout[-1500:]):
        return
    check("lraspp: the masks are an int input, the loss is the graph's",
          "y 64x64 int" in show.stdout and "loss in the graph" in show.stdout, show.stdout[:300])
    r = run([psrun, "model", "check", path, "--input", f"x={xf}", "--input", f"y={yf}", "--no-finite-differences",
             "--no-bf16",
             "--gradients", grads_path, "--json"], 300)
    if not check("lraspp: psrun model check exits 0", r.returncode == 0, r.stdout[-600:]):
        return
    mine = json.load(open(grads_path))
    double = model.double()
    double.zero_grad()
    loss = double(torch.from_numpy(x).double(), torch.from_numpy(y))
    loss.backward()
    check("lraspp: loss = torch's", abs(mine["loss"] - float(loss)) <= TOLERANCE * float(loss),
          f"{mine['loss']:.7f} vs {float(loss):.7f}", True)
    grads = {n: p.grad.numpy() for n, p in double.named_parameters() if p.grad is not None}
    floor = 1e-3 * max(float(np.max(np.abs(g))) for g in grads.values())
    worst, worst_name = max((relative(mine["tensors"][n]["gradient"], g, floor), n)
                            for n, g in grads.items())
    check(f"lraspp: {len(grads)} parameter gradients = torch's", worst <= TOLERANCE, f"worst {worst_name} {worst:.2e}",
          True)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    only = os.environ.get("TORCHVISION_MODELS")
    torch.set_num_threads(1)
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        work = sys.argv[2] if len(sys.argv) == 3 else tmp
        os.makedirs(work, exist_ok=True)
        for name, (build, shape, kinds) in MODELS.items():
            if not only or name in only.split(","):
                # torch's float64 gradients are the reference; psrun model check's own central
                # differences (two forward passes per tensor: minutes for these) are not run.
                # efficientnet_b0's batch norms reach a 1x1 map: over 4 examples its float32
                # gradients come within 1.8e-3 of torch's (a batch of 16: 6.2e-5).
                batch = 16 if name == "efficientnet_b0" else 4
                check_model(check, psrun, name, deterministic(build), shape, kinds, work, batch=batch, seed=3,
                            opsets=(17,), tolerance=TOLERANCE, gradient_floor=1e-3, compare_predict=False,
                            finite_differences=False)
        if not only or "lraspp" in only.split(","):
            segmentation_check(check, psrun, work)
    check.finish()


if __name__ == "__main__":
    main()
