#!/usr/bin/python3
"""PyTorch models for psrun's ONNX import (docs/models.md "Importing from PyTorch").

Defines an MLP, LeNet-5 and mnist_deep as torch.nn.Sequential and exports each with
torch.onnx.export (opset 13, dynamic batch axis). Training mode keeps the Dropout node, so psrun
trains the dropout layer too; in eval mode PyTorch leaves dropout out of the graph.

Usage: pytorch_models.py OUT_DIR [NAME ...]   (default: all three; writes OUT_DIR/NAME.onnx)
"""
import sys

import torch
from torch import nn


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 100), nn.ReLU(), nn.Linear(100, 10))


def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.Tanh(), nn.AvgPool2d(2),
        nn.Conv2d(6, 16, 5), nn.Tanh(), nn.AvgPool2d(2),
        nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.Tanh(), nn.Linear(120, 84), nn.Tanh(),
        nn.Linear(84, 10))


def mnist_deep():
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Dropout(0.5),
        nn.Linear(1024, 10))


MODELS = {"mlp": mlp, "lenet5": lenet5, "mnist_deep": mnist_deep}


def export(model, path):
    torch.onnx.export(model, torch.zeros(1, 1, 28, 28), path, opset_version=13,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "N"}, "logits": {0: "N"}})


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    torch.manual_seed(0)
    for name in sys.argv[2:] or MODELS:
        export(MODELS[name](), f"{sys.argv[1]}/{name}.onnx")
        print(f"wrote {sys.argv[1]}/{name}.onnx")


if __name__ == "__main__":
    main()
