#!/usr/bin/python3
"""Modules and functional calls no issue named, written as a user would and exported as
test/onnx/torch_compare.py export() does (training mode, no folding, batch axis dynamic) at opsets
14 and 17, end to end through the psrun CLI: LocalResponseNorm; LPPool2d; torch.cdist within an
example; a TransformerDecoderLayer with a causal tgt_mask (-inf above the diagonal) over a memory;
a pre-norm TransformerEncoder with GELU; softplus, mish, tanh-GELU, relu6, celu, selu, logsigmoid,
softsign, hardtanh, tanhshrink, silu and hardswish summed; softmin and log_softmax over inner
axes; a bilinear form by einsum ("bij,jk,bik->bi"); torch.clamp with parameter bounds under
torch.where; cosine similarity and pairwise distance; an LSTMCell unrolled over 5 steps;
generalized-mean pooling with a learned exponent and x ** y of computed values (Pow without a
constant exponent); products of a convolution's output with src-based functions of itself
(abs(c) * sigmoid(c), gelu(c) * c, -c * c: a mul written over its input, its backward reading
copies; psrun once trained these with a wrong gradient).
For each network and opset:
  - `psrun model show F.onnx` exits 0 and lists the expected kinds;
  - `psrun model check F.onnx --gradients G.json` gives torch's forward outputs, loss and every
    parameter's gradient, tensor by tensor, in float64 within 1e-4 (relative to the tensor's
    largest value; gradients below 1e-4 of the network's largest compared absolutely);
  - `psrun predict --onnx F.onnx` gives torch's softmax (eval mode).
Prints one line per check; exits 1 when one fails, 77 when torch or onnx cannot be imported.
Usage: module_sweep_models.py PSRUN [WORK_DIR]   (MODULE_SWEEP=a,b: a subset)
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
try:
    import torch
    from torch import nn
    from torch.nn import functional as F
    from torch_compare import Checks, sweep_main  # numpy and onnx
except ImportError:
    sys.exit(77)

check = Checks()


class Head(nn.Module):
    """body(x) flattened, then a Linear to 10 classes."""

    def __init__(self, body, features):
        super().__init__()
        self.body, self.fc = body, nn.Linear(features, 10)

    def forward(self, x):
        return self.fc(self.body(x).flatten(1))


class Activations(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(6, 6)

    def forward(self, x):
        return (F.softplus(self.l(x)) + F.mish(x) + F.gelu(x, approximate="tanh") + F.relu6(x) + F.celu(x) +
                F.selu(x) + F.logsigmoid(x) + F.softsign(x) + F.hardtanh(x, -0.5, 0.7) + F.tanhshrink(x) +
                F.silu(x) + F.hardswish(x))


class Cdist(nn.Module):
    """Distances between the rows of one example: [N, 5, 6] -> [N, 5, 5]."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(6, 6)

    def forward(self, x):
        return torch.cdist(self.l(x), x)


class CausalDecoder(nn.Module):
    """[N, 5, 6] projected to 8, decoded over its own reversed sequence as memory, causally."""

    def __init__(self):
        super().__init__()
        self.p = nn.Linear(6, 8)
        self.d = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(5), persistent=False)

    def forward(self, x):
        h = self.p(x)
        return self.d(h, h.flip(1), tgt_mask=self.mask)


class SoftminLogSoftmax(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(6, 6)

    def forward(self, x):
        return F.softmin(self.l(x), dim=1) + F.log_softmax(x, dim=2)


class Bilinear(nn.Module):
    """x_i^T W x_i for each of an example's 5 rows."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 6))

    def forward(self, x):
        return torch.einsum("bij,jk,bik->bi", x, self.w, x)


class ClampWhere(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(6, 6)
        self.lo, self.hi = nn.Parameter(torch.full((6,), -0.3)), nn.Parameter(torch.full((6,), 0.4))

    def forward(self, x):
        return torch.where(x > 0, self.l(x), torch.clamp(x, min=self.lo, max=self.hi))


class Similarities(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(6, 6)

    def forward(self, x):
        distance = F.pairwise_distance(self.l(x).flatten(0, 1), x.flatten(0, 1)).view(x.size(0), 3, 5)
        return torch.cat([F.cosine_similarity(self.l(x), x, dim=-1), distance], -1)


class UnrolledCell(nn.Module):
    """An LSTMCell over the 5 steps of [N, 5, 6], zero initial state; the last h."""

    def __init__(self):
        super().__init__()
        self.c = nn.LSTMCell(6, 7)

    def forward(self, x):
        h, c = x.new_zeros(x.size(0), 7), x.new_zeros(x.size(0), 7)
        for t in range(x.size(1)):
            h, c = self.c(x[:, t], (h, c))
        return h


class GeM(nn.Module):
    """Generalized-mean pooling (image retrieval's GeM): (mean x^p)^(1/p) with p learned."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, padding=1)
        self.p = nn.Parameter(torch.full((1,), 3.0))

    def forward(self, x):
        x = F.relu(self.c(x)).clamp(min=1e-6)
        return F.avg_pool2d(x.pow(self.p), 8).pow(1.0 / self.p)


class Powers(nn.Module):
    """x ** y of two computed values, a per-feature learned exponent, and relu(x) ** e (0 ** e)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(6, 6), nn.Linear(6, 6)
        self.e = nn.Parameter(torch.rand(6) + 0.5)

    def forward(self, x):
        base = torch.sigmoid(self.a(x)) + 0.1
        return base ** torch.tanh(self.b(x)) + base ** self.e + torch.relu(x) ** self.e


class SelfProducts(nn.Module):
    """Products of a 3-channel convolution's output (a padded blocked format) with functions of it."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 3, 1)

    def forward(self, x):
        c = self.c(x)
        return torch.abs(c) * torch.sigmoid(c) + F.gelu(c) * c + (-c) * c


# name: (input shape without the batch, build, kinds `psrun model show` must list)
NETWORKS = {
    "lrn": ((4, 5, 6), lambda: Head(nn.Sequential(nn.Conv2d(4, 6, 1), nn.LocalResponseNorm(3)), 180),
            ["avg_pool", "pad", "pow", "div"]),
    "lp_pool": ((3, 6, 8), lambda: Head(nn.Sequential(nn.Conv2d(3, 4, 1), nn.LPPool2d(2, 2)), 48),
                ["avg_pool", "sign", "pow"]),
    "cdist": ((3, 5, 6), lambda: Head(Cdist(), 75), ["reduce_sum", "pow", "sub"]),
    "causal_decoder": ((5, 6), lambda: Head(CausalDecoder(), 40), ["matmul", "softmax", "layer_norm"]),
    "prenorm_encoder": ((5, 6), lambda: Head(nn.Sequential(nn.Linear(6, 8), nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True, activation="gelu"),
        2)), 40), ["matmul", "softmax", "layer_norm", "gelu"]),
    "activations": ((3, 5, 6), lambda: Head(Activations(), 90),
                    ["softplus", "selu", "elu", "hard_swish", "swish", "clip", "log"]),
    "softmin_log_softmax": ((3, 5, 6), lambda: Head(SoftminLogSoftmax(), 90), ["softmax", "log_softmax", "neg"]),
    "einsum_bilinear": ((5, 6), lambda: Head(Bilinear(), 5), ["matmul"]),
    "clamp_where": ((3, 5, 6), lambda: Head(ClampWhere(), 90), ["where", "maximum", "minimum", "greater"]),
    "similarities": ((3, 5, 6), lambda: Head(Similarities(), 30), ["sqrt", "reduce_sum", "maximum"]),
    "unrolled_lstm_cell": ((5, 6), lambda: Head(UnrolledCell(), 7), ["sigmoid", "tanh", "split"]),
    "gem_pool": ((3, 8, 8), lambda: Head(GeM(), 4), ["power", "avg_pool", "reciprocal"]),
    "powers": ((5, 6), lambda: Head(Powers(), 30), ["power", "sigmoid", "relu"]),
    "self_products": ((3, 8, 8), lambda: Head(SelfProducts(), 192), ["abs", "gelu", "neg", "mul"]),
}


def main():
    sweep_main(check, NETWORKS, "MODULE_SWEEP", "psrun_module_sweep_")


if __name__ == "__main__":
    main()
