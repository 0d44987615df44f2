#!/usr/bin/python3
"""Sequence models as PyTorch 1.13 exports them (opset 13, training mode, no constant folding;
the *_folded ones with it),
with a fixed batch and PyTorch's outputs on it, for onnx_sequence_test.cpp:
  <dir>/<name>.onnx, <name>.input (int64 ids or float32, raw little-endian, [N, ...]),
  <name>.output (float32 raw, PyTorch's output in eval mode) and <name>.grads.json ({"r": R,
  "grads": {parameter name: gradient, flat}}: the gradients of sum(y * R) in training mode).
Usage: sequence_models.py <dir>"""
import functools
import json
import sys

import torch
from torch import nn


class EmbeddingClassifier(nn.Module):  # nn.Embedding, flatten, linear
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(11, 6)
        self.fc = nn.Linear(4 * 6, 3)

    def forward(self, ids):
        return self.fc(torch.flatten(self.emb(ids), 1))


class Recurrent(nn.Module):  # an LSTM, GRU or RNN over the rows, batch_first, its last step, linear
    def __init__(self, cell, bidirectional):
        super().__init__()
        self.rnn = cell(5, 7, batch_first=True, bidirectional=bidirectional)
        self.fc = nn.Linear(7 * (2 if bidirectional else 1), 3)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1, :])


class Packed(nn.Module):  # pack_padded_sequence(enforce_sorted=False) into an LSTM (lengths: x[:, :, 0] != 0)
    def __init__(self, bidirectional, cell_state=False):
        super().__init__()
        self.rnn = nn.LSTM(5, 7, batch_first=True, bidirectional=bidirectional)
        self.fc = nn.Linear(7, 3)
        self.cell_state = cell_state

    def forward(self, x):
        lengths = (x[:, :, 0] != 0).sum(1)
        _, (h, c) = self.rnn(nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))
        return self.fc((c if self.cell_state else h)[-1])


class SortedBatch(nn.Module):  # the batch sorted by a score, returned in that order: not a packed sequence
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(5, 3)

    def forward(self, x):
        order = x[:, :, 0].sum(1).argsort(descending=True)
        return self.fc(x.sum(1))[order]


def export(model, x, path, folded=False):
    model.train()
    torch.onnx.export(model, x, path + ".onnx", opset_version=13, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=folded, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    model.eval()
    with torch.no_grad():
        y = model(x)
    x.numpy().tofile(path + ".input")
    y.numpy().astype("float32").tofile(path + ".output")
    model.train()
    model.zero_grad()
    r = torch.randn(y.shape)
    (model(x) * r).sum().backward()
    grads = {name: p.grad.flatten().tolist() for name, p in model.named_parameters()}
    with open(path + ".grads.json", "w") as f:
        json.dump({"r": r.flatten().tolist(), "grads": grads}, f)


def main():
    out = sys.argv[1]
    torch.manual_seed(5)
    export(EmbeddingClassifier(), torch.randint(0, 11, (3, 4), dtype=torch.int64), out + "/embedding")
    relu_rnn = functools.partial(nn.RNN, nonlinearity="relu")
    for name, cell in (("lstm", nn.LSTM), ("gru", nn.GRU), ("rnn", nn.RNN), ("rnn_relu", relu_rnn)):
        for bidirectional in (False, True):
            x = torch.randn(3, 4, 5)
            export(Recurrent(cell, bidirectional), x, out + "/" + name + ("_bi" if bidirectional else ""))
        # Constant folding leaves plain W, R, B initializers in ONNX's gate order (layout "onnx").
        export(Recurrent(cell, False), torch.randn(3, 4, 5), out + "/" + name + "_folded", folded=True)
    # A packed sequence's last cell state (imported as a layer per step); refusals: a packed
    # bidirectional node of ONNX's layout (constant folding), a sort of the batch whose order the
    # graph returns.
    x = torch.randn(3, 4, 5)
    x[1, 2:] = 0
    export(Packed(False, cell_state=True), x, out + "/packed_cell_state")
    export(Packed(True), x, out + "/packed_bi_folded", folded=True)
    export(SortedBatch(), x, out + "/sorted_batch")
    # Refusals: what oneDNN's cells cannot honour.
    import onnx
    from onnx import helper
    for name, attr in (("lstm_clip", helper.make_attribute("clip", 3.0)),
                       ("gru_activations", helper.make_attribute("activations", ["Relu", "Tanh"])),
                       ("rnn_sigmoid", helper.make_attribute("activations", ["Sigmoid"]))):
        m = onnx.load(out + "/" + name.split("_")[0] + ".onnx")
        node = next(n for n in m.graph.node if n.op_type in ("LSTM", "GRU", "RNN"))
        for a in [a for a in node.attribute if a.name == attr.name]:
            node.attribute.remove(a)
        node.attribute.append(attr)
        onnx.save(m, out + "/" + name + ".onnx")


if __name__ == "__main__":
    main()
