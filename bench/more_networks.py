#!/usr/bin/python3
"""Networks beyond the seven of networks.py (docs/models.md "Networks from PyTorch"): ordinary
torch.nn modules of the families researchers write today, each exported as torch.onnx.export
writes it at a chosen opset (13, 14 = Debian torch's default, 17 = the newest it writes).

They read MNIST-shaped inputs: images [N, 1, 28, 28] (the CNNs, the ViT, the Mixer, the U-Net)
or token ids [N, 32] (networks.py's MNIST tokens: the text CNN, the GPT-mini, the BiLSTM).

    more_networks.py export OUT_DIR [--opset K] [NAME ...]   # NAME.onnx, training mode
    more_networks.py ops OUT_DIR [--opset K] [NAME ...]      # the ONNX op types of each export
    more_networks.py predict NAME ONNX INPUT.npy OUT.npy     # as networks.py predict
    more_networks.py list
"""
import os
import sys

import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import networks  # noqa: E402  (read_idx, tokens, load_onnx_weights)


# 1. A GroupNorm CNN (nn.GroupNorm: InstanceNormalization + Mul + Add before opset 18).
def groupnorm_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.GroupNorm(8, 32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


# 2. An InstanceNorm CNN with PReLU (one slope, then one per channel).
def instnorm_prelu_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.InstanceNorm2d(16, affine=True), nn.PReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.InstanceNorm2d(32, affine=True), nn.PReLU(32), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


# 3. Activations mixed: SiLU, ELU, LeakyReLU, SELU, Mish-free (softplus/tanh by hand), Hardtanh.
def activation_mix():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.SiLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ELU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.LeakyReLU(0.1), nn.Linear(128, 64), nn.SELU(),
        nn.Linear(64, 32), nn.Hardtanh(-2.0, 2.0), nn.Linear(32, 10))


# 4. A MobileNetV3 block: Hardswish, depthwise conv, squeeze-excite with Hardsigmoid.
class SqueezeExcite(nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.fc1 = nn.Conv2d(c, c // r, 1)
        self.fc2 = nn.Conv2d(c // r, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class MobileNetV3(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.Hardswish())
        self.expand = nn.Sequential(nn.Conv2d(16, 48, 1), nn.BatchNorm2d(48), nn.Hardswish())
        self.dw = nn.Sequential(nn.Conv2d(48, 48, 3, padding=1, groups=48), nn.BatchNorm2d(48), nn.Hardswish())
        self.se = SqueezeExcite(48)
        self.project = nn.Sequential(nn.Conv2d(48, 16, 1), nn.BatchNorm2d(16))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        x = x + self.project(self.se(self.dw(self.expand(x))))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


# 5. A ConvNeXt block: depthwise 7x7, LayerNorm over channels (channels last), Linear over the
# last axis of a rank-4 tensor, GELU, layer scale, residual.
class ConvNeXtBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c)
        self.pw1 = nn.Linear(c, 4 * c)
        self.pw2 = nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.full((c,), 0.1))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(1, 32, 4, stride=4)
        self.blocks = nn.Sequential(ConvNeXtBlock(32), ConvNeXtBlock(32))
        self.norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(self.norm(x.mean(dim=(2, 3))))


# 6. A tiny ViT: 7x7 patches, a class token expanded over the batch, learned positions.
class TinyViT(nn.Module):
    def __init__(self, d=64, heads=4, layers=2):
        super().__init__()
        self.patch = nn.Conv2d(1, d, 7, stride=7)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, 17, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, batch_first=True,
                                           activation="gelu", norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose(1, 2)
        p = torch.cat([self.cls.expand(x.shape[0], -1, -1), p], dim=1) + self.pos
        return self.head(self.norm(self.encoder(p)[:, 0]))


# 7. An MLP-Mixer: 4x4 patches, token mixing (Linear over the transposed axis), channel mixing.
class MixerBlock(nn.Module):
    def __init__(self, tokens, d):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.token = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(), nn.Linear(2 * tokens, tokens))
        self.norm2 = nn.LayerNorm(d)
        self.channel = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + self.token(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel(self.norm2(x))


class Mixer(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.patch = nn.Conv2d(1, d, 4, stride=4)
        self.blocks = nn.Sequential(MixerBlock(49, d), MixerBlock(49, d))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        x = self.blocks(self.patch(x).flatten(2).transpose(1, 2))
        return self.head(self.norm(x).mean(dim=1))


# 8. A small U-Net: two downsamplings, a ConvTranspose and an Upsample on the way up, skips by
# concatenation; a classification head on the decoder's output.
class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(16, 32, 3, padding=1), nn.ReLU())
        self.mid = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU())
        self.up2 = nn.ConvTranspose2d(32, 32, 2, stride=2)
        self.dec2 = nn.Sequential(nn.Conv2d(64, 16, 3, padding=1), nn.ReLU())
        self.up1 = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec1 = nn.Sequential(nn.Conv2d(32, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(8 * 7 * 7, 10)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], dim=1))
        return self.head(F.avg_pool2d(d1, 4).flatten(1))


# 9. Pooling variants: max with stride and padding, average without counting padding, adaptive
# average to 1, global max by amax, 1-D pools over rows.
class PoolingMix(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 3, stride=2, padding=1)
        x = F.avg_pool2d(F.relu(self.c2(x)), 3, stride=2, padding=1, count_include_pad=False)
        avg = F.adaptive_avg_pool2d(x, 1).flatten(1)
        mx = x.amax(dim=(2, 3))
        return self.fc(torch.cat([avg, mx], dim=1))


# 10. A 1-D text CNN over token ids: embedding, Conv1d of widths 3 and 5, max over time.
class TextCNN(nn.Module):
    def __init__(self, vocabulary=784, dim=32):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, dim)
        self.c3 = nn.Conv1d(dim, 32, 3, padding=1)
        self.c5 = nn.Conv1d(dim, 32, 5, padding=2)
        self.fc = nn.Linear(64, 10)

    def forward(self, ids):
        e = self.embedding(ids).transpose(1, 2)
        a = F.relu(self.c3(e)).max(dim=2).values
        b = F.relu(self.c5(e)).max(dim=2).values
        return self.fc(torch.cat([a, b], dim=1))


# 11. A 2-layer bidirectional LSTM over token ids.
class BiLSTM(nn.Module):
    def __init__(self, vocabulary=784, dim=32, hidden=48):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(2 * hidden, 10)

    def forward(self, ids):
        out, _ = self.lstm(self.embedding(ids))
        return self.fc(out.mean(dim=1))


# 12. A causal GPT-mini over token ids: token and position embeddings (positions by arange), a
# causal mask of -inf above the diagonal, a padding mask from ids == 0, the last position's logits.
class GptBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        n, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.reshape(n, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(n, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(n, t, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(2, 3)) / (d // self.heads) ** 0.5 + mask
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(n, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class GptMini(nn.Module):
    def __init__(self, vocabulary=784, d=64, heads=4, layers=2, length=32):
        super().__init__()
        self.token = nn.Embedding(vocabulary, d)
        self.position = nn.Embedding(length, d)
        self.blocks = nn.ModuleList([GptBlock(d, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)
        self.register_buffer("causal", torch.triu(torch.full((length, length), float("-inf")), diagonal=1),
                             persistent=False)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.token(ids) + self.position(torch.arange(t))
        for block in self.blocks:
            x = block(x, self.causal[:t, :t])
        return self.head(self.norm(x)[:, -1])


# 13. Masked mean pooling: a padding mask (ids == 0 after a shift) by Where and Equal, the bag
# mean over the unmasked tokens, Max/Min element-wise heads.
class MaskedBag(nn.Module):
    def __init__(self, vocabulary=784, dim=48):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, dim)
        self.fc1 = nn.Linear(dim, 64)
        self.fc2 = nn.Linear(dim, 64)
        self.out = nn.Linear(64, 10)

    def forward(self, ids):
        keep = (ids != 0).unsqueeze(2)
        e = torch.where(keep, self.embedding(ids), torch.zeros(()))
        mean = e.sum(dim=1) / keep.sum(dim=1).clamp(min=1)
        h = torch.maximum(self.fc1(mean), self.fc2(mean)) + torch.minimum(self.fc1(mean), torch.zeros(()))
        return self.out(h)


# 14. A 1-D CNN over image rows (Conv1d with stride and dilation, BatchNorm1d, 1-D pools).
class RowsCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv1d(28, 64, 3, padding=1), nn.BatchNorm1d(64), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(64, 64, 3, padding=2, dilation=2), nn.BatchNorm1d(64), nn.ReLU(), nn.AvgPool1d(2),
            nn.Conv1d(64, 64, 3, stride=2), nn.ReLU())
        self.fc = nn.Linear(64 * 3, 10)

    def forward(self, x):  # [N, 1, 28, 28] -> rows as channels [N, 28, 28]
        return self.fc(self.body(x.squeeze(1)).flatten(1))


# 15. A small autoencoder-classifier: ConvTranspose with padding/output_padding, bilinear Resize,
# an L1 reconstruction term's ops (Abs, Sub) feeding nothing but a second head.
class ConvTransposeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU())
        self.dec = nn.ConvTranspose2d(32, 16, 3, stride=2, padding=1, output_padding=1)
        self.fc = nn.Linear(16 * 7 * 7 + 32 * 7 * 7, 10)

    def forward(self, x):
        z = self.enc(x)
        up = F.relu(self.dec(z))
        small = F.interpolate(up, scale_factor=0.5, mode="bilinear", align_corners=False)
        return self.fc(torch.cat([small.flatten(1), z.flatten(1)], dim=1))


# 16. A temporal convolutional network over token ids: causal dilated Conv1d blocks (left padding
# then the extra right positions sliced off, as TCN code "chomps" them), residual 1x1 projections,
# the last position and the mean over time read by the classifier.
class TCN(nn.Module):
    def __init__(self, vocabulary=784, dim=32, channels=48):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, dim)
        self.blocks = nn.ModuleList()
        self.skips = nn.ModuleList()
        width = dim
        for dilation in (1, 2, 4):
            self.blocks.append(nn.Conv1d(width, channels, 3, dilation=dilation, padding=2 * dilation))
            self.skips.append(nn.Conv1d(width, channels, 1))
            width = channels
        self.fc = nn.Linear(2 * channels, 10)

    def forward(self, ids):
        h = self.embedding(ids).transpose(1, 2)
        for conv, skip in zip(self.blocks, self.skips):
            chomp = conv.padding[0]
            h = F.relu(conv(h)[:, :, :-chomp] + skip(h))
        return self.fc(torch.cat([h[:, :, -1], h.mean(dim=2)], dim=1))


# 17. A soft mixture of experts on flattened images: a gate's softmax weighs four expert MLPs,
# stacked and summed (torch.stack, broadcasting multiply, sum over the experts).
class SoftMoE(nn.Module):
    def __init__(self, experts=4, hidden=64):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten())
        self.gate = nn.Linear(8 * 14 * 14, experts)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(8 * 14 * 14, hidden), nn.GELU(), nn.Linear(hidden, 10)) for _ in range(experts))

    def forward(self, x):
        h = self.stem(x)
        weights = torch.softmax(self.gate(h), dim=1)
        out = torch.stack([e(h) for e in self.experts], dim=1)
        return (weights.unsqueeze(2) * out).sum(dim=1)


# 18. MNIST's rows as a packed sequence: an image's trailing blank rows are padding (its length is
# computed in the graph), pack_padded_sequence(enforce_sorted=False) into a bidirectional LSTM,
# the last states h_n to a linear head (ONNX LSTM sequence_lens; TopK/Gather/ScatterElements sort
# the batch by length and back).
def packed_rows(x):
    """An image [N, 1, 28, 28] as a packed sequence of its rows, the trailing blank rows padding
    (lengths computed in the graph: flip, cumsum, equal, sum)."""
    rows = x.flatten(1, 2)  # [N, 28, 28]
    blank = (rows.abs().sum(2) == 0).int()
    trailing = (blank.flip(1).cumsum(1) == torch.arange(1, 29)).sum(1)
    lengths = (28 - trailing).clamp(min=1)
    return nn.utils.rnn.pack_padded_sequence(rows, lengths, batch_first=True, enforce_sorted=False)


class PackedRows(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(28, 24, batch_first=True, bidirectional=True)
        self.head = nn.Linear(48, 10)

    def forward(self, x):
        _, (h, _) = self.rnn(packed_rows(x))
        return self.head(torch.cat([h[-2], h[-1]], 1))


# name: (constructor, data, example input shape)
NETWORKS = {
    "groupnorm_cnn": (groupnorm_cnn, "fashion-mnist", (2, 1, 28, 28)),
    "instnorm_prelu_cnn": (instnorm_prelu_cnn, "fashion-mnist", (2, 1, 28, 28)),
    "activation_mix": (activation_mix, "fashion-mnist", (2, 1, 28, 28)),
    "mobilenet_v3": (MobileNetV3, "fashion-mnist", (2, 1, 28, 28)),
    "convnext": (ConvNeXt, "fashion-mnist", (2, 1, 28, 28)),
    "tiny_vit": (TinyViT, "mnist", (2, 1, 28, 28)),
    "mixer": (Mixer, "mnist", (2, 1, 28, 28)),
    "unet": (UNet, "fashion-mnist", (2, 1, 28, 28)),
    "pooling_mix": (PoolingMix, "fashion-mnist", (2, 1, 28, 28)),
    "text_cnn": (TextCNN, "mnist-tokens", (2, 32)),
    "bilstm": (BiLSTM, "mnist-tokens", (2, 32)),
    "gpt_mini": (GptMini, "mnist-tokens", (2, 32)),
    "masked_bag": (MaskedBag, "mnist-tokens", (2, 32)),
    "rows_cnn": (RowsCNN, "mnist", (2, 1, 28, 28)),
    "conv_transpose_net": (ConvTransposeNet, "fashion-mnist", (2, 1, 28, 28)),
    "tcn": (TCN, "mnist-tokens", (2, 32)),
    "soft_moe": (SoftMoE, "fashion-mnist", (2, 1, 28, 28)),
    "packed_rows": (PackedRows, "mnist", (2, 1, 28, 28)),
}


load_onnx_weights = networks.load_onnx_weights  # check_roundtrip.py reads it here


def build(name, seed=0):
    torch.manual_seed(seed)
    return NETWORKS[name][0]()


def example_input(name):
    shape = NETWORKS[name][2]
    if NETWORKS[name][1] == "mnist-tokens":
        return torch.randint(1, 784, shape, dtype=torch.int64)
    return torch.zeros(shape)


def export(model, name, path, opset):
    model.train(True)
    torch.onnx.export(model, example_input(name), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})


def predict(name, onnx_path, input_path, out_path):
    import numpy as np
    model = build(name)
    loaded = networks.load_onnx_weights(model, onnx_path)
    model.eval()
    data = np.load(input_path)
    if NETWORKS[name][1] == "mnist-tokens":
        x = torch.from_numpy(data.astype(np.int64))
    else:
        x = torch.from_numpy(data.astype(np.float32) / 255.0).reshape(len(data), 1, 28, 28)
    with torch.no_grad():
        probabilities = torch.softmax(model(x), dim=1).numpy()
    np.save(out_path, probabilities.astype(np.float32))
    print(f"{name}: {loaded} tensors from {onnx_path}; {len(data)} predictions in {out_path}")


def main():
    args = sys.argv[1:]
    if len(args) == 5 and args[0] == "predict":
        predict(*args[1:])
        return
    if not args or args[0] not in ("export", "ops", "list"):
        sys.exit(__doc__)
    if args[0] == "list":
        for name, (_, data, shape) in NETWORKS.items():
            print(name, data, shape)
        return
    opset = 13
    if "--opset" in args:
        k = args.index("--opset")
        opset = int(args[k + 1])
        del args[k:k + 2]
    out = args[1]
    os.makedirs(out, exist_ok=True)
    for name in args[2:] or NETWORKS:
        path = os.path.join(out, f"{name}.onnx")
        export(build(name), name, path, opset)
        if args[0] == "ops":
            import onnx
            ops = sorted({n.op_type for n in onnx.load(path).graph.node})
            print(f"{name} (opset {opset}): {' '.join(ops)}")
        else:
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
