#!/usr/bin/env python3
"""PyTorch's numbers for test/nn/ops_cross_entropy_test.cpp: the losses and the scores' gradients
of torch.nn.functional.cross_entropy and nll_loss on the fixed inputs below (float32 values, as the
engine holds them, computed in float64). Prints one JSON object per case; the test embeds them
(regenerate with /usr/bin/python3 test/nn/cross_entropy_reference.py after changing a case).

For reduction "none" the gradient is that of sum(loss * r) with the case's r; for "mean" and "sum"
that of the scalar loss."""
import json

import torch
import torch.nn.functional as F

X3x4 = [[0.5, -1.2, 2.0, 0.1], [1.5, 0.3, -0.7, -2.0], [-0.4, 0.9, 0.0, 1.1]]
# N=2, C=3, L=4 (per token).
X2x3x4 = [[[0.2, -0.5, 1.0, 0.7], [1.1, 0.4, -0.3, -1.5], [-0.8, 0.6, 0.9, 0.05]],
          [[0.0, 1.3, -1.1, 0.4], [-0.6, 0.2, 0.8, -0.9], [1.7, -0.2, 0.3, 0.5]]]

CASES = [
    # name, function, scores, labels, kwargs, r (none only)
    ("plain_mean", "cross_entropy", X3x4, [2, 0, 3], {"reduction": "mean"}, None),
    ("plain_sum", "cross_entropy", X3x4, [2, 0, 3], {"reduction": "sum"}, None),
    ("plain_none", "cross_entropy", X3x4, [2, 0, 3], {"reduction": "none"}, [0.5, -1.0, 2.0]),
    ("token_weighted_smoothed_mean", "cross_entropy", X2x3x4, [[0, 2, -100, 1], [1, -100, 0, 2]],
     {"reduction": "mean", "weight": [0.3, 1.5, 0.8], "ignore_index": -100, "label_smoothing": 0.2}, None),
    ("token_weighted_smoothed_none", "cross_entropy", X2x3x4, [[0, 2, -100, 1], [1, -100, 0, 2]],
     {"reduction": "none", "weight": [0.3, 1.5, 0.8], "ignore_index": -100, "label_smoothing": 0.2},
     [[1.0, -0.5, 3.0, 0.25], [2.0, 1.0, -1.5, 0.75]]),
    ("nll_weighted_ignored_mean", "nll_loss", X3x4, [2, 0, 1],
     {"reduction": "mean", "weight": [1.0, 2.0, 0.5, 1.5], "ignore_index": 0}, None),
]


def run(function, scores, labels, kwargs, r):
    x = torch.tensor(scores, dtype=torch.float32).double().requires_grad_(True)
    y = torch.tensor(labels, dtype=torch.int64)
    kw = dict(kwargs)
    if "weight" in kw:
        kw["weight"] = torch.tensor(kw["weight"], dtype=torch.float32).double()
    loss = getattr(F, function)(x, y, **kw)
    objective = (loss * torch.tensor(r, dtype=torch.float32).double()).sum() if r is not None else loss
    objective.backward()
    return loss.detach().flatten().tolist(), x.grad.flatten().tolist()


def main():
    out = {}
    for name, function, scores, labels, kwargs, r in CASES:
        loss, grad = run(function, scores, labels, kwargs, r)
        out[name] = {"loss": loss, "grad": grad}
    # torch returns nan for a mean over positions that are all ignored (psrun: 0).
    every_ignored = F.cross_entropy(torch.tensor(X3x4), torch.tensor([1, 1, 1]), ignore_index=1)
    out["every_ignored_mean_torch"] = str(every_ignored.item())
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
