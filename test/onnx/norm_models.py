#!/usr/bin/python3
"""PyTorch's normalisation layers as torch.onnx.export (opset 13) writes them, for psrun's import
tests (test/onnx/onnx_norm_test.cpp), with what PyTorch computes on a fixed batch. The files in
test/onnx/models/norm/ are this script's output (Debian's python3-torch 1.13); run it again
there to regenerate them.

Writes to OUT_DIR:
  bn_train.onnx  a CNN with BatchNorm2d (momentum 0.2) and BatchNorm1d, exported in training
                 mode: BatchNormalization with 5 outputs, the updated statistics dangling;
                 its running statistics are those the exporter's tracing forward left (one
                 training forward on the batch, = reference.json's "running"), not the
                 module's before the export;
  bn_eval.onnx   the same module exported in eval mode (PyTorch folds Conv + BatchNorm2d; the
                 BatchNorm1d after the Linear stays, with 1 output and the statistics before
                 any training forward);
  ln.onnx        an MLP with nn.LayerNorm and GELU: the opset-13 decomposition;
  reference.json the batch (5 x 1 x 8 x 8), the CNN's outputs in training mode (batch
                 statistics) and the running statistics that forward leaves, its outputs in
                 eval mode before that forward, and the MLP's outputs.
Exits 77 when torch cannot be imported.

Usage: norm_models.py OUT_DIR
"""
import copy
import json
import sys

try:
    import torch
    from torch import nn
except ImportError:
    sys.exit(77)


class BnCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(4, momentum=0.2)
        self.fc1 = nn.Linear(4 * 4 * 4, 8)
        self.bn2 = nn.BatchNorm1d(8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.bn1(self.conv(x))), 2)
        x = torch.relu(self.bn2(self.fc1(torch.flatten(x, 1))))
        return self.fc2(x)


def ln_mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 3))


def export(model, x, path, training):
    # Tracing in training mode moves the statistics (the file keeps the moved ones); the module
    # gets its own back.
    saved = copy.deepcopy(model.state_dict())
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, x, path, opset_version=13, training=mode, do_constant_folding=not training,
                      input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "N"}, "logits": {0: "N"}})
    model.load_state_dict(saved)


def flat(t):
    return [float(v) for v in t.detach().reshape(-1)]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    torch.manual_seed(0)
    cnn = BnCnn()
    with torch.no_grad():  # statistics and affine parameters away from their initial values
        cnn.train()
        for _ in range(3):
            cnn(torch.randn(16, 1, 8, 8) * 2 + 0.5)
        for bn in (cnn.bn1, cnn.bn2):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    x = torch.randn(5, 1, 8, 8)
    export(cnn, x, f"{out}/bn_train.onnx", True)
    export(cnn, x, f"{out}/bn_eval.onnx", False)
    ref = {"shape": list(x.shape), "input": flat(x)}
    cnn.eval()
    with torch.no_grad():
        ref["bn_eval_out"] = flat(cnn(x))
        cnn.train()
        ref["bn_train_out"] = flat(cnn(x))
    ref["running"] = {f"{name}.{stat}": flat(getattr(bn, stat)) for name, bn in (("bn1", cnn.bn1), ("bn2", cnn.bn2))
                      for stat in ("running_mean", "running_var")}

    mlp = ln_mlp()
    with torch.no_grad():
        mlp[2].weight.uniform_(0.5, 1.5)
        mlp[2].bias.uniform_(-0.5, 0.5)
    export(mlp, x, f"{out}/ln.onnx", True)
    with torch.no_grad():
        ref["ln_out"] = flat(mlp(x))
    with open(f"{out}/reference.json", "w") as f:
        json.dump(ref, f)


if __name__ == "__main__":
    main()
