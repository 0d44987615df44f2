#!/usr/bin/python3
"""Building blocks of research networks no issue named, written as their papers' code writes them
and exported as test/onnx/torch_compare.py export() does (training mode, no folding, batch axis
dynamic) at opsets 14 and 17, end to end through the psrun CLI:
  - PointNet: Conv1d 1x1 features, max over points, a T-Net's 3x3 transform (+ torch.eye) applied
    to the points by bmm;
  - capsules: squash, and dynamic routing unrolled over 3 iterations (softmax over the capsules,
    agreement by 5-D matmul);
  - CoordConv: coordinate channels from torch.linspace, expanded over the batch and concatenated;
  - a LLaMA block: RMSNorm, rotary embeddings (strided slices, stack, flatten), a causal mask of
    -inf from triu, SwiGLU, embedding ids computed from the input;
  - the temporal shift module: channel slices of a 5-D view shifted by slice assignment;
  - weight standardization (BiT's StdConv): a convolution whose weight is computed from its
    parameter; LoRA: a dense weight plus a low-rank product;
  - a learned positional grid resized by bicubic interpolation; ECA (Conv1d over pooled channels)
    and CBAM's spatial attention (mean and max over channels, 7x7 convolution);
  - tied weights: an embedding table reused as the output projection.
For each network and opset: `psrun model show` exits 0 and lists the expected kinds; `psrun model
check --gradients` gives torch's forward outputs, loss and every parameter's gradient in float64
within 1e-4 (relative to the tensor's largest value; below 1e-4 of the network's largest compared
absolutely); `psrun predict --onnx` gives torch's softmax (eval mode).
Prints one line per check; exits 1 when one fails, 77 when torch or onnx cannot be imported.
Usage: research_blocks_models.py PSRUN [WORK_DIR]   (RESEARCH_BLOCKS=a,b: a subset)
"""
import math
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

CLASSES = 10
check = Checks()


class PointNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.tnet = nn.Sequential(nn.Conv1d(3, 16, 1, bias=False), nn.BatchNorm1d(16), nn.ReLU(), nn.Conv1d(16, 32, 1), nn.ReLU())
        self.transform = nn.Linear(32, 9)
        self.features = nn.Sequential(nn.Conv1d(3, 16, 1), nn.ReLU(), nn.Conv1d(16, 32, 1))
        self.head = nn.Linear(32, CLASSES)

    def forward(self, x):  # N x 3 x points
        t = self.transform(self.tnet(x).max(2)[0]).view(-1, 3, 3) + torch.eye(3)
        return self.head(self.features(torch.bmm(t, x)).max(2)[0])


class Capsules(nn.Module):
    def __init__(self, iterations=3):
        super().__init__()
        self.primary = nn.Conv2d(1, 16, 3, stride=2)
        self.w = nn.Parameter(torch.randn(1, 18, CLASSES, 6, 8) * 0.1)
        self.iterations = iterations

    @staticmethod
    def squash(s):
        n2 = (s ** 2).sum(-1, keepdim=True)
        return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)

    def forward(self, x):  # N x 1 x 8 x 8: 2 capsule types of 8 values at 3 x 3 places
        n = x.shape[0]
        u = self.squash(self.primary(x).view(n, 2, 8, 9).permute(0, 1, 3, 2).reshape(n, 18, 8))
        predictions = (self.w @ u[:, :, None, :, None]).squeeze(-1)  # N x 18 x classes x 6
        logits = torch.zeros(predictions.shape[:3])
        for i in range(self.iterations):
            v = self.squash((F.softmax(logits, dim=2).unsqueeze(-1) * predictions).sum(1))
            if i < self.iterations - 1:
                logits = logits + (predictions * v.unsqueeze(1)).sum(-1)
        return v.norm(dim=-1) * 5


class CoordConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4 + 2, 6, 3, padding=1)
        self.head = nn.Linear(6 * 36, CLASSES)

    def forward(self, x):
        n, _, h, w = x.shape
        ys = torch.linspace(-1, 1, h).view(1, 1, h, 1).expand(n, 1, h, w)
        xs = torch.linspace(-1, 1, w).view(1, 1, 1, w).expand(n, 1, h, w)
        return self.head(F.relu(self.conv(torch.cat([x, ys, xs], 1))).flatten(1))


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class LlamaBlock(nn.Module):
    def __init__(self, d=16, heads=2, length=8):
        super().__init__()
        self.embedding, self.norm1, self.norm2 = nn.Embedding(20, d), RMSNorm(d), RMSNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.w1, self.w3, self.w2 = nn.Linear(d, 32, bias=False), nn.Linear(d, 32, bias=False), nn.Linear(32, d, bias=False)
        self.head, self.heads = nn.Linear(d, CLASSES), heads
        half = d // heads
        angles = torch.arange(length).float()[:, None] / (10000 ** (torch.arange(0, half, 2).float() / half))[None]
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def rotate(self, x):  # N x heads x L x head_dim
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack([x1 * self.cos - x2 * self.sin, x1 * self.sin + x2 * self.cos], -1).flatten(-2)

    def forward(self, x):
        h = self.embedding((x.abs() * 5).long().clamp(max=19))
        n, length, d = h.shape
        q, k, v = self.qkv(self.norm1(h)).view(n, length, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = torch.full((length, length), float("-inf")).triu(1)
        scores = self.rotate(q) @ self.rotate(k).transpose(-1, -2) / math.sqrt(d // self.heads) + mask
        h = h + self.out((F.softmax(scores, -1) @ v).transpose(1, 2).reshape(n, length, d))
        m = self.norm2(h)
        return self.head((h + self.w2(F.silu(self.w1(m)) * self.w3(m)))[:, -1])


class TemporalShift(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.head = nn.Linear(4 * 8 * 16, CLASSES)

    def forward(self, x):  # N x (4 frames * 8 channels) x 4 x 4
        n, fold = x.shape[0], 2
        v = x.view(n, 4, 8, 4, 4)
        out = torch.zeros_like(v)
        out[:, :-1, :fold] = v[:, 1:, :fold]
        out[:, 1:, fold:2 * fold] = v[:, :-1, fold:2 * fold]
        out[:, :, 2 * fold:] = v[:, :, 2 * fold:]
        return self.head(self.conv(out.reshape(n * 4, 8, 4, 4)).reshape(n, -1))


class StdConv(nn.Conv2d):
    def forward(self, x):
        w = self.weight
        w = (w - w.mean((1, 2, 3), keepdim=True)) / torch.sqrt(w.var((1, 2, 3), keepdim=True, unbiased=False) + 1e-5)
        return F.conv2d(x, w, self.bias, self.stride, self.padding)


class Lora(nn.Module):
    def __init__(self):
        super().__init__()
        self.base = nn.Linear(6, 6)
        self.a, self.b = nn.Parameter(torch.randn(6, 2) * 0.3), nn.Parameter(torch.randn(2, 6) * 0.3)

    def forward(self, x):
        return F.linear(x, self.base.weight + (self.a @ self.b).t(), self.base.bias)


class ResizedPositions(nn.Module):
    def __init__(self):
        super().__init__()
        self.positions = nn.Parameter(torch.randn(1, 3, 4, 4))
        self.conv = nn.Conv2d(2, 3, 1)

    def forward(self, x):
        return self.conv(x) + F.interpolate(self.positions, size=(8, 8), mode="bicubic", align_corners=False)


class Attentions(nn.Module):  # ECA over channels, then CBAM's spatial attention
    def __init__(self):
        super().__init__()
        self.eca = nn.Conv1d(1, 1, 3, padding=1, bias=False)
        self.spatial = nn.Conv2d(2, 1, 7, padding=3)

    def forward(self, x):
        x = x * torch.sigmoid(self.eca(x.mean((2, 3))[:, None, :]).transpose(1, 2)[..., None])
        pooled = torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)
        return x * torch.sigmoid(self.spatial(pooled))


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding, self.mix = nn.Embedding(12, 6), nn.Linear(6, 6)

    def forward(self, x):
        h = torch.tanh(self.mix(self.embedding((x.abs() * 4).long().clamp(max=11))))
        return (h @ self.embedding.weight.t()).mean(1)[:, :CLASSES]


class Head(nn.Module):
    def __init__(self, body, features):
        super().__init__()
        self.body, self.fc = body, nn.Linear(features, CLASSES)

    def forward(self, x):
        return self.fc(self.body(x).flatten(1))


# name: (input shape without the batch, build, kinds `psrun model show` must list)
NETWORKS = {
    "pointnet": ((3, 20), PointNet, ["conv2d", "reduce_max", "matmul", "batch_norm"]),
    "capsules": ((1, 8, 8), Capsules, ["softmax", "matmul", "sqrt"]),
    "coordconv": ((4, 6, 6), CoordConv, ["concat", "conv2d"]),
    "llama_block": ((8,), LlamaBlock, ["embedding", "softmax", "matmul", "swish"]),
    "temporal_shift": ((32, 4, 4), TemporalShift, ["conv2d"]),
    "std_conv": ((3, 6, 6), lambda: Head(nn.Sequential(StdConv(3, 4, 3, padding=1), nn.GroupNorm(2, 4), nn.ReLU()),
                                         144), ["conv2d", "group_norm"]),
    "lora": ((5, 6), lambda: Head(Lora(), 30), ["matmul"]),
    "resized_positions": ((2, 8, 8), lambda: Head(ResizedPositions(), 192), ["parameter", "matmul"]),
    "attentions": ((8, 6, 6), lambda: Head(Attentions(), 288), ["conv2d", "sigmoid", "reduce_max"]),
    "tied": ((6,), Tied, ["embedding", "dense"]),
}


def main():
    sweep_main(check, NETWORKS, "RESEARCH_BLOCKS", "psrun_research_blocks_")


if __name__ == "__main__":
    main()
