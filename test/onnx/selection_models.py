#!/usr/bin/python3
"""Selection by value and integer arithmetic on ids, as torch.nn code writes them, end to end
through the psrun CLI with test/onnx/torch_compare.py (psrun model show lists the kinds, psrun
model check's outputs, loss and every parameter gradient against torch in float64, psrun
predict against torch's softmax), at opsets 13, 14 and 17:

  - a mixture-of-experts layer routing each example to its top-2 experts (torch.topk of the
    gate's logits, a softmax over the two, the experts' outputs gathered by the indices);
  - torch.sort (TopK of the whole axis), torch.topk smallest-first, k-max pooling over a
    Conv1d's time axis (by value, and in time order: the indices sorted);
  - x.argmax(1) into F.one_hot, x.argmin(1, keepdim=True) into torch.gather;
  - raw ids hashed into buckets in the model (`ids % 13`, torch.fmod of negative ids,
    `ids // 4`: integer Mod and Div) feeding nn.Embedding; ids clamped into a table
    (ids.clamp(0, 7): an integer Clip), torch.where and torch.maximum of integer ids;
  - float remainders: `x % 0.7` (torch writes floor arithmetic) and torch.fmod of two
    activations (Mod fmod=1: psrun lowers it), gradients to both;
  - slice assignment in forward() (`h[:, 0] = 0`, `h[:, :, 2] = h[:, :, 3] * 2`, a new_zeros
    buffer filled by `out[:, 1:5] = h`: ScatterND with index tuples from Range(0, N)),
    advanced indexing `h[torch.arange(n), h.argmax(1)]` (a Gather of a flattened value by
    computed rows) and torch.diagonal (GatherND, batch_dims 1);
  - masks as NaN-guarding code writes them: torch.nan_to_num of a log (IsNaN, IsInf, And),
    torch.isnan, `m1 | m2`, `m1 ^ m2`, torch.where(c, 1.0, 0.0) (torch 1.13 makes that double:
    Casts to double of the head's weights and bias);
and by onnx.helper: TopK (largest 0, sorted 0) at opset 11 and EyeLike (k 1) of a known shape
against numpy, and ArgMax with select_last_index 1 refused with exit 2, naming the node.

Prints one line per check; exits 1 when one fails, 77 when torch or onnx cannot be imported.
Usage: selection_models.py PSRUN [WORK_DIR]   (SELECTION_MODELS=a,b: a subset)
"""
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import torch
    from onnx import TensorProto, helper, numpy_helper
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from psrun_cli import predict, run  # noqa: E402
from torch_compare import Checks, check_model  # noqa: E402

check = Checks()


class Experts(nn.Module):
    """x [N, 16]: a gate scores 4 experts; each example mixes its top 2 (softmax of their
    scores) of the experts' [N, 4, 8] outputs, gathered by the top-k indices."""

    def __init__(self):
        super().__init__()
        self.gate, self.experts, self.head = nn.Linear(16, 4), nn.Linear(16, 32), nn.Linear(8, 10)

    def forward(self, x):
        top, where = torch.topk(self.gate(x), 2, dim=1)
        weights = torch.softmax(top, dim=1)
        outs = torch.tanh(self.experts(x)).view(-1, 4, 8)
        chosen = torch.gather(outs, 1, where.unsqueeze(2).expand(-1, 2, 8))
        return self.head((weights.unsqueeze(2) * chosen).sum(1))


class Vec(nn.Module):
    """x [N, 16] -> a, b [N, 8] -> f(self, x) flattened -> linear to 10 classes."""

    def __init__(self, f, width):
        super().__init__()
        self.f = f
        self.a, self.b, self.head = nn.Linear(16, 8), nn.Linear(16, 8), nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.f(self, x).flatten(1))


class KMax(nn.Module):
    """x [N, 4, 12]: a Conv1d, the 3 largest activations of each channel over time, by value
    and in their time order (DCNN's k-max pooling: the indices sorted, a TopK of integers)."""

    def __init__(self):
        super().__init__()
        self.conv, self.head = nn.Conv1d(4, 6, 3), nn.Linear(36, 10)

    def forward(self, x):
        h = self.conv(x)
        top = torch.topk(h, 3, dim=2)
        in_order = torch.gather(h, 2, top.indices.sort(dim=2).values)
        return self.head(torch.cat([top.values, in_order], 2).flatten(1))


class HashedIds(nn.Module):
    """x [N, 16]: integer ids made from the data ((x > 0) running counts times 7, plus 3 where
    x > 0.5: 0..45), bucketed three ways (% 13, fmod(ids - 20, 7) + 6, // 4) into embeddings."""

    def __init__(self):
        super().__init__()
        self.mod, self.fmod, self.div = nn.Embedding(13, 4), nn.Embedding(13, 4), nn.Embedding(12, 4)
        self.head = nn.Linear(3 * 6 * 4, 10)

    def forward(self, x):
        ids = (x[:, :6] > 0).long().cumsum(1) * 7 + (x[:, 6:12] > 0.5).long() * 3
        parts = [self.mod(ids % 13), self.fmod(torch.fmod(ids - 20, 7) + 6), self.div(ids // 4)]
        return self.head(torch.cat(parts, 2).flatten(1))


class ClampedIds(nn.Module):
    """x [N, 16]: ids computed from the data ((x * 4).long(): -12..12) clamped into a table
    (ids.clamp(0, 7): an integer Clip), padded ones sent to row 0 (torch.where(ids > 5, ids, 0):
    an integer Where), and the elementwise larger of two id columns (torch.maximum of integers),
    each read by an embedding."""

    def __init__(self):
        super().__init__()
        self.clamped, self.masked, self.larger = nn.Embedding(8, 4), nn.Embedding(8, 4), nn.Embedding(8, 4)
        self.head = nn.Linear(3 * 6 * 4, 10)

    def forward(self, x):
        ids = (x[:, :6] * 4).long().clamp(0, 7)
        other = (x[:, 6:12] * 4).long().clamp(min=0).clamp(max=7)
        parts = [self.clamped(ids), self.masked(torch.where(ids > 5, ids, torch.zeros_like(ids))),
                 self.larger(torch.maximum(ids, other))]
        return self.head(torch.cat(parts, 2).flatten(1))


def slice_assign(s, x):
    h = torch.cat([s.a(x), s.b(x)], 1).view(-1, 4, 4).clone()
    h[:, 0] = 0.0
    h[:, :, 2] = h[:, :, 3] * 2
    out = h.new_zeros(h.shape[0], 8)
    out[:, 1:5] = h[:, 1]
    return torch.cat([h.flatten(1), out], 1)


def advanced_index(s, x):
    h = torch.cat([s.a(x), s.b(x)], 1)
    n = h.shape[0]
    picked = torch.stack([h[torch.arange(n), h.argmax(1)], h[torch.arange(n), torch.zeros(n, dtype=torch.long)]], 1)
    return torch.cat([picked, torch.diagonal(h.view(-1, 4, 4), dim1=1, dim2=2)], 1)


def nan_masks(s, x):
    a, b = s.a(x), s.b(x)
    clean = torch.nan_to_num(torch.log(a), nan=0.0, posinf=3.0, neginf=-5.0) + torch.isnan(torch.log(b)).float()
    either = ((a > 0) | (b > 0.5)).float() + ((a > 0) ^ (b < 0)).float()
    return torch.cat([clean, a * either, b * torch.where(a < 0.2, 1.0, 0.0)], 1)


MODELS = {
    "experts_top2": (Experts, (16,), ["top_k", "softmax", "equal"]),
    "sort": (lambda: Vec(lambda s, x: torch.cat([torch.sort(s.a(x), dim=1, descending=True).values,
                                                 torch.topk(s.b(x).view(-1, 2, 4), 2, dim=2, largest=False)
                                                 .values.flatten(1)], 1), 12), (16,), ["top_k"]),
    "kmax_pool": (KMax, (4, 12), ["top_k", "conv", "equal"]),
    "argmax_onehot": (lambda: Vec(lambda s, x: torch.cat([
        s.a(x) * F.one_hot(s.a(x).argmax(1), 8).float(),
        torch.gather(s.b(x), 1, s.a(x).argmin(1, keepdim=True))], 1), 9), (16,), ["top_k", "equal"]),
    "hashed_ids": (HashedIds, (16,), ["mod", "fmod", "div", "embedding"]),
    "clamped_ids": (ClampedIds, (16,), ["maximum", "minimum", "where", "embedding"]),
    "float_mod": (lambda: Vec(lambda s, x: torch.cat([s.a(x) % 0.7,
                                                      torch.fmod(s.a(x) * 3, s.b(x).abs() + 0.5)], 1), 16), (16,),
                  ["floor", "sign"]),
    "slice_assign": (lambda: Vec(slice_assign, 24), (16,), ["scatter_nd", "batch_range"]),
    "advanced_index": (lambda: Vec(advanced_index, 6), (16,), ["gather_nd", "top_k"]),
    "nan_masks": (lambda: Vec(nan_masks, 24), (16,), ["is_nan", "is_inf", "where", "not"]),
}


def helper_graphs(psrun, work):
    """TopK at opset 11 (k an initializer, smallest first, sorted 0) against numpy; an ArgMax
    with select_last_index 1 refused."""
    w = np.linspace(-1, 1, 30, dtype=np.float32).reshape(10, 3)
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, largest=0, sorted=0),
             helper.make_node("Gemm", ["v", "w"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "topk11", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 7])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              [numpy_helper.from_array(w, "w"),
                               numpy_helper.from_array(np.array([3], dtype=np.int64), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 6
    path = os.path.join(work, "topk11.onnx")
    onnx.save(model, path)
    x = np.random.default_rng(3).standard_normal((5, 7)).astype(np.float32)
    logits = np.sort(x, axis=1)[:, :3] @ w.T
    want = np.exp(logits - logits.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    got, err = predict(psrun, path, x, work, "topk11")
    if check("topk11: psrun predict exits 0", got is not None, err):
        diff = float(np.abs(got - want).max())
        check("topk11: psrun predict = numpy", diff <= 1e-5, f"largest difference {diff:.2e}", True)
    nodes = [helper.make_node("ConstantOfShape", ["square"], ["zeros"]),
             helper.make_node("EyeLike", ["zeros"], ["eye"], k=1),
             helper.make_node("MatMul", ["x", "eye"], ["shifted"]),
             helper.make_node("Gemm", ["shifted", "w"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "eyelike", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 7])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              [numpy_helper.from_array(np.linspace(-1, 1, 70, dtype=np.float32).reshape(10, 7), "w"),
                               numpy_helper.from_array(np.array([7, 7], dtype=np.int64), "square")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(work, "eyelike.onnx")
    onnx.save(model, path)
    logits = (x @ np.eye(7, k=1, dtype=np.float32)) @ np.linspace(-1, 1, 70, dtype=np.float32).reshape(10, 7).T
    want = np.exp(logits - logits.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    got, err = predict(psrun, path, x, work, "eyelike")
    if check("eyelike: psrun predict exits 0", got is not None, err):
        diff = float(np.abs(got - want).max())
        check("eyelike: psrun predict = numpy", diff <= 1e-5, f"largest difference {diff:.2e}", True)
    nodes = [helper.make_node("ArgMax", ["x"], ["i"], name="last_max", axis=1, select_last_index=1),
             helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Gemm", ["f", "w"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "argmax_last", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 7])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              [numpy_helper.from_array(np.ones((10, 1), np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = os.path.join(work, "argmax_last.onnx")
    onnx.save(model, path)
    r = run([psrun, "model", "show", path])
    check("refused argmax select_last_index: exit 2 naming the node and why",
          r.returncode == 2 and "last_max" in r.stdout and "select_last_index" in r.stdout,
          f"exit {r.returncode}: {r.stdout.strip()[-300:]}", True)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    only = os.environ.get("SELECTION_MODELS")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = sys.argv[2] if len(sys.argv) == 3 else tmp
        os.makedirs(work, exist_ok=True)
        for name, (build, shape, kinds) in MODELS.items():
            if not only or name in only.split(","):
                # Selections and remainders have kinks: psrun model check's own central
                # differences get a coarse bound; torch's gradients are the real check.
                check_model(check, psrun, name, build, shape, kinds, work, batch=6, seed=5, check_tolerance=0.5)
        if not only or "helper" in only.split(","):
            helper_graphs(psrun, work)
    check.finish()


if __name__ == "__main__":
    main()
