#!/usr/bin/python3
"""Modules that end in a loss torch 1.13 cannot export (python/psrun_torch_losses.py): each
nn.*Loss below is written by psrun_torch.export() as PyTorch defines it, imported by psrun as a
loss in the graph, and its loss and every parameter's gradient on one batch compared with
PyTorch's in float64 (psrun_torch.check with y None), at opsets 14 and 17:
  regression: MSELoss (mean, and sum over a broadcast target), L1Loss, SmoothL1Loss(beta=0.5),
    HuberLoss(delta=0.7), PoissonNLLLoss (log input, and full with Stirling's term);
  probabilities: BCELoss with per-class weights; CrossEntropyLoss with label_smoothing=0.1 (class
    weights and ignore_index among the labels, and probability targets);
  margins and embeddings: CosineEmbeddingLoss, SoftMarginLoss, MarginRankingLoss,
    HingeEmbeddingLoss, MultiMarginLoss (p = 1 and p = 2 with class weights), TripletMarginLoss
    (with swap);
  entries of tables without a batch axis picked by ids computed at run time (a Gather lowered to
    a one-hot product): a class-balanced loss w[target], a buffer's prior by argmax, a learned
    [C] scale and a [C, 2, 3] table by the labels; a 5000-entry table refused (exit 2).
Every tensor within 1e-4 of torch's (relative to its largest value). Prints one line per check;
exits 1 when one fails, 77 without torch.
Usage: torch_losses_check.py PSRUN [NAME...]"""
import os
import sys

try:
    import numpy as np
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "python"))
sys.path.insert(0, here)
import psrun_torch  # noqa: E402
from torch_compare import Checks  # noqa: E402

N, D, C = 8, 12, 5
TOLERANCE = 1e-4


class WithLoss(nn.Module):
    """A small trunk, then the loss of its outputs against the targets (how(out, target))."""

    def __init__(self, how, width=C):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(D, 16), nn.Tanh(), nn.Linear(16, width))
        self.how = how

    def forward(self, x, target):
        return self.how(self.trunk(x), target)


class PickedWeights(nn.Module):
    """Entries of tables without a batch axis picked by ids computed at run time: a class-balanced
    loss (a constant's weights by the labels, w[target]), a buffer's prior by the argmax of the
    scores, a learned [C] scale and a [C, 2, 3] table by the labels."""

    def __init__(self, classes=C):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(D, 16), nn.Tanh(), nn.Linear(16, classes))
        self.register_buffer("prior", torch.linspace(-1.0, 1.0, classes))
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, classes))
        self.table = nn.Parameter(torch.randn(classes, 2, 3))

    def forward(self, x, target):
        w = torch.tensor([1.0, 2.0, 0.5, 1.5, 3.0])
        o = self.trunk(x)
        o = o * self.scale[target].unsqueeze(1) + self.prior[o.argmax(1)].unsqueeze(1)
        ce = F.cross_entropy(o, target, reduction="none")
        return (w[target] * ce).sum() / w[target].sum() + 0.1 * self.table[target].sum((1, 2)).mean()


def cases(rng):
    """name: (module, target array)."""
    real = rng.standard_normal((N, C)).astype(np.float32)
    signs = np.where(rng.random(N) < 0.5, -1.0, 1.0).astype(np.float32)
    labels = rng.integers(0, C, N).astype(np.int64)
    labels_ignored = labels.copy()
    labels_ignored[[1, 5]] = 3  # class 3 not scored (psrun's label input holds classes only)
    probs = rng.random((N, C)).astype(np.float32)
    weight = torch.tensor([1.0, 2.0, 0.5, 1.5, 1.0])
    out = {
        "picked_weights": (PickedWeights(), labels),
        "mse": (WithLoss(nn.MSELoss()), real),
        "mse_sum_broadcast": (WithLoss(lambda o, t: F.mse_loss(o, t.expand_as(o), reduction="sum")), real[:, :1]),
        "l1": (WithLoss(nn.L1Loss()), real),
        "smooth_l1": (WithLoss(nn.SmoothL1Loss(beta=0.5)), real),
        "huber": (WithLoss(nn.HuberLoss(delta=0.7)), real),
        "poisson": (WithLoss(nn.PoissonNLLLoss()), np.abs(real) * 3),
        "poisson_full": (WithLoss(nn.PoissonNLLLoss(full=True)), np.round(np.abs(real) * 3)),
        "bce": (WithLoss(lambda o, t: nn.BCELoss(weight=weight)(torch.sigmoid(o), t)), probs),
        "ce_smoothing": (WithLoss(nn.CrossEntropyLoss(label_smoothing=0.1)), labels),
        "ce_smoothing_weighted": (WithLoss(nn.CrossEntropyLoss(weight=weight, ignore_index=3, label_smoothing=0.1)),
                                  labels_ignored),
        "ce_smoothing_probs": (WithLoss(nn.CrossEntropyLoss(label_smoothing=0.2)), probs / probs.sum(1, keepdims=True)),
        "soft_margin": (WithLoss(nn.SoftMarginLoss()), np.sign(real)),
        "hinge_embedding": (WithLoss(nn.HingeEmbeddingLoss(margin=0.5)), np.sign(real)),
        "multi_margin": (WithLoss(nn.MultiMarginLoss()), labels),
        "multi_margin_p2": (WithLoss(nn.MultiMarginLoss(p=2, margin=0.8, weight=weight)), labels),
        "cosine_embedding": (WithLoss(lambda o, t: nn.CosineEmbeddingLoss(margin=0.1)(o[:, :3], o[:, 3:], t), 6), signs),
        "margin_ranking": (WithLoss(lambda o, t: nn.MarginRankingLoss(margin=0.2)(o[:, 0], o[:, 1], t), 2), signs),
        "triplet": (WithLoss(lambda o, t: nn.TripletMarginLoss(margin=0.5, swap=True)(o[:, :4], o[:, 4:8], o[:, 8:] + t),
                             12), real[:, :4]),
    }
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    check = Checks()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, D)).astype(np.float32)
    chosen = sys.argv[2:]
    for name, (module, target) in cases(rng).items():
        if chosen and name not in chosen:
            continue
        torch.manual_seed(0)
        for opset in (14, 17):
            try:
                r = psrun_torch.check(module, {"x": x, "target": target}, None, psrun=psrun, opset=opset, verbose=False)
            except Exception as e:  # the export or psrun refused it: the check fails, saying why
                check(f"{name} opset {opset}: exported and checked", False, f"{type(e).__name__}: {str(e)[-400:]}")
                continue
            loss_error = abs(r["loss"] - r["torch_loss"]) / max(abs(r["torch_loss"]), 1e-12)
            check(f"{name} opset {opset}: loss and every gradient = torch's",
                  loss_error <= TOLERANCE and r["worst"][1] <= TOLERANCE
                  and len(r["errors"]) == sum(1 for _ in module.parameters())
                  and not r["missing"] and not r["extra"],
                  f"loss {r['loss']:.6g} vs {r['torch_loss']:.6g}; worst {r['worst'][0]} {r['worst'][1]:.2e}; "
                  f"{len(r['errors'])} tensors, missing {r['missing']}, extra {r['extra']}")
    if not chosen:  # a table too large for a one-hot product: refused, naming the node and the way
        big = WithLoss(lambda o, t: F.cross_entropy(o, t, reduction="none").mul(torch.arange(5000.0)[t * 997]).mean())
        try:
            psrun_torch.check(big, {"x": x, "target": rng.integers(0, C, N)}, None, psrun=psrun, verbose=False)
            check("a 5000-entry table picked by the labels is refused", False, "no exception")
        except RuntimeError as e:
            check("a 5000-entry table picked by the labels is refused, exit 2, naming the Gather and embeddings",
                  "exited 2" in str(e) and "Gather" in str(e) and "5000-entry" in str(e) and "Embedding" in str(e),
                  str(e)[-400:])
    check.finish()


if __name__ == "__main__":
    main()
