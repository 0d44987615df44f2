#!/usr/bin/python3
"""Token-id networks written the way their families are written today, none of them built around
psrun's operators (found by exporting modules no test named, 2026-12-04), end to end through the
psrun CLI at opsets 13, 14 and 17:

  roberta      position ids as Hugging Face computes them: `(ids != 0).int().cumsum(1) * mask + 1`
               (integer CumSum, Mul, Add), a learned position embedding gathered by them, a
               TransformerEncoderLayer with a key padding mask;
  one_hot      F.one_hot(ids, V).float() (OneHot), a mean over the sequence, a linear layer;
  learned_h0   an LSTM whose initial states are parameters expanded over the batch ([1, N, H]);
  llama        a decoder block as LLaMA writes it: RMSNorm, rotary embeddings (strided slices,
               stack, flatten), a causal -inf mask, SwiGLU, an output head tied to the embedding;
  t5_bias      self-attention with T5's relative position bias, its buckets computed in forward()
               from torch.arange (Abs, Log, Min, Where of constants, evaluated at import);
  elman        nn.RNN, two layers, bidirectional, ReLU (ONNX RNN);
  padded_mean  nn.Embedding(padding_idx=0) mean-pooled over the padded sequence: the Gather's table
               has row 0 all zeros, which imports as padding_index (no gradient, as torch);
  packed       pack_padded_sequence(lengths, enforce_sorted=False) into a 2-layer bidirectional
               LSTM, its last states h_n (LSTM sequence_lens, the batch sorted by length with
               TopK/Gather and unsorted with ScatterElements);
  packed_gru   the same into a bidirectional GRU, pad_packed_sequence(total_length=L) and a mean
               over each example's own steps;
and an opset-17 graph by onnx.helper: OneHot with values [-1, 2] on a middle axis, against numpy.

Each exported in training mode without constant folding, batch axis dynamic:
`psrun model check F.onnx --input IDS --labels Y --gradients G.json` exits 0, and its outputs,
loss and every parameter's gradient equal PyTorch's in float64 within 1e-4 (relative to the
tensor's largest value, or to 1e-4 of the network's largest gradient where the tensor's is zero
but for rounding).

Prints one line per check; exits 1 when one fails, 77 when torch or onnx cannot be imported.
Usage: token_models.py PSRUN [WORK_DIR]   (TOKEN_MODELS=a,b: a subset)
"""
import json
import math
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx  # noqa: F401  (torch.onnx.export needs it)
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from psrun_cli import run  # noqa: E402
from torch_compare import Checks, compare_with_torch, psrun_torch, relative  # noqa: E402

V, L, BATCH, TOLERANCE = 50, 16, 8, 1e-4


class Roberta(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(V, d), nn.Embedding(L + 2, d)
        self.norm = nn.LayerNorm(d)
        self.encoder = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True, activation="gelu")
        self.head = nn.Linear(d, 10)

    def forward(self, ids):
        mask = (ids != 0).int()
        positions = torch.cumsum(mask, dim=1).type_as(mask) * mask + 1
        h = self.norm(self.tokens(ids) + self.positions(positions.long()))
        return self.head(self.encoder(h, src_key_padding_mask=ids == 0)[:, 0])


class OneHot(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(V, 10)

    def forward(self, ids):
        return self.head(F.one_hot(ids, V).to(self.head.weight.dtype).mean(1))


class LearnedH0(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding, self.lstm, self.head = nn.Embedding(V, 16), nn.LSTM(16, 12, batch_first=True), nn.Linear(12, 10)
        self.h0, self.c0 = nn.Parameter(torch.randn(1, 1, 12) * 0.1), nn.Parameter(torch.randn(1, 1, 12) * 0.1)

    def forward(self, ids):
        n = ids.shape[0]
        state = (self.h0.expand(1, n, 12).contiguous(), self.c0.expand(1, n, 12).contiguous())
        y, _ = self.lstm(self.embedding(ids), state)
        return self.head(y[:, -1])


class Llama(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.embedding = nn.Embedding(V, d)
        self.qkv, self.out = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.g1, self.g2 = nn.Parameter(torch.ones(d)), nn.Parameter(torch.ones(d))
        self.w1, self.w3, self.w2 = nn.Linear(d, 64, bias=False), nn.Linear(d, 64, bias=False), nn.Linear(64, d, bias=False)
        self.vocab = nn.Linear(d, V, bias=False)
        self.vocab.weight = self.embedding.weight  # tied
        self.head = nn.Linear(V, 10)
        self.heads, self.hd = heads, d // heads
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        angles = torch.outer(torch.arange(L).float(), inv)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())
        self.register_buffer("mask", torch.triu(torch.full((L, L), float("-inf")), 1))

    @staticmethod
    def rms(x, g):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g

    def rope(self, x):
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack([x1 * self.cos - x2 * self.sin, x1 * self.sin + x2 * self.cos], -1).flatten(-2)

    def forward(self, ids):
        n, length = ids.shape
        h = self.embedding(ids)
        q, k, v = self.qkv(self.rms(h, self.g1)).view(n, length, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        q, k = self.rope(q), self.rope(k)
        a = torch.softmax(q @ k.transpose(-2, -1) / self.hd ** 0.5 + self.mask, -1) @ v
        h = h + self.out(a.transpose(1, 2).reshape(n, length, -1))
        z = self.rms(h, self.g2)
        h = h + self.w2(F.silu(self.w1(z)) * self.w3(z))
        return self.head(self.vocab(h[:, -1]))


def t5_buckets(relative, buckets=8, max_distance=16):
    """T5's bidirectional relative position buckets (Hugging Face's _relative_position_bucket):
    exact up to buckets / 4 apart, logarithmic beyond, per direction."""
    half = buckets // 2
    out = (relative > 0).to(torch.long) * half
    n = torch.abs(relative)
    exact = half // 2
    large = exact + (torch.log(n.float() / exact) / math.log(max_distance / exact) * (half - exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, half - 1))
    return out + torch.where(n < exact, n, large)


class T5Bias(nn.Module):
    """Self-attention with T5's learned relative position bias, its buckets computed in forward()
    from torch.arange of the sequence length (Abs, Log, Cast, Min, Where of constants)."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.embedding = nn.Embedding(V, d)
        self.qkv, self.out = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.bias = nn.Embedding(8, heads)
        self.head = nn.Linear(d, 10)
        self.heads, self.hd = heads, d // heads

    def forward(self, ids):
        n, length = ids.shape
        h = self.embedding(ids)
        q, k, v = self.qkv(h).view(n, length, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        positions = torch.arange(length)
        bias = self.bias(t5_buckets(positions[None, :] - positions[:, None])).permute(2, 0, 1)[None]
        a = torch.softmax(q @ k.transpose(-2, -1) + bias, -1) @ v
        return self.head(self.out(a.transpose(1, 2).reshape(n, length, -1)).mean(1))


class Elman(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(V, 16)
        self.rnn = nn.RNN(16, 12, num_layers=2, nonlinearity="relu", batch_first=True, bidirectional=True)
        self.head = nn.Linear(24, 10)

    def forward(self, ids):
        y, _ = self.rnn(self.embedding(ids))
        return self.head(y.amax(1))


def one_hot_values(check, psrun, work, ids, ids_file, labels_file):
    """OneHot by onnx.helper with values [-1, 2] on axis 1 (not the last), depth 7 (ids past it
    match nothing), a mean over the sequence: psrun model check's outputs against numpy."""
    from onnx import TensorProto, helper
    depth = 7
    labels = os.path.join(work, "labels7.npy")
    np.save(labels, np.load(labels_file) % depth)
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["depth"], value=helper.make_tensor("d", TensorProto.INT64, [], [depth])),
         helper.make_node("Constant", [], ["values"], value=helper.make_tensor("v", TensorProto.FLOAT, [2], [-1, 2])),
         helper.make_node("OneHot", ["ids", "depth", "values"], ["hot"], axis=1),
         helper.make_node("ReduceMean", ["hot"], ["logits"], axes=[2], keepdims=0)],
        "one_hot_values", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", L])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", depth])])
    path = os.path.join(work, "one_hot_values.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    out = os.path.join(work, "one_hot_values.json")
    r = run([psrun, "model", "check", path, "--input", ids_file, "--labels", labels, "--gradients", out,
             "--no-finite-differences"], 120)
    if not check("one_hot_values: psrun model check exits 0", r.returncode == 0 and os.path.exists(out), r.stdout[-800:]):
        return
    want = np.where(ids[:, None, :] == np.arange(depth)[None, :, None], 2.0, -1.0).mean(2)
    err = relative(json.load(open(out))["outputs"], want)
    check("one_hot_values: outputs = numpy's", err <= 1e-6, f"max relative error {err:.2e}", True)


class PaddedMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding, self.head = nn.Embedding(V, 16, padding_idx=0), nn.Linear(16, 10)

    def forward(self, ids):
        return self.head(torch.tanh(self.embedding(ids).mean(1)))


class Packed(nn.Module):
    def __init__(self, cell=nn.LSTM, layers=2, outputs=False):
        super().__init__()
        self.embedding = nn.Embedding(V, 16, padding_idx=0)
        self.rnn = cell(16, 12, num_layers=layers, batch_first=True, bidirectional=True)
        self.head = nn.Linear(24, 10)
        self.outputs = outputs

    def forward(self, ids):
        lengths = (ids != 0).sum(1)
        packed = nn.utils.rnn.pack_padded_sequence(self.embedding(ids), lengths, batch_first=True,
                                                   enforce_sorted=False)
        y, h = self.rnn(packed)
        if self.outputs:
            padded, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=L)
            return self.head(padded.sum(1) / lengths.unsqueeze(1))
        h = h[0] if isinstance(h, tuple) else h
        return self.head(torch.cat([h[-2], h[-1]], 1))


MODELS = {"roberta": Roberta, "one_hot": OneHot, "learned_h0": LearnedH0, "llama": Llama, "t5_bias": T5Bias,
          "elman": Elman,
          "padded_mean": PaddedMean, "packed": Packed,
          "packed_gru": lambda: Packed(nn.GRU, layers=1, outputs=True)}


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    only = os.environ.get("TOKEN_MODELS")
    check = Checks()
    with tempfile.TemporaryDirectory() as tmp:
        work = sys.argv[2] if len(sys.argv) == 3 else tmp
        os.makedirs(work, exist_ok=True)
        rng = np.random.default_rng(4)
        ids = rng.integers(1, V, size=(BATCH, L)).astype(np.int64)
        ids[:, 12:] = 0  # padding at the end, one example padded from its fourth token on
        ids[0, 3:] = 0
        ids[1, 7:] = 0  # lengths 3, 7, 12 and 16 (pack_padded_sequence sorts them)
        ids[2, :] = rng.integers(1, V, size=L)
        labels = rng.integers(0, 10, size=BATCH).astype(np.int64)
        ids_file, labels_file = os.path.join(work, "ids.npy"), os.path.join(work, "labels.npy")
        np.save(ids_file, ids)
        np.save(labels_file, labels)
        for name, build in MODELS.items():
            if only and name not in only.split(","):
                continue
            for opset in (13, 14, 17):
                tag = f"{name}_{opset}"
                torch.manual_seed(1)
                model = build()
                path = os.path.join(work, tag + ".onnx")
                psrun_torch.export(model, torch.from_numpy(ids), path, input_names=["ids"], opset=opset)
                grads_path = os.path.join(work, tag + ".grads.json")
                r = run([psrun, "model", "check", path, "--input", ids_file, "--labels", labels_file, "--gradients",
                         grads_path, "--json", "--tolerance", "0.2"], 300)
                if not check(f"{tag}: psrun model check exits 0", r.returncode == 0 and os.path.exists(grads_path),
                             r.stdout[-800:]):
                    continue
                mine = json.load(open(grads_path))
                model = model.double()
                model.zero_grad()
                logits = model(torch.from_numpy(ids))
                loss = F.cross_entropy(logits, torch.from_numpy(labels))
                loss.backward()
                grads = {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}
                compare_with_torch(check, tag, mine, logits.detach().numpy(), float(loss), grads, TOLERANCE, 1e-4)
        if not only or "one_hot_values" in only.split(","):
            one_hot_values(check, psrun, work, ids, ids_file, labels_file)
    check.finish()


if __name__ == "__main__":
    main()
