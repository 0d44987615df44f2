#!/usr/bin/python3
"""bench/criteo_data.py's models in PyTorch (--model dlrm, dcn or wdl: DIR/<model>.json's DLRM,
DCN-v2 or wide & deep), trained on the same data and recipe.

Same layers, sizes, initial-value distributions (dense: Glorot uniform weights, zero biases, as
psrun's defaults; tables: the json's uniform ranges), interaction (the 351 pairwise dots of the
27 vectors, strictly lower triangle, row-major, after the bottom MLP's output), loss (mean binary
cross-entropy on the logit), batch order (a fresh permutation per epoch) and optimizer settings.

Variants (--variant):
  dense       nn.Embedding tables with dense gradients, one torch.optim optimizer for everything
  sparse      nn.Embedding(sparse=True) tables under torch.optim.SparseAdam (--optimizer adam only;
              lazy Adam as psd's rows are) or plain SGD/Adagrad, which take sparse gradients
  bag         nn.EmbeddingBag(mode="sum") with offsets, sparse gradients: the form TorchRec and
              the DLRM reference use

Prints one JSON line: test AUC and log loss after --steps, examples/s over the training steps
(timed after the first 20), torch's thread count and the variant.

Usage: torch_dlrm.py DIR --steps N [--model dlrm|dcn|wdl] [--batch-size 256] [--optimizer adam|adagrad|sgd]
                     [--learning-rate 0.001] [--variant dense|sparse|bag] [--seed 1] [--threads T]
"""
import argparse
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn

from roc_auc import auc  # bench/roc_auc.py, beside this script

FIELDS = 26


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        lin = nn.Linear(sizes[i], sizes[i + 1])
        nn.init.xavier_uniform_(lin.weight)
        nn.init.zeros_(lin.bias)
        layers += [lin, nn.ReLU()]
    return layers


def linear(i, o):
    lin = nn.Linear(i, o)
    nn.init.xavier_uniform_(lin.weight)
    nn.init.zeros_(lin.bias)
    return lin


class Tables(nn.Module):
    """One table per field: nn.Embedding (dense or sparse gradients) or nn.EmbeddingBag with offsets."""

    def __init__(self, rows, dim, variant):
        super().__init__()
        self.bag = variant == "bag"
        make = (lambda v: nn.EmbeddingBag(v, dim, mode="sum", sparse=True)) if self.bag else \
            (lambda v: nn.Embedding(v, dim, sparse=variant == "sparse"))
        self.tables = nn.ModuleList([make(v) for v in rows])
        for v, t in zip(rows, self.tables):
            nn.init.uniform_(t.weight, -(1 / v) ** 0.5, (1 / v) ** 0.5)

    def forward(self, ids):  # [B, 26] -> 26 x [B, dim]
        if self.bag:
            offsets = torch.arange(ids.shape[0])
            return [t(ids[:, f], offsets) for f, t in enumerate(self.tables)]
        return [t(ids[:, f]) for f, t in enumerate(self.tables)]


class Dlrm(nn.Module):
    def __init__(self, rows, dim, bottom, top, variant):
        super().__init__()
        self.bottom = nn.Sequential(*mlp([13] + bottom + [dim]))
        self.tables = Tables(rows, dim, variant)
        self.top = nn.Sequential(*mlp([dim + (FIELDS + 1) * FIELDS // 2] + top + [1])[:-1])  # no ReLU on the logit
        n = FIELDS + 1
        self.li, self.lj = zip(*[(i, j) for i in range(n) for j in range(i)])

    def forward(self, dense, ids):
        x = self.bottom(dense)
        t = torch.stack([x] + self.tables(ids), dim=1)  # [B, 27, D]
        z = torch.bmm(t, t.transpose(1, 2))
        return self.top(torch.cat([x, z[:, self.li, self.lj]], dim=1))


class Dcn(nn.Module):
    """DCN-v2, stacked, as criteo_data.py's dcn.json."""

    def __init__(self, rows, dim, top, variant, cross=3):
        super().__init__()
        self.tables = Tables(rows, dim, variant)
        width = 13 + FIELDS * dim
        self.cross = nn.ModuleList([linear(width, width) for _ in range(cross)])
        self.top = nn.Sequential(*mlp([width] + top + [1])[:-1])

    def forward(self, dense, ids):
        x0 = torch.cat([dense] + self.tables(ids), dim=1)
        x = x0
        for layer in self.cross:
            x = x0 * layer(x) + x
        return self.top(x)


class Wdl(nn.Module):
    """Wide & deep, as criteo_data.py's wdl.json: each table's last column is the field's wide weight."""

    def __init__(self, rows, dim, top, variant):
        super().__init__()
        self.dim = dim
        self.tables = Tables(rows, dim + 1, variant)
        self.wide_dense = linear(13, 1)
        self.deep = nn.Sequential(*mlp([13 + FIELDS * dim] + top + [1])[:-1])

    def forward(self, dense, ids):
        e = torch.stack(self.tables(ids), dim=1)  # [B, 26, D + 1]
        wide = e[:, :, self.dim].sum(dim=1, keepdim=True) + self.wide_dense(dense)
        return wide + self.deep(torch.cat([dense, e[:, :, :self.dim].flatten(1)], dim=1))


def load(d, split):
    dense = torch.log1p(torch.from_numpy(np.load(os.path.join(d, f"{split}_dense.npy"))))  # as the graphs do
    ids = torch.from_numpy(np.concatenate([np.load(os.path.join(d, f"{split}_c{f}.npy")) for f in range(FIELDS)], axis=1))
    y = torch.from_numpy(np.load(os.path.join(d, f"{split}_y.npy")))
    return dense, ids, y


def optimizers(model, a):
    tables = list(model.tables.parameters())
    rest = [p for n, p in model.named_parameters() if not n.startswith("tables.")]
    make = {"adam": torch.optim.Adam, "adagrad": torch.optim.Adagrad, "sgd": torch.optim.SGD}[a.optimizer]
    if a.variant == "dense":
        return [make(model.parameters(), lr=a.learning_rate)]
    if a.optimizer == "adam":
        return [torch.optim.Adam(rest, lr=a.learning_rate), torch.optim.SparseAdam(tables, lr=a.learning_rate)]
    return [make(rest, lr=a.learning_rate), make(tables, lr=a.learning_rate)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--optimizer", default="adam", choices=["adam", "adagrad", "sgd"])
    ap.add_argument("--learning-rate", type=float, default=0.001)
    ap.add_argument("--variant", default="dense", choices=["dense", "sparse", "bag"])
    ap.add_argument("--model", default="dlrm", choices=["dlrm", "dcn", "wdl"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.steps < 1 or a.batch_size < 1 or not a.learning_rate > 0:
        ap.error("--steps and --batch-size must be >= 1 and --learning-rate > 0")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rows = json.load(open(os.path.join(a.dir, "planted.json")))["rows"]
    dense, ids, y = load(a.dir, "train")
    t_dense, t_ids, t_y = load(a.dir, "test")
    layers = json.load(open(os.path.join(a.dir, f"{a.model}.json")))["layers"]
    dim = next(layer["dim"] for layer in layers if layer["kind"] == "embedding") - (a.model == "wdl")
    widths = {p: [l["units"] for l in layers if l["kind"] == "dense" and l["name"].startswith(p)] for p in ("bot", "top")}
    model = {"dlrm": lambda: Dlrm(rows, dim, widths["bot"][:-1], widths["top"], a.variant),
             "dcn": lambda: Dcn(rows, dim, widths["top"], a.variant),
             "wdl": lambda: Wdl(rows, dim, widths["top"], a.variant)}[a.model]()
    opts = optimizers(model, a)
    loss_fn = nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(a.seed)
    order, pos, start = torch.randperm(len(y), generator=gen), 0, None
    for step in range(a.steps):
        if step == 20:
            start = time.perf_counter()
        if pos + a.batch_size > len(y):
            order, pos = torch.randperm(len(y), generator=gen), 0
        b = order[pos:pos + a.batch_size]
        pos += a.batch_size
        for o in opts:
            o.zero_grad()
        loss = loss_fn(model(dense[b], ids[b]), y[b])
        loss.backward()
        for o in opts:
            o.step()
    elapsed = time.perf_counter() - start if start is not None else float("nan")
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(t_dense[i:i + 4096], t_ids[i:i + 4096]) for i in range(0, len(t_y), 4096)])
        test_loss = float(loss_fn(logits, t_y))
    print(json.dumps({"model": a.model, "variant": a.variant, "optimizer": a.optimizer, "steps": a.steps, "batch_size": a.batch_size,
                      "test_auc": auc(logits[:, 0].numpy(), t_y[:, 0].numpy()), "test_loss": test_loss,
                      "examples_per_s": (a.steps - 20) * a.batch_size / elapsed if a.steps > 20 else None,
                      "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
