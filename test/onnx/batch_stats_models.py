#!/usr/bin/python3
"""Statistics of the batch written in forward(), as torch.nn code writes them (a reduction whose
axes include the batch axis but not every axis: the result has no batch axis and broadcasts back
over the batch), end to end through the psrun CLI with test/onnx/torch_compare.py (psrun model
show lists the kinds, psrun model check's outputs, loss and every parameter gradient against
torch in float64, psrun predict against torch's softmax), at opsets 13, 14 and 17:

  - a batch norm written out: the mean and biased variance over (N, H, W), keepdim, a learned
    scale and shift;
  - features centred by the batch mean (x.mean(0), no keepdim) and scaled by the batch's
    largest magnitude (x.abs().amax(0));
  - a mean over (N, T) of a sequence (h.sum((0, 1)) divided by N * T from h.shape);
  - features standardised per example, then by the unbiased variance over the batch
    (torch.var(h, 0, unbiased=True): a division by N - 1).

Like nn.BatchNorm, a data-parallel run computes these over each worker's batch. The layers before
a centring have no bias (its true gradient is zero, which f32 reaches only to rounding).
Prints one line per check; exits 1 when one fails, 77 when torch cannot be imported.
Usage: batch_stats_models.py PSRUN [WORK_DIR]
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


class HandBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 6, 3, bias=False)
        self.g = nn.Parameter(torch.linspace(0.8, 1.3, 6).view(1, 6, 1, 1))
        self.b = nn.Parameter(torch.linspace(-0.1, 0.2, 6).view(1, 6, 1, 1))
        self.head = nn.Linear(6, 10)

    def forward(self, x):
        h = self.c(x)
        m = h.mean((0, 2, 3), keepdim=True)
        v = ((h - m) ** 2).mean((0, 2, 3), keepdim=True)
        return self.head(F.relu((h - m) / torch.sqrt(v + 1e-5) * self.g + self.b).mean((2, 3)))


class BatchScale(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = nn.Linear(16, 12, bias=False), nn.Linear(12, 10)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        return self.head((h - h.mean(0)) / (h.abs().amax(0) + 0.1))


class SequenceBatchMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = nn.Linear(10, 8, bias=False), nn.Linear(8, 10)

    def forward(self, x):  # [N, 6, 10]
        h = self.a(x)
        return self.head((h - h.sum((0, 1)) / (h.shape[0] * h.shape[1])).mean(1))


class BatchVariance(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.head = nn.Linear(16, 12), nn.Linear(12, 10)

    def forward(self, x):
        h = self.a(x)
        h = (h - h.mean(1, keepdim=True)) / (h.std(1, keepdim=True) + 1e-3)
        return self.head(h * torch.rsqrt(torch.var(h, 0, keepdim=True, unbiased=True) + 1.0))


MODELS = {
    "hand_batch_norm": (HandBatchNorm, (3, 8, 8), ["reduce_mean", "sqrt"]),
    "batch_scale": (BatchScale, (16,), ["reduce_mean", "reduce_max"]),
    "sequence_batch_mean": (SequenceBatchMean, (6, 10), ["reduce_sum"]),
    "batch_variance": (BatchVariance, (16,), ["reduce_mean"]),
}


def main():
    def body(psrun, work):
        for name, (build, shape, kinds) in MODELS.items():
            # amax has kinks: psrun model check's own central differences get a coarse bound;
            # torch's gradients are the real check.
            check_model(check, psrun, name, build, shape, kinds, work, batch=6, seed=5, check_tolerance=0.5)
    run_main(__doc__, body)
    check.finish()


if __name__ == "__main__":
    main()
