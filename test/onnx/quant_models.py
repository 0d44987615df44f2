#!/usr/bin/python3
"""Quantization-aware training as torch writes it: torch.fake_quantize_per_tensor_affine and
_per_channel_affine, which torch.onnx exports as QuantizeLinear + DequantizeLinear (a Clip
between them for the (0, 127) range), end to end through the psrun CLI with
test/onnx/torch_compare.py (psrun model show lists the kinds; psrun model check's outputs, loss
and every parameter gradient against torch in float64: the straight-through gradient, zero
where a value is clamped; psrun predict against torch's softmax), at opsets 13 and 17:
  - an MLP with uint8 activations (zero point 3) and int8 weights, one scale each;
  - a CNN whose conv weights are fake-quantized per output channel (int8, axis 0), its
    activations uint8;
  - per-channel uint8 activations of a [N, C, L] sequence (axis 1, a zero point per channel);
  - the reduced range (0, 127), which torch writes as a Clip of the uint8 values between
    QuantizeLinear and DequantizeLinear, per tensor (activations) and per channel (weights):
    one quantize_linear with that range, whose gradient passes at q = 127 as torch's does.
Scales are chosen so that some values clamp (their gradient is zero in both: a mutation that
passes it fails all four) and some land on the bounds (the gradient passes there in both: a
mutation that stops it there, as a clip layer would, fails the last).
Prints one line per check; exits 1 when one fails, 77 when torch cannot be imported.
Usage: quant_models.py PSRUN [WORK_DIR]
"""
import os
import sys

try:
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_compare import Checks, check_model, run_main  # noqa: E402

check = Checks()


def per_channel(x, scales, zeros, axis, lo, hi):
    """torch.fake_quantize_per_channel_affine, which has no float64 kernel: in float32 (as psrun
    computes it) within the float64 reference run, a no-op cast when exported."""
    return torch.fake_quantize_per_channel_affine(x.float(), scales.float(), zeros, axis, lo, hi).to(x.dtype)


class QuantMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 12), nn.Linear(12, 10)

    def forward(self, x):
        h = torch.fake_quantize_per_tensor_affine(F.relu(self.a(x)), 0.002, 3, 0, 255)
        w = torch.fake_quantize_per_tensor_affine(self.b.weight, 0.02, 0, -128, 127)
        return F.linear(h, w, self.b.bias)


class PerChannelCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 6, 3)
        self.register_buffer("scales", torch.linspace(0.002, 0.01, 6))
        self.register_buffer("zeros", torch.zeros(6, dtype=torch.int32))
        self.head = nn.Linear(6, 10)

    def forward(self, x):
        w = per_channel(self.c.weight, self.scales, self.zeros, 0, -128, 127)
        h = torch.fake_quantize_per_tensor_affine(F.relu(F.conv2d(x, w, self.c.bias)), 0.001, 0, 0, 255)
        return self.head(h.mean((2, 3)))


class PerChannelSequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv1d(4, 5, 3, padding=1)
        self.register_buffer("scales", torch.tensor([0.01, 0.02, 0.015, 0.03, 0.005]))
        self.register_buffer("zeros", torch.tensor([0, 10, 128, 60, 200], dtype=torch.int32))
        self.head = nn.Linear(5, 10)

    def forward(self, x):  # [N, 4, 9]
        h = per_channel(torch.tanh(self.c(x)), self.scales, self.zeros, 1, 0, 255)
        return self.head(h.mean(2))


class ReducedRange(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 12), nn.Linear(12, 10)
        self.register_buffer("scales", torch.linspace(0.0005, 0.002, 10))
        self.register_buffer("zeros", torch.full((10,), 64, dtype=torch.int32))

    def forward(self, x):
        h = torch.fake_quantize_per_tensor_affine(F.relu(self.a(x)), 0.004, 0, 0, 127)
        w = per_channel(self.b.weight, self.scales, self.zeros, 0, 0, 127)
        return F.linear(h, w, self.b.bias)


MODELS = {
    "quant_mlp": (QuantMlp, (16,), ["quantize_linear", "dequantize_linear"]),
    "per_channel_cnn": (PerChannelCnn, (3, 8, 8), ["quantize_linear", "dequantize_linear"]),
    "per_channel_sequence": (PerChannelSequence, (4, 9), ["quantize_linear", "dequantize_linear"]),
    "reduced_range": (ReducedRange, (16,), ["quantize_linear", "dequantize_linear"]),
}


def main():
    def body(psrun, work):
        for name, (build, shape, kinds) in MODELS.items():
            # The straight-through gradient is not the derivative of the rounding: torch's float64
            # gradients are the reference, not psrun's central differences.
            check_model(check, psrun, name, build, shape, kinds, work, batch=6, seed=5, opsets=(13, 17),
                        finite_differences=False)

    run_main(__doc__, body)
    check.finish()


if __name__ == "__main__":
    main()
