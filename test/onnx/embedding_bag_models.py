#!/usr/bin/python3
"""nn.EmbeddingBag as torch.onnx writes it (a Loop over the bags, workerd/onnx/onnx_embedding_bag.cpp),
imported as an embedding and a reduce over each row of [N, L] ids, checked whole against PyTorch:

  bags       two tables over two id inputs, mode "mean" and "max", beside dense features (three
             inputs), a linear head
  weighted   mode "sum" with per_sample_weights (a float input [N, L]) and a plain nn.Embedding
             sharing nothing
  computed   mode "sum" with per_sample_weights computed in the graph (sigmoid of a linear layer of
             dense features: the Loop's body reads a value only it reads, and its gradient flows)

At opsets 14 and 17: `psrun model check F.onnx --input ... --labels y --gradients G` gives torch's
outputs, loss and every parameter's gradient in float64 within TOLERANCE (relative to the tensor's
largest value). Refused, exit 2 naming the node: ids with offsets (1-D ids, bags of sizes the data
decides) and a Loop of any other form (torch.jit.script of a Python loop).

Prints one line per check; exits 1 when one fails, 77 without torch.
Usage: embedding_bag_models.py PSRUN [WORK_DIR]
"""
import json
import os
import sys

try:
    import numpy as np
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from psrun_cli import run  # noqa: E402
from torch_compare import Checks, compare_with_torch, run_main  # noqa: E402

TOLERANCE = 1e-4
BATCH = 6
check = Checks()


class Bags(nn.Module):
    def __init__(self):
        super().__init__()
        self.users, self.items = nn.EmbeddingBag(30, 6, mode="mean"), nn.EmbeddingBag(40, 5, mode="max")
        self.dense, self.head = nn.Linear(3, 4), nn.Linear(6 + 5 + 4, 10)

    def forward(self, user_ids, item_ids, features):
        return self.head(torch.cat([self.users(user_ids), self.items(item_ids), torch.tanh(self.dense(features))], 1))


class Weighted(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag, self.emb, self.head = nn.EmbeddingBag(30, 6, mode="sum"), nn.Embedding(30, 2), nn.Linear(6 + 8, 10)

    def forward(self, ids, weights):
        return self.head(torch.cat([self.bag(ids, per_sample_weights=weights), self.emb(ids).flatten(1)], 1))


class Computed(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag, self.w, self.head = nn.EmbeddingBag(30, 6, mode="sum"), nn.Linear(3, 4), nn.Linear(6, 10)

    def forward(self, ids, features):
        return self.head(self.bag(ids, per_sample_weights=torch.sigmoid(self.w(features))))


def inputs_of(name, rng):
    if name == "computed":
        return {"ids": rng.integers(0, 30, (BATCH, 4)), "features": rng.standard_normal((BATCH, 3)).astype(np.float32)}
    if name == "bags":
        return {"user_ids": rng.integers(0, 30, (BATCH, 4)), "item_ids": rng.integers(0, 40, (BATCH, 3)),
                "features": rng.standard_normal((BATCH, 3)).astype(np.float32)}
    return {"ids": rng.integers(0, 30, (BATCH, 4)), "weights": rng.random((BATCH, 4)).astype(np.float32)}


def export(model, inputs, path, opset):
    names = list(inputs)
    torch.onnx.export(model, tuple(torch.from_numpy(v) for v in inputs.values()), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, input_names=names,
                      output_names=["logits"], dynamic_axes={**{n: {0: "N"} for n in names}, "logits": {0: "N"}})


def gradients(psrun, name, build, work):
    rng = np.random.default_rng(7)
    inputs = inputs_of(name, rng)
    y = rng.integers(0, 10, BATCH).astype(np.int64)
    files = []
    for k, (n, v) in enumerate(inputs.items()):
        f = os.path.join(work, f"{name}.{n}.npy")
        np.save(f, v)
        files += ["--input", (f"{n}=" if k else "") + f]
    np.save(os.path.join(work, f"{name}.y.npy"), y)
    torch.manual_seed(3)
    model = build()
    for opset in (14, 17):
        tag = f"{name}_{opset}"
        path = os.path.join(work, tag + ".onnx")
        export(model.train(), inputs, path, opset)
        grads_path = os.path.join(work, tag + ".grads.json")
        r = run([psrun, "model", "check", path, *files, "--labels", os.path.join(work, f"{name}.y.npy"),
                 "--gradients", grads_path, "--json"], 300)
        if not check(f"{tag}: psrun model check exits 0", r.returncode == 0 and os.path.exists(grads_path),
                     r.stdout[-800:]):
            continue
        mine = json.load(open(grads_path))
        model.double().zero_grad()
        logits = model(*(torch.from_numpy(v.astype(np.float64) if v.dtype.kind == "f" else v)
                         for v in inputs.values()))
        loss = F.cross_entropy(logits, torch.from_numpy(y))
        loss.backward()
        grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters() if p.grad is not None}
        model.float()
        compare_with_torch(check, tag, mine, logits.detach().numpy(), float(loss), grads, TOLERANCE, 0.0)


class Offsets(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag, self.head = nn.EmbeddingBag(30, 6), nn.Linear(6, 10)

    def forward(self, ids, offsets):
        return self.head(self.bag(ids, offsets))


class Scripted(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)

    def forward(self, x):
        h = x
        for _ in range(int(x.sum().item() > 0) + 1):  # scripted: a Loop the data decides
            h = torch.tanh(self.a(h))
        return h


def refusals(psrun, work):
    path = os.path.join(work, "offsets.onnx")
    torch.onnx.export(Offsets(), (torch.arange(12), torch.tensor([0, 5, 9])), path, opset_version=17,
                      input_names=["ids", "offsets"], dynamic_axes={"ids": {0: "T"}, "offsets": {0: "N"}})
    r = run([psrun, "model", "show", path])
    check("refused: ids with offsets, exit 2 naming why", r.returncode == 2 and "Loop" in r.stdout and
          ("offsets" in r.stdout or "rank" in r.stdout or "[N, ...]" in r.stdout), r.stdout[-600:], True)
    path = os.path.join(work, "scripted.onnx")
    torch.onnx.export(torch.jit.script(Scripted()), (torch.ones(2, 4),), path, opset_version=17, input_names=["x"],
                      dynamic_axes={"x": {0: "N"}})
    r = run([psrun, "model", "show", path])
    check("refused: a scripted loop, exit 2 naming the Loop", r.returncode == 2 and "(Loop)" in r.stdout,
          r.stdout[-600:], True)


def main():
    def body(psrun, work):
        gradients(psrun, "bags", Bags, work)
        gradients(psrun, "weighted", Weighted, work)
        gradients(psrun, "computed", Computed, work)
        refusals(psrun, work)
    run_main(__doc__, body)
    check.finish()


if __name__ == "__main__":
    main()
