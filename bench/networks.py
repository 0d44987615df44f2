#!/usr/bin/python3
"""The seven networks of psrun's graph-engine acceptance (docs/models.md "Networks from PyTorch"),
written as ordinary torch.nn modules, and their data.

Each network trains on real data on this host: Fashion-MNIST (Debian's dataset-fashion-mnist) for
the CNNs, MNIST (psrun data fetch) for the MLP and the sequence models, which read an image's 28
rows as a sequence of 28 features, and, for the embedding-bag classifier, MNIST turned into token
ids: the positions (0..783) of an image's 32 brightest pixels, sorted (tokens.npy; the label
stays the digit).

    networks.py export OUT_DIR [--opset K] [NAME ...]  # NAME.onnx (training mode) and NAME.eval.onnx
    networks.py tokens DATA_DIR OUT_DIR      # {train,test}-{tokens,labels}.npy from MNIST's IDX files
    networks.py predict NAME ONNX INPUT.npy OUT.npy   # NAME's module with ONNX's weights, by name:
                                             # softmax probabilities of INPUT (uint8 images / 255, or ids)
    networks.py list

Exports follow docs/models.md: opset 13 unless --opset says otherwise, training=TrainingMode.TRAINING, do_constant_folding=False,
a dynamic batch axis; the eval-mode export (the CNNs) is what inference tools read.
"""
import gzip
import os
import sys

import numpy as np
import torch
from torch import nn


# 1. ResNet-20 (He et al. 2016, CIFAR variant) on 1-channel 28x28 images: 3x3 convs, BatchNorm,
# identity shortcuts within a stage and 1x1 conv + BN shortcuts where the stage halves the size.
class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + self.shortcut(x))


class ResNet20(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        blocks, cin = [], 16
        for cout, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(3):
                blocks.append(BasicBlock(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        x = self.pool(self.blocks(x))
        return self.fc(torch.flatten(x, 1))


# 2. A CNN with BatchNorm2d and BatchNorm1d.
def bn_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Linear(256, 10))


# 3. A MobileNet-style network: a stride-2 3x3 conv with padding 1, depthwise separable blocks
# (depthwise 3x3, pointwise 1x1), BatchNorm, ReLU6, global average pooling.
def dw_block(cin, cout, stride):
    return nn.Sequential(
        nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin), nn.ReLU6(),
        nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU6())


def mobilenet():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6(),
        dw_block(32, 64, 1), dw_block(64, 128, 2), dw_block(128, 128, 1),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))


# 4. An MLP with LayerNorm and GELU.
def mlp_ln_gelu():
    return nn.Sequential(
        nn.Flatten(), nn.Linear(784, 512), nn.LayerNorm(512), nn.GELU(), nn.Dropout(0.1),
        nn.Linear(512, 256), nn.LayerNorm(256), nn.GELU(), nn.Linear(256, 10))


# 5. An LSTM over the 28 rows of an image, the last step's output classified.
class LstmRows(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.lstm = nn.LSTM(28, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, 10)

    def forward(self, x):  # x: [N, 1, 28, 28]
        y, _ = self.lstm(x.squeeze(1))
        return self.fc(y[:, -1, :])


# 6. A 2-layer Transformer encoder over the 28 rows (each projected to d_model), mean-pooled.
class TransformerRows(nn.Module):
    def __init__(self, d_model=64, heads=4, layers=2):
        super().__init__()
        self.embed = nn.Linear(28, d_model)
        self.pos = nn.Parameter(torch.zeros(28, 1, d_model))
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=128, dropout=0.1)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.fc = nn.Linear(d_model, 10)

    def forward(self, x):  # x: [N, 1, 28, 28] -> rows [28, N, 28]
        rows = x.squeeze(1).transpose(0, 1)
        h = self.encoder(self.embed(rows) + self.pos)
        return self.fc(h.mean(dim=0))


# 7. An embedding-bag classifier: nn.Embedding over token ids, mean over the bag, a linear layer.
class EmbeddingBag(nn.Module):
    def __init__(self, vocabulary=784, dim=64):
        super().__init__()
        self.embedding = nn.Embedding(vocabulary, dim)
        self.fc = nn.Linear(dim, 10)

    def forward(self, ids):  # ids: [N, 32] int64
        return self.fc(self.embedding(ids).mean(dim=1))


NETWORKS = {
    "resnet20": (ResNet20, "fashion-mnist", (2, 1, 28, 28)),
    "bn_cnn": (bn_cnn, "fashion-mnist", (2, 1, 28, 28)),
    "mobilenet": (mobilenet, "fashion-mnist", (2, 1, 28, 28)),
    "mlp_ln_gelu": (mlp_ln_gelu, "mnist", (2, 1, 28, 28)),
    "lstm_rows": (LstmRows, "mnist", (2, 1, 28, 28)),
    "transformer_rows": (TransformerRows, "mnist", (2, 1, 28, 28)),
    "embedding_bag": (EmbeddingBag, "mnist-tokens", (2, 32)),
}
CNNS = ("resnet20", "bn_cnn", "mobilenet")


def build(name, seed=0):
    torch.manual_seed(seed)
    return NETWORKS[name][0]()


def example_input(name):
    shape = NETWORKS[name][2]
    if name == "embedding_bag":
        return torch.zeros(shape, dtype=torch.int64)
    return torch.zeros(shape)


def export(model, name, path, training, opset=13):
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    model.train(training)
    torch.onnx.export(model, example_input(name), path, opset_version=opset, training=mode,
                      do_constant_folding=not training, input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def idx_file(data_dir, name):
    for ext in ("", ".gz"):
        path = os.path.join(data_dir, name + ext)
        if os.path.exists(path):
            return path
    sys.exit(f"{name} not found in {data_dir} (psrun data fetch)")


def tokens_of(images, count=32):
    """The positions of each image's `count` brightest pixels, sorted: [N, count] int64."""
    flat = images.reshape(len(images), -1).astype(np.int32)
    # Ties broken by position (a stable sort of -value), so the tokens are deterministic.
    order = np.argsort(-flat, axis=1, kind="stable")[:, :count]
    return np.sort(order, axis=1).astype(np.int64)


def write_tokens(data_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = read_idx(idx_file(data_dir, prefix + "-images-idx3-ubyte"))
        labels = read_idx(idx_file(data_dir, prefix + "-labels-idx1-ubyte"))
        np.save(os.path.join(out_dir, split + "-tokens.npy"), tokens_of(images))
        np.save(os.path.join(out_dir, split + "-labels.npy"), labels.astype(np.int64))
        print(f"wrote {out_dir}/{split}-tokens.npy ({len(images)} x 32) and {split}-labels.npy")


def load_onnx_weights(model, path):
    """Copies every parameter and buffer of `model` from the ONNX initializer of the same name
    (num_batches_tracked aside); exits naming what is missing or mis-shaped."""
    import onnx
    from onnx import numpy_helper
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    state = model.state_dict()
    for key, value in state.items():
        if key.endswith("num_batches_tracked"):
            continue
        if key not in weights:
            sys.exit(f"{path}: no initializer named {key}")
        if tuple(weights[key].shape) != tuple(value.shape):
            sys.exit(f"{path}: {key} is {weights[key].shape}, the module's is {tuple(value.shape)}")
        state[key] = torch.from_numpy(weights[key].copy())
    model.load_state_dict(state)
    return len(state)


def predict(name, onnx_path, input_path, out_path):
    model = build(name)
    loaded = load_onnx_weights(model, onnx_path)
    model.eval()
    data = np.load(input_path)
    x = torch.from_numpy(data.astype(np.int64)) if name == "embedding_bag" else \
        torch.from_numpy(data.astype(np.float32) / 255.0).reshape(len(data), 1, 28, 28)
    with torch.no_grad():
        probabilities = torch.softmax(model(x), dim=1).numpy()
    np.save(out_path, probabilities.astype(np.float32))
    print(f"{name}: {loaded} tensors from {onnx_path}; {len(data)} predictions in {out_path}")


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "predict":
        predict(*sys.argv[2:])
        return
    if len(sys.argv) < 2 or sys.argv[1] not in ("export", "tokens", "list"):
        sys.exit(__doc__)
    if sys.argv[1] == "list":
        for name, (_, data, shape) in NETWORKS.items():
            print(name, data, shape)
        return
    if sys.argv[1] == "tokens":
        write_tokens(sys.argv[2], sys.argv[3])
        return
    args = sys.argv[2:]
    opset = 13
    if "--opset" in args:
        k = args.index("--opset")
        opset = int(args[k + 1])
        del args[k:k + 2]
    out = args[0]
    os.makedirs(out, exist_ok=True)
    for name in args[1:] or NETWORKS:
        model = build(name)
        export(model, name, os.path.join(out, name + ".onnx"), training=True, opset=opset)
        print(f"wrote {out}/{name}.onnx")
        if name in CNNS:
            export(model, name, os.path.join(out, name + ".eval.onnx"), training=False, opset=opset)
            print(f"wrote {out}/{name}.eval.onnx")


if __name__ == "__main__":
    main()
