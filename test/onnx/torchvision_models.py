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

Dropout is set to 0 so both sides compute the same function. Networks with ReLU kinks
(resnet18, densenet121, shufflenet_v2) match too but their float32 forward error can move an
activation across a kink on another CPU, so they are not asserted here.

Prints one line per check; exits 1 when one fails, 77 without torch or torchvision.
Usage: torchvision_models.py PSRUN [WORK_DIR]   (TORCHVISION_MODELS=a,b: a subset)
"""
import os
import sys
import tempfile

try:
    import torch
    import torchvision.models as tm
    from torch import nn
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_compare import Checks, check_model  # noqa: E402

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
    check.finish()


if __name__ == "__main__":
    main()
