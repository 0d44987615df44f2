#!/usr/bin/python3
"""Networks nobody wrote: random graphs of PyTorch modules and calls, each value read by random
later ones, exported by python/psrun_torch.py and checked whole against PyTorch's float64 by
psrun_torch.check() (outputs, loss, every parameter's gradient, tensor by tensor). Three
families, each from a seed:
  - eltwise: a convolution and a batch norm on it, then 4-9 element-wise steps (14 functions, 5
    binary ops) on any earlier values; channels 3, 4, 5, 8, 16 or 17 (padded blocked formats);
  - layers: 4-10 steps of convolutions, depthwise and transposed convolutions, batch, group,
    layer and instance norms, PReLU, pools, bilinear upsampling, a channel concat, softmax over
    channels, where, means and maxima over axes, products and sums;
  - sequences: token ids with padding into an embedding, then 4-10 steps of linear layers,
    layer norm, multi-head attention with a key padding mask, softmax(QK^T)V by matmul, a GRU,
    Conv1d, GLU, an RMS norm, masked_fill, cumsum, flips, chunk and concat, products and sums.
Many values feed several readers, so the engine's buffer plan (in-place outputs, shared
gradients, conversions kept for a backward) is exercised in combinations no hand-written test
lists: psrun once trained abs(c) * sigmoid(c) on a convolution's output with a wrong gradient.
A tensor's error is its largest difference over max(its largest |gradient|, 1e-2 x the network's
largest): a bias before a normalization has a gradient that is zero but for rounding.
Usage: random_graph_models.py PSRUN [WORK_DIR]   (RANDOM_GRAPH_SEEDS=a:b: seeds a..b-1 of each
family instead of 0..24)
"""
import os
import random
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
try:
    import numpy as np
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch_compare import Checks, psrun_torch, run_main
except ImportError:
    sys.exit(77)

OUTPUT_TOLERANCE, GRADIENT_TOLERANCE, FLOOR = 1e-4, 1e-3, 1e-2
CHANNELS = [3, 4, 5, 8, 16, 17]
check = Checks()

UNARY = {"relu": F.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "abs": torch.abs, "neg": torch.neg,
         "gelu": F.gelu, "exp": lambda x: torch.exp(-x.abs()), "square": lambda x: x * x, "elu": F.elu,
         "silu": F.silu, "sin": torch.sin, "hardswish": F.hardswish, "leaky": lambda x: F.leaky_relu(x, 0.1),
         "clamp": lambda x: x.clamp(-0.5, 0.5)}
BINARY = {"add": torch.add, "mul": torch.mul, "sub": torch.sub, "maximum": torch.maximum,
          "div": lambda a, b: a / (b.abs() + 1)}


class Eltwise(nn.Module):
    def __init__(self, r, ch):
        super().__init__()
        self.c0, self.c1, self.bn = nn.Conv2d(3, ch, 3, padding=1), nn.Conv2d(ch, ch, 1, bias=False), nn.BatchNorm2d(ch)
        self.plan, n = [], 2
        for _ in range(r.randint(4, 9)):
            self.plan.append(("u", r.choice(sorted(UNARY)), r.randrange(n)) if r.random() < 0.5 else
                             ("b", r.choice(sorted(BINARY)), r.randrange(n), r.randrange(n)))
            n += 1
        self.fc = nn.Linear(ch * 64, 10)

    def forward(self, x):
        a = self.c0(x)
        vals = [a, self.bn(self.c1(a))]
        for p in self.plan:
            vals.append(UNARY[p[1]](vals[p[2]]) if p[0] == "u" else BINARY[p[1]](vals[p[2]], vals[p[3]]))
        return self.fc((vals[-1] + 0.1 * vals[-2]).flatten(1))


LAYER_STEPS = ["conv", "depthwise", "batch_norm", "group_norm", "prelu", "pool", "upsample", "conv_transpose",
               "concat", "layer_norm", "softmax", "mul", "add", "relu", "swish", "instance_norm", "where", "mean"]


class Layers(nn.Module):
    def __init__(self, r, ch):
        super().__init__()
        self.stem = nn.Conv2d(3, ch, 3, padding=1, bias=False)
        self.mods, self.plan, n = nn.ModuleList(), [], 1
        for _ in range(r.randint(4, 10)):
            k = r.choice(LAYER_STEPS)
            kernel = r.choice([1, 3])
            self.mods.append({"conv": lambda: nn.Conv2d(ch, ch, kernel, padding=kernel // 2),
                              "depthwise": lambda: nn.Conv2d(ch, ch, 3, padding=1, groups=ch),
                              "batch_norm": lambda: nn.BatchNorm2d(ch),
                              "group_norm": lambda: nn.GroupNorm(1 if ch % 2 else 2, ch),
                              "prelu": lambda: nn.PReLU(ch),
                              "conv_transpose": lambda: nn.ConvTranspose2d(ch, ch, 2, stride=2),
                              "concat": lambda: nn.Conv2d(2 * ch, ch, 1),
                              "layer_norm": lambda: nn.LayerNorm(8),
                              "instance_norm": lambda: nn.InstanceNorm2d(ch, affine=True)}.get(k, nn.Identity)())
            self.plan.append((k, r.randrange(n), r.randrange(n)))
            n += 1
        self.fc = nn.Linear(ch * 64, 10)

    def forward(self, x):
        vals = [self.stem(x)]
        for m, (k, a, b) in zip(self.mods, self.plan):
            u, v = vals[a], vals[b]
            if k == "pool":
                o = F.max_pool2d(u, 3, 1, 1)
            elif k == "upsample":
                o = F.interpolate(F.avg_pool2d(u, 2), scale_factor=2, mode="bilinear")
            elif k == "conv_transpose":
                o = m(F.avg_pool2d(u, 2))
            elif k == "concat":
                o = m(torch.cat([u, v], 1))
            elif k == "softmax":
                o = torch.softmax(u, 1) * v
            elif k in ("mul", "add"):
                o = u * v if k == "mul" else u + v
            elif k == "relu":
                o = F.relu(u)
            elif k == "swish":
                o = torch.sigmoid(u) * u
            elif k == "where":
                o = torch.where(u > 0, v, u)
            elif k == "mean":
                o = u - u.mean((2, 3), keepdim=True) + v.amax(1, keepdim=True)
            else:
                o = m(u)
            vals.append(o)
        return self.fc((vals[-1] + 0.5 * vals[len(vals) // 2]).flatten(1))


SEQUENCE_STEPS = ["linear", "layer_norm", "attention", "matmul", "flip", "chunk", "concat", "gelu", "mask",
                  "cumsum", "rms_norm", "glu", "softmax", "mul", "add", "conv1d", "gru", "max"]
T, D, VOCAB = 6, 8, 20


class Sequences(nn.Module):
    def __init__(self, r):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.mods, self.plan, n = nn.ModuleList(), [], 1
        for _ in range(r.randint(4, 10)):
            k = r.choice(SEQUENCE_STEPS)
            self.mods.append({"linear": lambda: nn.Linear(D, D), "layer_norm": lambda: nn.LayerNorm(D),
                              "attention": lambda: nn.MultiheadAttention(D, 2, batch_first=True),
                              "concat": lambda: nn.Linear(2 * D, D), "glu": lambda: nn.Linear(D, 2 * D),
                              "conv1d": lambda: nn.Conv1d(D, D, 3, padding=1),
                              "gru": lambda: nn.GRU(D, D, batch_first=True),
                              "rms_norm": lambda: nn.Linear(D, D, bias=False)}.get(k, nn.Identity)())
            self.plan.append((k, r.randrange(n), r.randrange(n)))
            n += 1
        self.fc = nn.Linear(D, 10)

    def forward(self, ids):
        vals, pad = [self.emb(ids)], ids == 0
        for m, (k, a, b) in zip(self.mods, self.plan):
            u, v = vals[a], vals[b]
            if k in ("linear", "layer_norm"):
                o = m(u)
            elif k == "attention":
                o = m(u, v, v, key_padding_mask=pad, need_weights=False)[0]
            elif k == "matmul":
                o = torch.softmax(u @ v.transpose(1, 2) / 3.0, -1) @ v
            elif k == "flip":
                o = u.transpose(1, 2).flip(2).transpose(1, 2)
            elif k == "chunk":
                x1, x2 = u.chunk(2, -1)
                o = torch.cat([x2, x1 * torch.sigmoid(x2)], -1)
            elif k == "concat":
                o = m(torch.cat([u, v], -1))
            elif k == "gelu":
                o = F.gelu(u)
            elif k == "mask":
                o = u.masked_fill(pad.unsqueeze(-1), 0.0)
            elif k == "cumsum":
                o = torch.cumsum(u, 1) / 3
            elif k == "rms_norm":
                o = m(u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + 1e-6))
            elif k == "glu":
                o = F.glu(m(u), -1)
            elif k == "softmax":
                o = torch.softmax(u, 1) * v
            elif k in ("mul", "add"):
                o = u * v if k == "mul" else u + v
            elif k == "conv1d":
                o = m(u.transpose(1, 2)).transpose(1, 2)
            elif k == "gru":
                o = m(u)[0]
            else:
                o = u.amax(1, keepdim=True) + v
            vals.append(o)
        return self.fc((vals[-1] + 0.5 * vals[len(vals) // 2]).mean(1))


def network(family, seed):
    """(module, batch x, labels y) of `family` for `seed`."""
    r, rng = random.Random(seed), np.random.RandomState(seed)
    torch.manual_seed(seed)
    y = np.arange(4) % 10
    if family == "sequences":
        ids = rng.randint(1, VOCAB, size=(4, T)).astype(np.int64)
        ids[1, 4:], ids[3, 3:] = 0, 0
        return Sequences(r), {"ids": ids}, y
    ch = r.choice(CHANNELS)
    model = Eltwise(r, ch) if family == "eltwise" else Layers(r, ch)
    return model, rng.randn(4, 3, 8, 8).astype(np.float32), y


def body(psrun, work):
    first, last = (int(v) for v in os.environ.get("RANDOM_GRAPH_SEEDS", "0:25").split(":"))
    for family in ("eltwise", "layers", "sequences"):
        for seed in range(first, last):
            model, x, y = network(family, seed)
            what = f"{family} {seed} {[p[:2] for p in model.plan]}"
            try:
                r = psrun_torch.check(model, x, y, psrun=psrun, floor=FLOOR, work=os.path.join(work, "net"),
                                      verbose=False)
            except RuntimeError as e:
                check(what, False, str(e)[-600:])
                continue
            name, worst = r["worst"]
            check(what, r["outputs_error"] <= OUTPUT_TOLERANCE and worst <= GRADIENT_TOLERANCE and not r["missing"]
                  and not r["extra"],
                  f"outputs {r['outputs_error']:.1e}, worst gradient {name} {worst:.1e}, missing {r['missing']}, "
                  f"extra {r['extra']}", always=True)
    check.finish()


if __name__ == "__main__":
    run_main(__doc__, body)
