#!/usr/bin/python3
"""The operators ordinary torch.nn / torch.nn.functional calls export to that psrun imports as
layers of other kinds or as small kinds of their own (workerd/onnx/onnx_lowerings*.cpp,
ReduceProd in onnx_consts_reduce.cpp, negative Slice steps, sin/cos/sign in ops/math.cpp),
end to end through the psrun CLI:

  small torch modules (F.pixel_shuffle / pixel_unshuffle: DepthToSpace CRD / SpaceToDepth;
  x.repeat: Tile (by the batch size: a learned query per example); torch.cumsum: CumSum (a kind of its own); F.normalize: ReduceL2;
  torch.logsumexp: ReduceLogSumExp; torch.atan/tan/asin/acos/floor/round/ceil;
  torch.pow(2.0, x): Pow of a constant base;
  x.norm(p=1): ReduceL1; x.std / x.var: ReduceProd of Shape; torch.prod of activations (zeros
  after a relu); torch.sin/cos/sign; F.celu;
  x.flip and F.cosine_similarity: Slice with step -1; nn.ReflectionPad2d, padding_mode "reflect",
  nn.ReplicationPad1d/2d: Pad in modes reflect and edge; F.pad with a value, nn.ConstantPad1d; x.squeeze(d) after a reflect pad, which
  torch 1.13 writes as an If on a shape (the taken branch is inlined); causal masks built in
  forward() by torch.tril/torch.triu (Trilu of known tensors), tril/triu of activations and of
  trainable matrices (MADE-style weights); x.index_add (a whole-range Slice of the batch axis);
  x.repeat_interleave (Split of known repeat counts); nn.LSTMCell/nn.GRUCell unrolled from zero
  states; F.unfold (Gather by 2-D constant indices); MatMul with a 1-D operand (x @ q, w @ x); x.scatter /
  scatter_add with indices from the data (ScatterElements, opset 16's reduction); dilated max pools; nn.utils.weight_norm: the weight
  computed from parameters (a scalar one with dim=None); F.interpolate bilinear with align_corners,
  bicubic, nearest at a non-integer factor: Resize as interpolation matrices), exported in training mode without
  constant folding at opsets 13, 14 and 17, batch axis dynamic:
    - `psrun model show F.onnx` exits 0 and lists the expected kinds;
    - `psrun model check F.onnx --input X --labels Y --gradients G.json` gives torch's forward
      outputs, loss and every parameter's gradient in float64 within TOLERANCE (relative to the
      tensor's largest value);
    - `psrun predict --onnx F.onnx` gives torch's softmax within TOLERANCE;
  ONNX's Sum, Mean, Max, Min of one to three inputs, written by onnx.helper, against the same sums
  in torch; an opset-18 graph by onnx.helper (every Reduce* with axes as an input, DepthToSpace DCR,
  CumSum exclusive and reverse, Tile of a 3-D value, Sin, Cos, Sign) against numpy; GatherElements
  with negative constant indices and with indices from an int input, against numpy;
  an If whose condition is computed from the data (a torch.jit.script'ed `if h.mean() > 0:`):
  both branches and a where, against torch on a batch taking each branch; a scripted
  `for t in range(x.size(1))` (a Loop whose trip count is a shape): its body unrolled, a list
  appended in it and stacked (ONNX sequences); the refusals (exit 2,
  the message checked): Tile of the batch axis, Tile of a 16-row weight by the batch size; an eval-mode export
  (torch.onnx.export's defaults: batch norm folded into the conv) imports with a warning, and so
  does torch 1.x's wrong export of padding_mode="circular" (pytorch/pytorch#86690); a module's
  buffers (register_buffer) import as constants when listed in psrun.frozen (python/psrun_torch.py);
  x.detach() in a straight-through quantizer, written by python/psrun_torch.py as psrun::StopGradient;
  batch norm statistics kept through the export, and a warning for BatchNorm(momentum=None).

Prints one line per check; exits 1 when one fails, 77 when torch or onnx cannot be imported.
Usage: lowered_ops_models.py PSRUN [WORK_DIR]   (LOWERED_MODELS=a,b: a subset)
"""
import math
import os
import re
import sys
import tempfile
from typing import List

try:
    import numpy as np
    import onnx
    import onnx.numpy_helper
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from psrun_cli import predict, run  # noqa: E402
from torch_compare import Checks, check_model, export  # noqa: E402

TOLERANCE = 1e-4
BATCH = 6
check = Checks()


class Vec(nn.Module):
    """x [N, 16] -> a [N, 8] -> f(self, a) flattened -> linear to 10 classes."""

    def __init__(self, f, width):
        super().__init__()
        self.f = f
        self.a, self.b, self.head = nn.Linear(16, 8), nn.Linear(16, 8), nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.f(self, x).flatten(1))


class Shuffle(nn.Module):
    """x [N, 4, 6, 6]: conv, pixel_shuffle(2) to [N, 1, 12, 12], conv, pixel_unshuffle(2) back."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.head = nn.Conv2d(4, 4, 1), nn.Conv2d(1, 1, 3, padding=1), nn.Linear(4 * 36 + 144, 10)

    def forward(self, x):
        up = self.c2(F.pixel_shuffle(self.c1(x), 2))
        down = F.pixel_unshuffle(up, 2)
        return self.head(torch.cat([down.flatten(1), up.flatten(1)], 1))


class Interp(nn.Module):
    """x [N, 3, 5, 6] (or [N, 3, *spatial]): conv 1x1, F.interpolate(**kw) (every mode and
    coordinate transform oneDNN's resampling cannot compute, and volumes: a matmul per resized
    axis), tanh, flatten, linear."""

    def __init__(self, spatial=(5, 6), **kw):
        super().__init__()
        self.kw = kw
        self.conv = (nn.Conv3d if len(spatial) == 3 else nn.Conv2d)(3, 2, 1)
        with torch.no_grad():
            size = F.interpolate(torch.zeros(1, 2, *spatial), **kw).shape
        self.head = nn.Linear(int(np.prod(size[1:])), 10)

    def forward(self, x):
        return self.head(torch.tanh(F.interpolate(self.conv(x), **self.kw)).flatten(1))


def three(v):
    return v.view(v.shape[0], 2, 4)


class Pads(nn.Module):
    """x [N, 2, 5, 6]: a conv with padding_mode "reflect", nn.ReflectionPad2d, nn.ReplicationPad2d
    (uneven), a row-wise nn.ReplicationPad1d on a [N, C, L] view, flatten, linear."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect")
        self.reflect, self.edge = nn.ReflectionPad2d((2, 1, 0, 3)), nn.ReplicationPad2d((0, 2, 1, 1))
        self.rows = nn.ReplicationPad1d((3, 1))
        self.head = nn.Linear(3 * 10 * 11 + 3 * 30 + 3 * 5 * 10, 10)

    def forward(self, x):
        h = torch.tanh(self.conv(x))                          # [N, 3, 5, 6]
        a = self.edge(self.reflect(h))                        # [N, 3, 10, 11]
        b = self.rows(h.flatten(2)[:, :, :26]).sum(2, keepdim=True)  # [N, 3, 30] -> [N, 3, 1]
        c = self.rows(h.transpose(2, 3).flatten(2)[:, :, :6]).view(x.shape[0], 3, 10)
        return self.head(torch.cat([a.flatten(1), b.expand(-1, -1, 30).flatten(1), c.repeat(1, 1, 5).flatten(1)], 1))


class Crop(nn.Module):
    """x [N, 2, 5, 6]: conv, nn.ZeroPad2d((-1, 0, 2, -2)) (crops the left column and the bottom two
    rows, pads two on top), tanh, F.pad(h, (-1, -2, -1, 0)) (crops only), flatten, linear."""

    def __init__(self):
        super().__init__()
        self.conv, self.pad = nn.Conv2d(2, 3, 3, padding=1), nn.ZeroPad2d((-1, 0, 2, -2))
        self.head = nn.Linear(3 * 4 * 2, 10)

    def forward(self, x):
        h = torch.tanh(self.pad(self.conv(x)))                 # [N, 3, 5, 5]
        return self.head(F.pad(h, (-1, -2, -1, 0)).flatten(1))  # [N, 3, 4, 2]


class TutorialPositions(nn.Module):
    """x [N, 16] as 4 tokens [L=4, N, 4] (sequence first), a linear to 256, plus the PyTorch
    tutorial's PositionalEncoding: a [5000, 1, 256] buffer (1.28M values, past a constant's 2^20)
    read as pe[:L]; mean over L, linear. The slice of the frozen buffer folds at import."""

    def __init__(self):
        super().__init__()
        position = torch.arange(5000).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, 256, 2) * (-math.log(10000.0) / 256))
        pe = torch.zeros(5000, 1, 256)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)
        self.embed, self.head = nn.Linear(4, 256), nn.Linear(256, 10)

    def forward(self, x):
        t = self.embed(x.view(x.shape[0], 4, 4).transpose(0, 1))
        return self.head((t + self.pe[:t.size(0)]).mean(0))


class Sparsemax(nn.Module):
    """x [N, 16]: sparsemax (TabNet's attention; Martins & Astudillo 2016) of a linear's 8 scores:
    sort, cumsum, the support size k (an integer count of a mask) and cumsum.gather(1, k - 1)."""

    def __init__(self):
        super().__init__()
        self.score, self.head = nn.Linear(16, 8), nn.Linear(8, 10)

    def forward(self, x):
        z = self.score(x)
        zs, _ = z.sort(dim=1, descending=True)
        cs = zs.cumsum(1)
        support = (1 + torch.arange(1, 9, dtype=z.dtype) * zs) > cs
        k = support.sum(1, keepdim=True)
        tau = (cs.gather(1, k - 1) - 1) / k.to(z.dtype)
        return self.head(torch.clamp(z - tau, min=0))


class UnetUp(nn.Module):
    """x [N, 3, 5, 7]: a U-Net up step as milesial/Pytorch-UNet writes it: the upsampled map
    (conv stride 2, transposed conv: [N, 2, 6, 8]) padded by the size difference to the skip's
    [5, 7] (here negative: a crop), halves by torch.div(rounding_mode="floor") (written out as
    Div, Mod, Less, Xor, And, Where, all folded at import); concat with the skip, conv, linear.
    `//` instead (floor_div=False) is what torch 1.13 exports as a truncating Div: psrun warns."""

    def __init__(self, floor_div=True):
        super().__init__()
        self.floor_div = floor_div
        self.down, self.up = nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.ConvTranspose2d(4, 2, 2, stride=2)
        self.conv, self.head = nn.Conv2d(5, 3, 3, padding=1), nn.Linear(105, 10)

    def forward(self, x):
        up = self.up(torch.relu(self.down(x)))
        dy, dx = x.size()[2] - up.size()[2], x.size()[3] - up.size()[3]
        half = (lambda d: torch.div(d, 2, rounding_mode="floor")) if self.floor_div else (lambda d: d // 2)
        up = F.pad(up, [half(dx), dx - half(dx), half(dy), dy - half(dy)])
        return self.head(self.conv(torch.cat([x, up], dim=1)).flatten(1))


class PositionsResized(nn.Module):
    """x [N, 3, 5, 7]: a 1x1 conv plus a learned position table [1, 4, 3, 3] bicubically resized
    to the 5 x 7 grid (ViT/DeiT/DINO fine-tuned at another resolution: F.interpolate of a
    parameter), flatten, linear."""

    def __init__(self):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, 4, 3, 3) * 0.2)
        self.embed, self.head = nn.Conv2d(3, 4, 1), nn.Linear(140, 10)

    def forward(self, x):
        pos = F.interpolate(self.pos, size=(5, 7), mode="bicubic", align_corners=False)
        return self.head((self.embed(x) + pos).flatten(1))


class SqueezeIf(nn.Module):
    """x [N, 12]: reflect-padded rows on a [N, 1, 12] view; x.squeeze(2) (a no-op) and x.squeeze(1)
    after the pad, whose shape torch 1.13's exporter has lost: each is written as an ONNX If on
    Shape(p)[d] == 1 (the first takes its else branch, an Identity; the second its then branch,
    the Squeeze); a conv over the first, a linear head over both."""

    def __init__(self):
        super().__init__()
        self.pad, self.conv, self.head = nn.ReflectionPad1d(2), nn.Conv1d(1, 3, 3), nn.Linear(16 + 42, 10)

    def forward(self, x):
        p = self.pad(x.unsqueeze(1))
        c = torch.tanh(self.conv(p.squeeze(2)))
        return self.head(torch.cat([p.squeeze(1), c.flatten(1)], 1))


class CausalTrilu(nn.Module):
    """x [N, 6, 4]: attention whose causal masks are built in forward() as GPT code often does,
    torch.tril(torch.ones(L, L)) == 0 filled with -inf and torch.triu(torch.full(.., -inf), 1)
    added (ONNX Trilu of known tensors, evaluated at import), plus torch.tril/triu of the
    activations themselves (Trilu of graph values: a where with a constant mask)."""

    def __init__(self):
        super().__init__()
        self.emb, self.q, self.k = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 8, bias=False)
        self.head = nn.Linear(2 * 6 * 8 + 2 * 36, 10)

    def forward(self, x):
        h = self.emb(x)
        length = h.shape[1]
        scores = self.q(h) @ self.k(h).transpose(1, 2) / 8 ** 0.5
        tril = scores.masked_fill(torch.tril(torch.ones(length, length)) == 0, float("-inf")).softmax(-1)
        triu = (scores + torch.triu(torch.full((length, length), float("-inf")), diagonal=1)).softmax(-1)
        return self.head(torch.cat([(tril @ h).flatten(1), (triu @ h).flatten(1),
                                    torch.tril(scores, -1).flatten(1), torch.triu(scores, 2).flatten(1)], 1))


class TriangularWeights(nn.Module):
    """x [N, 16]: autoregressive (MADE-style) linear layers whose weights are torch.tril/triu of
    a trainable matrix (Trilu of a parameter, no batch axis: a where with a constant mask, the
    dropped entries get no gradient)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 8)
        self.lower, self.upper = nn.Parameter(torch.randn(8, 8) * 0.3), nn.Parameter(torch.randn(8, 8) * 0.3)
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        return self.head(torch.cat([F.linear(h, torch.tril(self.lower)), h @ torch.triu(self.upper, 1)], 1))


class IndexAdd(nn.Module):
    """x [N, 16]: rows of a [N, 3, 8] value added into a zero [N, 4, 8] at constant row indices
    with x.index_add (torch writes a whole-range Slice of the batch axis, ScatterElements, Add)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 24)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        rows = self.a(x).reshape(x.shape[0], 3, 8)
        out = rows.new_zeros(x.shape[0], 4, 8).index_add(1, torch.tensor([3, 0, 1]), rows)
        return self.head(out.flatten(1))


class MatVec(nn.Module):
    """x [N, 16]: a learned query vector scoring each of 4 rows (x [N, 4, 4] @ q [4]: attention
    pooling), a vector times a batch of matrices (w [4] @ x [N, 4, 4]), a linear head."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.head = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(8, 10)
        self.q, self.w = nn.Parameter(torch.randn(4) * 0.5), nn.Parameter(torch.randn(4) * 0.5)

    def forward(self, x):
        rows = self.a(x).view(-1, 4, 4)
        scores = torch.softmax(rows @ self.q, dim=1)  # [N, 4]
        return self.head(torch.cat([scores, self.w @ self.b(x).view(-1, 4, 4)], 1))


class Scatter(nn.Module):
    """x [N, 16]: indices computed from the data (x[:, :2] > 0: an int value [N, 2]); a one-hot
    written by torch.zeros_like(h).scatter(1, idx, 1.0), h.scatter(1, idx[:, :1], v) (a slice of
    the int indices) and h.scatter_add(1, idx, u) (ONNX ScatterElements, reductions none and add),
    a linear head."""

    def __init__(self):
        super().__init__()
        self.a, self.head = nn.Linear(16, 5), nn.Linear(15, 10)

    def forward(self, x):
        h = self.a(x)
        idx = (x[:, :2] > 0).long() * 2 + torch.tensor([0, 1])
        one_hot = torch.zeros_like(h).scatter(1, idx, 1.0)
        return self.head(torch.cat([h * one_hot, h.scatter(1, idx[:, :1], h[:, 2:3] * 3),
                                    h.scatter_add(1, idx, torch.tanh(h[:, :2]))], 1))


class Cells(nn.Module):
    """x [N, 5, 4]: an nn.LSTMCell and an nn.GRUCell unrolled over the 5 steps from zero states
    x.new_zeros(N, H) (the first step's Gemm reads a known all-zero A), a linear head."""

    def __init__(self):
        super().__init__()
        self.lstm, self.gru, self.head = nn.LSTMCell(4, 12), nn.GRUCell(12, 12), nn.Linear(12, 10)

    def forward(self, x):
        h = c = g = x.new_zeros(x.shape[0], 12)
        for t in range(x.shape[1]):
            h, c = self.lstm(x[:, t], (h, c))
            g = self.gru(h, g)
        return self.head(g)


class ConvLstm(nn.Module):
    """x [N, 3, 5, 6]: a ConvLSTM cell unrolled twice from h = x.new_zeros(N, 4, 5, 6) and
    c = torch.zeros_like(h) (the Shape of a batch-sized fill), gates by one conv, a linear head."""

    def __init__(self):
        super().__init__()
        self.gates, self.head = nn.Conv2d(3 + 4, 16, 3, padding=1), nn.Linear(120, 10)

    def forward(self, x):
        h = x.new_zeros(x.shape[0], 4, 5, 6)
        c = torch.zeros_like(h)
        for _ in range(2):
            i, f, o, g = self.gates(torch.cat([x, h], 1)).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return self.head(h.flatten(1))


class Unfold(nn.Module):
    """x [N, 3, 8, 8]: F.unfold (im2col: a Gather by [blocks, kernel] index grids on each spatial
    axis, transposed and reshaped to [N, C * k * k, L]) with overlapping padded 3x3 patches at
    stride 2 and 2x2 ones at stride 2, each a linear layer over its patches, a head."""

    def __init__(self):
        super().__init__()
        self.c, self.p3, self.p2 = nn.Conv2d(3, 2, 1), nn.Linear(18, 4), nn.Linear(8, 4)
        self.head = nn.Linear(4 * 16 + 4 * 16, 10)

    def forward(self, x):
        h = torch.tanh(self.c(x))
        a = self.p3(F.unfold(h, 3, padding=1, stride=2).transpose(1, 2))  # [N, 16, 4]
        b = self.p2(F.unfold(h, 2, stride=2).transpose(1, 2))             # [N, 16, 4]
        return self.head(torch.cat([a.flatten(1), b.flatten(1)], 1))


class Variadic(nn.Module):
    """ONNX's Sum, Mean, Max and Min of one to three inputs (Mean's third a broadcast parameter): no
    torch export writes them, other exporters do; variadic_export writes the graph from these
    parameters, and this forward is its reference."""
    def __init__(self):
        super().__init__()
        self.w0, self.w1, self.w2 = (nn.Parameter(torch.randn(6, 5) * 0.4) for _ in range(3))
        self.c = nn.Parameter(torch.randn(5) * 0.3)
        self.head = nn.Linear(25, 10)

    def forward(self, x):
        m0, m1, m2 = x @ self.w0, x @ self.w1, x @ self.w2
        parts = [m0 + m1 + m2, (m0 + m1 + self.c) / 3, torch.maximum(torch.maximum(m0, m1), m2),
                 torch.minimum(torch.minimum(m2, m1), m0), m1]
        return self.head(torch.cat(parts, 1))


def variadic_export(model, x, path, opset):
    from onnx import TensorProto, helper, numpy_helper
    node = helper.make_node
    nodes = [node("MatMul", ["x", w], [f"m{i}"]) for i, w in enumerate(("w0", "w1", "w2"))]
    nodes += [node("Sum", ["m0", "m1", "m2"], ["sum"]), node("Mean", ["m0", "m1", "c"], ["mean"]),
              node("Max", ["m0", "m1", "m2"], ["max"]), node("Min", ["m2", "m1", "m0"], ["min"]),
              node("Sum", ["m1"], ["one"]), node("Concat", ["sum", "mean", "max", "min", "one"], ["cat"], axis=1),
              node("Gemm", ["cat", "head.weight", "head.bias"], ["logits"], transB=1)]
    weights = [numpy_helper.from_array(p.detach().numpy(), n) for n, p in model.named_parameters()]
    graph = helper.make_graph(nodes, "variadic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)


# name -> (builder, input shape, kinds expected in `psrun model show`[, opsets])
class StraightThrough(nn.Module):
    """x [N, 16]: a straight-through quantizer h + (round(2h) / 2 - h).detach() (VQ-VAE, QAT) and
    a term of a detached activation: torch's gradient passes the quantizer as the identity and
    stops at the detach; psrun_torch.export writes each detach() as psrun::StopGradient."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 8), nn.Linear(8, 10)

    def forward(self, x):
        h = self.a(x)
        q = h + (torch.round(h * 2) / 2 - h).detach()
        return self.b(q) * (1 + torch.tanh(h.detach()).mean(1, keepdim=True))


class BatchTile(nn.Module):
    """x [N, 7, 8]: learned queries [1, 2, 8] repeated over the batch (q.repeat(x.shape[0], 1, 1),
    as a class token or a Perceiver's latents are often written) attending over x, beside a learned
    [1, 1, 4] repeated (N, 2, 1): Tile by the batch size (an expand there) and by a constant."""

    def __init__(self):
        super().__init__()
        self.q, self.b = nn.Parameter(torch.randn(1, 2, 8)), nn.Parameter(torch.randn(1, 1, 4))
        self.head = nn.Linear(2 * 8 + 2 * 4, 10)

    def forward(self, x):
        q = self.q.repeat(x.shape[0], 1, 1)
        att = torch.softmax(q @ x.transpose(1, 2) / 8 ** 0.5, -1)
        return self.head(torch.cat([(att @ x).flatten(1), self.b.repeat(x.shape[0], 2, 1).flatten(1)], 1))


MODELS = {
    "pixel_shuffle": (Shuffle, (4, 6, 6), ["transpose", "reshape"]),
    "tile": (lambda: Vec(lambda s, x: torch.cat([s.a(x).repeat(1, 2), three(s.b(x)).repeat(1, 3, 2).flatten(1)], 1),
                         16 + 48), (16,), ["concat"]),
    "batch_tile": (BatchTile, (7, 8), ["expand", "concat"]),
    "cumsum": (lambda: Vec(lambda s, x: torch.cat([torch.cumsum(s.a(x), 1), torch.cumsum(three(s.b(x)), 1).flatten(1),
                                                   torch.cumsum(three(s.b(x)), -1).flatten(1)], 1), 24), (16,),
               ["cumsum"]),
    "normalize": (lambda: Vec(lambda s, x: torch.cat([F.normalize(s.a(x), dim=1),
                                                      torch.logsumexp(three(s.b(x)), dim=2),
                                                      torch.logsumexp(s.a(x), dim=1, keepdim=True),
                                                      s.b(x).norm(p=1, dim=1, keepdim=True)], 1), 12), (16,),
                  ["reduce_sum", "sqrt", "reduce_max", "abs"]),
    "std_var": (lambda: Vec(lambda s, x: torch.cat([three(s.a(x)).std(dim=2), three(s.b(x)).var(dim=1),
                                                    s.a(x).var(dim=1, unbiased=False).unsqueeze(1)], 1), 7), (16,),
                ["reduce_mean", "sqrt"]),
    "prod": (lambda: Vec(lambda s, x: torch.cat([torch.prod(three(s.a(x)), dim=2), s.b(x).prod(1, keepdim=True),
                                                 F.relu(s.b(x)).prod(1, keepdim=True)], 1), 4), (16,),
             ["reduce_prod", "relu"]),
    "sin_cos_sign": (lambda: Vec(lambda s, x: torch.sin(s.a(x)) + torch.cos(s.b(x)) + s.a(x) * torch.sign(s.b(x)), 8),
                     (16,), ["sin", "cos", "sign"]),
    "trig_round": (lambda: Vec(lambda s, x: torch.cat([torch.atan(s.a(x)), torch.tan(s.a(x) * 0.3),
                                                     torch.asin(torch.tanh(s.b(x)) * 0.9),
                                                     torch.acos(torch.tanh(s.a(x)) * 0.9),
                                                     s.b(x) + torch.floor(s.a(x)) + torch.round(s.a(x) * 3) - torch.ceil(s.b(x))],
                                                    1), 40), (16,), ["atan", "tan", "asin", "acos", "floor", "round", "ceil"]),
    # torch.pow(2.0, x) and 0.5 ** x: a constant base, a value exponent (exp(x ln c)).
    "pow_base": (lambda: Vec(lambda s, x: torch.cat([torch.pow(2.0, s.a(x)), 0.5 ** s.b(x)], 1), 16), (16,),
                 ["exp", "mul"]),
    "celu": (lambda: Vec(lambda s, x: torch.cat([F.celu(s.a(x)), F.celu(s.b(x), alpha=0.5)], 1), 16), (16,), ["elu"]),
    "flip": (lambda: Vec(lambda s, x: torch.cat([s.a(x).flip(1), three(s.b(x)).flip(1, 2).flatten(1),
                                                 F.cosine_similarity(s.a(x), s.b(x).flip(1), dim=1).unsqueeze(1)], 1),
                         17), (16,), ["gather"]),
    "pads": (Pads, (2, 5, 6), ["gather"]),
    # F.pad with a constant value (nn.ConstantPad1d): a pad kind filling with it.
    "pad_value": (lambda: Vec(lambda s, x: torch.cat([F.pad(three(s.a(x)), (1, 2), value=0.5).flatten(1),
                                                      nn.ConstantPad1d((2, 0), -1.25)(s.b(x))], 1), 14 + 10),
                  (16,), ["pad"]),
    # Negative pads crop (a U-Net cropping its skip to the decoder's size; nn.ZeroPad2d with
    # negative sizes), beside positive pads on another axis: a slice, then a pad.
    "crop": (Crop, (2, 5, 6), ["slice", "pad"]),
    "unfold": (Unfold, (3, 8, 8), ["gather", "reshape", "transpose"]),
    "matvec": (MatVec, (16,), ["matmul", "squeeze"]),
    # torch.addmm with alpha and beta (a Gemm that scales both terms), and with a C per example.
    "addmm": (lambda: Vec(lambda s, x: torch.cat([torch.addmm(s.a.bias, x, s.a.weight.t(), beta=0.5, alpha=2.0),
                                                  torch.addmm(s.b(x), torch.tanh(s.a(x)), s.a.weight[:, :8].t())], 1),
                          16), (16,), ["dense", "mul", "add"]),
    "scatter": (Scatter, (16,), ["equal", "reduce_max"], (16, 17)),
    # nn.MaxPool2d / MaxPool1d with dilation 2 (oneDNN's pooling_v2).
    "maxpool_dilated": (lambda: nn.Sequential(nn.Conv2d(2, 3, 1), nn.MaxPool2d(2, 1, dilation=2), nn.Flatten(1, 2),
                                              nn.MaxPool1d(3, 2, padding=1, dilation=2), nn.Flatten(),
                                              nn.Linear(3 * 6 * 2, 10)), (2, 8, 8), ["max_pool"]),
    "rnn_cells": (Cells, (5, 4), ["dense", "sigmoid"]),
    "conv_lstm": (ConvLstm, (3, 5, 6), ["conv2d", "tanh"]),
    "tutorial_positions": (TutorialPositions, (16,), ["constant", "add"], (17,)),
    "sparsemax": (Sparsemax, (16,), ["top_k", "cumsum", "reduce_sum", "cast"]),
    "unet_pad": (UnetUp, (3, 5, 7), ["conv_transpose", "slice", "concat"]),
    "positions_resized": (PositionsResized, (3, 5, 7), ["parameter", "matmul"]),
    "squeeze_if": (SqueezeIf, (12,), ["gather", "squeeze", "conv"]),
    # ONNX Trilu is opset 14's: torch cannot write torch.tril at 13.
    "causal_trilu": (CausalTrilu, (6, 4), ["where", "softmax"], (14, 17)),
    "triangular_weights": (TriangularWeights, (16,), ["where"], (14, 17)),
    "index_add": (IndexAdd, (16,), ["equal", "reduce_sum"]),
    # x.repeat_interleave(2, dim=1): Split of its known repeat counts, Expand, Reshape, Concat.
    "repeat_interleave": (lambda: Vec(lambda s, x: torch.cat([s.a(x).repeat_interleave(2, dim=1),
                                                            three(s.b(x)).repeat_interleave(3, dim=2).flatten(1)], 1),
                                      16 + 24), (16,), ["expand", "concat"]),
    # weight = g * v / |v| computed in the graph from two initializers; dim=None's g is a scalar.
    "weight_norm": (lambda: nn.Sequential(nn.utils.weight_norm(nn.Linear(16, 8)), nn.Tanh(),
                                          nn.utils.weight_norm(nn.Linear(8, 10), dim=None)), (16,), ["parameter"]),
    "interp_align_corners": (lambda: Interp(scale_factor=2, mode="bilinear", align_corners=True), (3, 5, 6),
                             ["matmul", "constant", "transpose"]),
    "interp_align_sizes": (lambda: Interp(size=(7, 4), mode="bilinear", align_corners=True), (3, 5, 6), ["matmul"]),
    "interp_bicubic": (lambda: Interp(size=(9, 11), mode="bicubic", align_corners=False), (3, 5, 6), ["matmul"]),
    "interp_bicubic_corners": (lambda: Interp(scale_factor=2, mode="bicubic", align_corners=True), (3, 5, 6),
                               ["matmul"]),
    "interp_nearest_odd": (lambda: Interp(size=(8, 9), mode="nearest"), (3, 5, 6), ["matmul"]),
    "interp_trilinear": (lambda: Interp(spatial=(3, 4, 5), size=(4, 6, 7), mode="trilinear", align_corners=False),
                         (3, 3, 4, 5), ["matmul"]),
}


def opset18(psrun, work):
    """Opset 18 by onnx.helper on x [N, 4, 6, 6]: the Reduce* lowerings with axes inputs, ReduceProd,
    DepthToSpace DCR, SpaceToDepth, CumSum exclusive + reverse, Tile, Sin, Cos, Sign; against numpy."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    ints = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)  # noqa: E731
    parts = ["l1", "l2", "ss", "lse", "d2s", "s2d", "cs", "tile", "trig", "prod"]
    widths = [4, 4, 4, 4, 144, 144, 144, 288, 144, 36]
    w = rng.standard_normal((10, sum(widths))).astype(np.float32) * 0.1
    nodes = [
        helper.make_node("ReduceL1", ["x", "a23"], ["l1"], keepdims=0),               # [N, 4]
        helper.make_node("ReduceL2", ["x", "a23"], ["l2"], keepdims=0),
        helper.make_node("ReduceSumSquare", ["x", "a23"], ["ss"], keepdims=0),
        helper.make_node("ReduceLogSumExp", ["x", "a23"], ["lse"], keepdims=0),
        helper.make_node("ReduceProd", ["x", "a1"], ["prod"], keepdims=0),             # [N, 6, 6]
        helper.make_node("DepthToSpace", ["x"], ["d2s"], blocksize=2, mode="DCR"),    # [N, 1, 12, 12]
        helper.make_node("SpaceToDepth", ["d2s"], ["s2d"], blocksize=2),              # [N, 4, 6, 6]
        helper.make_node("CumSum", ["x", "a1"], ["cs"], exclusive=1, reverse=1),
        helper.make_node("Tile", ["x", "reps"], ["tile"]),                            # [N, 4, 6, 12]
        helper.make_node("Sin", ["x"], ["sin"]), helper.make_node("Cos", ["x"], ["cos"]),
        helper.make_node("Sign", ["x"], ["sg"]), helper.make_node("Add", ["sin", "cos"], ["sc"]),
        helper.make_node("Add", ["sc", "sg"], ["trig"]),
    ]
    for p in parts:
        nodes.append(helper.make_node("Flatten", [p], [p + "_f"], axis=1))
    nodes += [helper.make_node("Concat", [p + "_f" for p in parts], ["cat"], axis=1),
              helper.make_node("Gemm", ["cat", "w"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "opset18", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 6, 6])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              [numpy_helper.from_array(w, "w"), ints("a23", [2, 3]), ints("a1", [1]),
                               ints("reps", [1, 1, 1, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    path = os.path.join(work, "lowered_opset18.onnx")
    onnx.save(model, path)
    show = run([psrun, "model", "show", path])
    if not check("opset18: psrun model show exits 0", show.returncode == 0, show.stdout[-1500:]):
        return
    x = rng.standard_normal((5, 4, 6, 6)).astype(np.float32)
    x[0, 0, 0, 0] = 0.0  # Sign of 0
    n = x.shape[0]
    d2s = x.reshape(n, 2, 2, 1, 6, 6).transpose(0, 3, 4, 1, 5, 2).reshape(n, 1, 12, 12)
    s2d = d2s.reshape(n, 1, 6, 2, 6, 2).transpose(0, 3, 5, 1, 2, 4).reshape(n, 4, 6, 6)
    cs = np.flip(np.cumsum(np.flip(x, 1), 1), 1) - x
    got_parts = [np.abs(x).sum((2, 3)), np.sqrt((x * x).sum((2, 3))), (x * x).sum((2, 3)),
                 np.log(np.exp(x).sum((2, 3))), d2s, s2d, cs, np.tile(x, (1, 1, 1, 2)),
                 np.sin(x) + np.cos(x) + np.sign(x), x.prod(1)]
    cat = np.concatenate([p.reshape(n, -1) for p in got_parts], 1)
    logits = cat @ w.T
    want = np.exp(logits - logits.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    got, err = predict(psrun, path, x, work, "lowered_opset18")
    if check("opset18: psrun predict exits 0", got is not None, err):
        diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
        check("opset18: psrun predict = numpy", diff <= TOLERANCE, f"largest difference {diff:.2e}", True)


def gather_elements(psrun, work):
    """GatherElements by onnx.helper on x [N, 3, 5] along axis 2 with constant indices [3, 2]
    holding negative ones (ONNX's from the end, which torch.gather never writes) and along
    axis 1 with the indices [N, 2, 5] an int input (computed by the data); against numpy."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    idx = np.array([[0, -1], [4, -5], [-2, 2]], dtype=np.int64)
    w = rng.standard_normal((10, 3 * 2 + 2 * 5)).astype(np.float32) * 0.3
    nodes = [helper.make_node("Shape", ["x"], ["x_shape"]),
             helper.make_node("Gather", ["x_shape", "zero"], ["n"]),
             helper.make_node("Concat", ["n", "tail"], ["shape"], axis=0),
             helper.make_node("Expand", ["idx", "shape"], ["idx_n"]),
             helper.make_node("GatherElements", ["x", "idx_n"], ["a"], axis=2),
             helper.make_node("GatherElements", ["x", "rows"], ["b"], axis=-2),
             helper.make_node("Flatten", ["a"], ["af"], axis=1), helper.make_node("Flatten", ["b"], ["bf"], axis=1),
             helper.make_node("Concat", ["af", "bf"], ["cat"], axis=1),
             helper.make_node("Gemm", ["cat", "w"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "gather_elements",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 5]),
                               helper.make_tensor_value_info("rows", TensorProto.INT64, ["N", 2, 5])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(idx[None], "idx"),
                               numpy_helper.from_array(np.array([0], dtype=np.int64), "zero"),
                               numpy_helper.from_array(np.array([3, 2], dtype=np.int64), "tail")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(work, "gather_elements.onnx")
    onnx.save(model, path)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    rows = rng.integers(0, 3, (4, 2, 5)).astype(np.int64)
    xf, rf, out = (os.path.join(work, f"gather_elements.{n}.npy") for n in ("x", "rows", "out"))
    np.save(xf, x)
    np.save(rf, rows)
    r = run([psrun, "predict", "--onnx", path, "--images", xf, "--input", f"rows={rf}", "--output", out])
    if not check("gather_elements: psrun predict exits 0", r.returncode == 0, r.stdout[-800:]):
        return
    a = np.take_along_axis(x, np.broadcast_to(np.where(idx < 0, idx + 5, idx), (4, 3, 2)), 2)
    b = np.take_along_axis(x, rows, 1)
    logits = np.concatenate([a.reshape(4, -1), b.reshape(4, -1)], 1) @ w.T
    want = np.exp(logits - logits.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    got = np.load(out)
    diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
    check("gather_elements: psrun predict = numpy", diff <= TOLERANCE, f"largest difference {diff:.2e}", True)


class Refused(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.f, self.a = f, nn.Linear(16, 16)

    def forward(self, x):
        return self.f(self, self.a(x))


REFUSALS = {
    "tile_batch": (lambda s, h: h.repeat(2, 1), "repeats the batch axis 2 times"),
    "tile_rows_by_batch": (lambda s, h: h + s.a.weight.repeat(h.shape[0], 1).view(h.shape[0], 16, 16).mean(1),
                           "by the batch size, only an axis of size 1 can be"),
}


def squeeze_if_written_as_if(work):
    """The squeeze_if exports hold the two If nodes the test is for (else it tests nothing new)."""
    for opset in (13, 14, 17):
        path = os.path.join(work, f"squeeze_if_{opset}.onnx")
        if os.path.exists(path):
            ifs = [n for n in onnx.load(path).graph.node if n.op_type == "If"]
            check(f"squeeze_if_{opset}: torch wrote two If nodes", len(ifs) == 2, f"{len(ifs)} If nodes")


class MeanGate(nn.Module):
    """`if h.mean() > 0:` on the data: a branch for the whole batch (scripted, an ONNX If)."""

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if h.mean() > 0:
            return torch.relu(h) * 2.0
        else:
            return torch.tanh(h) - 1.0


class DataIf(nn.Module):
    """x [N, 16]: a linear, MeanGate, a linear to 10 classes; torch.jit.script'ed as a whole."""

    def __init__(self):
        super().__init__()
        self.a, self.gate, self.head = nn.Linear(16, 12), MeanGate(), nn.Linear(12, 10)

    def forward(self, x):
        return self.head(self.gate(self.a(x)))


class ScriptedSteps(nn.Module):
    """x [N, 5, 4]: a recurrent cell over `for t in range(x.size(1))` (scripted: an ONNX Loop whose
    trip count is Shape(x)[1]), carrying h and a sum weighted by the iteration number t + 1."""

    def __init__(self):
        super().__init__()
        self.i, self.r, self.head = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(16, 10)

    def forward(self, x):
        h = x.new_zeros(x.size(0), 8)
        total = x.new_zeros(x.size(0), 8)
        for t in range(x.size(1)):
            h = torch.tanh(self.i(x[:, t]) + self.r(h))
            total = total + h * (t + 1)
        return self.head(torch.cat([h, total], 1))


class ScriptedList(nn.Module):
    """x [N, 5, 4]: the same cell appending h to a Python list (ONNX sequences: SequenceEmpty, a
    SequenceInsert per iteration), then torch.stack over time and a max (ConcatFromSequence with
    new_axis), the last element (SequenceAt -1), torch.cat along features divided by len()
    (SequenceLength)."""

    def __init__(self):
        super().__init__()
        self.i, self.r, self.head = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8 + 8 + 40, 10)

    def forward(self, x):
        h = x.new_zeros(x.size(0), 8)
        outs: List[torch.Tensor] = []
        for t in range(x.size(1)):
            h = torch.tanh(self.i(x[:, t]) + self.r(h))
            outs.append(h)
        return self.head(torch.cat([torch.stack(outs, 1).amax(1), outs[-1], torch.cat(outs, 1) / len(outs)], 1))


def export_scripted(model, x, path, opset):
    """torch.onnx.export of a ScriptModule (its control flow kept as If), as export() otherwise."""
    torch.onnx.export(model, x, path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})


def scripted_loop(psrun, work):
    """A Loop over range(x.size(1)) imports as five copies of its body (the cell's tensors shared),
    with a Python list appended in it (ONNX sequences): outputs, loss and every gradient against
    torch."""
    check_model(check, psrun, "scripted_loop", lambda: torch.jit.script(ScriptedSteps()), (5, 4),
                ["dense", "tanh"], work, batch=BATCH, seed=3, opsets=(14, 17), finite_differences=False,
                exporter=export_scripted)
    check_model(check, psrun, "scripted_list", lambda: torch.jit.script(ScriptedList()), (5, 4),
                ["dense", "tanh", "concat"], work, batch=BATCH, seed=3, opsets=(14, 17), finite_differences=False,
                exporter=export_scripted)


def data_if(psrun, work):
    """An If whose condition is computed from the data (a scripted `if h.mean() > 0:`) imports as
    both branches and a where of the condition: outputs, loss and every gradient against torch on
    a batch that takes the then branch and on one that takes the else branch."""
    torch.manual_seed(1)
    first = DataIf().a
    for tag, shift in (("data_if_then", 2.0), ("data_if_else", -2.0)):
        x = np.random.default_rng(3).standard_normal((BATCH, 16)).astype(np.float32) + shift
        with torch.no_grad():
            mean = float(first(torch.from_numpy(x)).mean())
        if not check(f"{tag}: torch takes the {tag[8:]} branch", (mean > 0) == (shift > 0), f"mean {mean:.3f}"):
            continue
        check_model(check, psrun, tag, lambda: torch.jit.script(DataIf()), (16,), ["where", "relu", "tanh"], work,
                    batch=BATCH, seed=3, opsets=(14, 17), finite_differences=False, data=x, exporter=export_scripted)


def refusals(psrun, work):
    for name, (f, want) in REFUSALS.items():
        path = os.path.join(work, f"refused_{name}.onnx")
        export(Refused(f), torch.zeros(BATCH, 16), path, 17)
        r = run([psrun, "model", "show", path])
        check(f"refused {name}: exit 2 naming why", r.returncode == 2 and want in r.stdout,
              f"exit {r.returncode}: {r.stdout.strip()[-300:]}", True)


def eval_mode_export(psrun, work):
    """torch.onnx.export's defaults (eval mode, constant folding) fold a BatchNorm2d into the
    Conv before it: psrun imports the file and warns, naming the folded weight; a training-mode
    export of the same module imports without a warning and keeps its batch norm."""
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Dropout(0.2), torch.nn.Linear(4 * 6 * 6, 10))
    x = torch.zeros(1, 1, 6, 6)
    default, trained = os.path.join(work, "eval_mode.onnx"), os.path.join(work, "training_mode.onnx")
    torch.onnx.export(model, x, default)
    export(model.train(), x, trained, 14)
    r = run([psrun, "model", "show", default])
    check("an eval-mode export imports, warning that its convolution weight was folded",
          r.returncode == 0 and "1 convolution weight (onnx::Conv_" in r.stdout and "eval-mode export" in r.stdout
          and "batch_norm" not in r.stdout, r.stdout[-1500:])
    r = run([psrun, "model", "show", trained])
    check("... and a training-mode export keeps its batch norm, without the warning",
          r.returncode == 0 and "batch_norm" in r.stdout and "warning" not in r.stdout, r.stdout[-1500:])


def circular_pad_export(psrun, work):
    """torch.onnx before PyTorch 2.0 writes padding_mode="circular" as a Concat of the wrong
    slices (pytorch/pytorch#86690): the file imports (psrun trains what it says) with a warning
    naming the Concat; a reflect-padded conv gets none."""
    buggy = int(torch.__version__.split(".")[0]) < 2
    for mode, warned in (("circular", buggy), ("reflect", False)):
        path = os.path.join(work, f"pad_{mode}.onnx")
        export(nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, padding_mode=mode), nn.Flatten(), nn.Linear(27, 10)),
               torch.zeros(2, 2, 3, 3), path, 13)
        r = run([psrun, "model", "show", path])
        said = "pads circularly" in r.stdout and "86690" in r.stdout
        check(f"padding_mode={mode}: imports{', with the exporter-bug warning' if warned else ', no warning'}",
              r.returncode == 0 and said == warned, r.stdout[-800:])


class SinusoidalEncoder(nn.Module):
    """x [N, 16] as 4 tokens of 4: a sinusoidal position table and a fixed mixing matrix kept as
    buffers (register_buffer), the way transformers keep them, between two linear layers."""

    def __init__(self):
        super().__init__()
        position = torch.arange(4).float()[:, None] / 10000 ** (torch.arange(0, 8, 2).float() / 8)
        self.register_buffer("pe", torch.cat([position.sin(), position.cos()], 1))
        self.register_buffer("mix", torch.randn(8, 8) * 0.3)
        self.a, self.b = nn.Linear(4, 8), nn.Linear(32, 10)

    def forward(self, x):
        h = self.a(x.reshape(-1, 4, 4)) + self.pe
        return self.b(torch.tanh(h @ self.mix).flatten(1))


def buffers_frozen(psrun, work):
    """Buffers: exported by python/psrun_torch.py they are listed in psrun.frozen and import as
    frozen parameters (the parameters psrun trains are torch's: 370 of them, not 370 + 32 + 64), and the
    gradients are torch's (check_model, whose export is that helper); a bare torch.onnx.export
    cannot tell them from parameters."""
    torch.manual_seed(1)
    model = SinusoidalEncoder()
    x = torch.zeros(2, 16)
    params = sum(p.numel() for p in model.parameters())
    for tag, frozen in (("helper", True), ("bare", False)):
        path = os.path.join(work, f"buffers_{tag}.onnx")
        if frozen:
            export(model, x, path, 17)
        else:
            torch.onnx.export(model.train(), x, path, opset_version=17, training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, input_names=["x"], dynamic_axes={"x": {0: "N"}})
        r = run([psrun, "model", "show", path])
        total = re.search(r"total: ([0-9,]+) parameters", r.stdout)
        count = int(total.group(1).replace(",", "")) if total else -1
        want = params if frozen else params + 32 + 64
        check(f"buffers ({tag} export): psrun trains {want} values", r.returncode == 0 and count == want,
              f"{count} parameters; " + r.stdout[-400:])
    check_model(check, psrun, "buffers", SinusoidalEncoder, (16,), ["parameter"], work, batch=BATCH, seed=5,
                opsets=(13, 17))
    # A frozen buffer read whole (random features [16, 70000], past a constant's 2^20 values): a
    # frozen parameter, state nothing writes (frozen_models.py trains one through psd).
    features = nn.Sequential(nn.Linear(16, 16))
    features.register_buffer("projection", torch.randn(16, 70000))
    features.forward = lambda x: torch.cos(features[0](x) @ features.projection)[:, :10]
    path = os.path.join(work, "buffers_large.onnx")
    export(features, torch.zeros(2, 16), path, 17)
    r = run([psrun, "model", "show", path])
    check("a frozen buffer of 1,120,000 values read whole: state, not trained", r.returncode == 0 and
          "total: 272 parameters" in r.stdout and "state: 1,120,000 values" in r.stdout, r.stdout[-600:])


def truncating_division_export(psrun, work):
    """torch 1.13 exports `a // b` of sizes as ONNX's truncating Div, not PyTorch's floor: psrun
    computes the file and warns, naming the Div, when one truncates a negative quotient at
    import; torch.div(rounding_mode="floor") (unet_pad) exports the correction and gets none."""
    for floor_div in (False, True):
        torch.manual_seed(1)
        path = os.path.join(work, f"unet_pad_floor_{floor_div}.onnx")
        export(UnetUp(floor_div), torch.zeros(2, 3, 5, 7), path, 17)
        r = run([psrun, "model", "show", path])
        warned = "the integer division -1 / 2 truncates to 0 as ONNX says" in r.stdout
        check(f"U-Net padding by {'torch.div(floor)' if floor_div else '//'}: imports, "
              f"{'no warning' if floor_div else 'warning about the truncating Div'}",
              r.returncode == 0 and warned != floor_div, r.stdout[-800:])


def batch_norm_export(psrun, work):
    """torch.onnx's training-mode export runs the forward, moving the running statistics towards
    the example batch's and writing the moved values: python/psrun_torch.py keeps the module's
    and writes those from before. BatchNorm(momentum=None) is written as momentum 0, which psrun
    reads as the last batch's statistics alone: it warns; momentum=0.1 does not."""
    for momentum in (None, 0.1):
        torch.manual_seed(1)
        model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4, momentum=momentum), nn.ReLU(),
                              nn.Flatten(), nn.Linear(120, 10))
        path = os.path.join(work, f"bn_momentum_{momentum}.onnx")
        export(model, torch.randn(4, 3, 5, 6) + 3.0, path, 17)
        stats = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer
                 if "running" in t.name}
        kept = float(np.abs(model[1].running_mean).max()) == 0.0 and float(np.abs(model[1].running_var - 1).max()) == 0.0
        written = len(stats) == 2 and all(float(np.abs(v - (0.0 if "mean" in k else 1.0)).max()) == 0.0
                                          for k, v in stats.items())
        check(f"BatchNorm(momentum={momentum}) export: the module's statistics kept, the file's from before",
              kept and written, f"{stats}")
        r = run([psrun, "model", "show", path])
        warned = "has momentum 0" in r.stdout
        check(f"BatchNorm(momentum={momentum}): imports{', warning' if momentum is None else ', no warning'}",
              r.returncode == 0 and warned == (momentum is None), r.stdout[-600:])


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    only = os.environ.get("LOWERED_MODELS")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = sys.argv[2] if len(sys.argv) == 3 else tmp
        os.makedirs(work, exist_ok=True)
        for name, (build, shape, kinds, *opsets) in MODELS.items():
            if not only or name in only.split(","):
                check_model(check, psrun, name, build, shape, kinds, work, batch=BATCH, seed=5,
                            opsets=opsets[0] if opsets else (13, 14, 17))
        if not only or "straight_through" in only.split(","):
            # Central differences measure the derivative, which a straight-through estimator is
            # not on purpose: psrun model check skips them (and says so); torch is the reference.
            check_model(check, psrun, "straight_through", StraightThrough, (16,), ["stop_gradient", "round"], work,
                        batch=BATCH, seed=5, finite_differences=False)
        if not only or "variadic" in only.split(","):
            check_model(check, psrun, "variadic", Variadic, (6,), ["maximum", "minimum"], work, batch=BATCH, seed=5,
                        opsets=(13, 17), exporter=variadic_export)
        if not only or "squeeze_if" in only.split(","):
            squeeze_if_written_as_if(work)
        if not only or "opset18" in only.split(","):
            opset18(psrun, work)
        if not only or "gather_elements" in only.split(","):
            gather_elements(psrun, work)
        if not only or "data_if" in only.split(","):
            data_if(psrun, work)
        if not only or "scripted_loop" in only.split(","):
            scripted_loop(psrun, work)
        if not only or "refusals" in only.split(","):
            refusals(psrun, work)
            eval_mode_export(psrun, work)
            circular_pad_export(psrun, work)
            buffers_frozen(psrun, work)
            batch_norm_export(psrun, work)
            truncating_division_export(psrun, work)
    check.finish()


if __name__ == "__main__":
    main()
