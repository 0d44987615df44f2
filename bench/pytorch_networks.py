#!/usr/bin/python3
"""PyTorch's side of the comparison with psrun on the seven networks of bench/networks.py
(bench/compare_networks.sh runs both sides; docs/benchmarks.md "The seven networks against PyTorch").

    pytorch_networks.py train NAME --seed S --steps N --batch-size B --learning-rate LR
                        --data-dir D [--tokens DIR] [--threads T] [--export INIT.onnx]
        builds NAME's module with torch.manual_seed(S), writes its initial weights as a
        training-mode ONNX export (--export: psrun starts from the very same weights), then trains
        it N steps with Adam (betas 0.9/0.999, eps 1e-8, constant LR) on batches of B drawn from an
        epoch-wise shuffle seeded by S, and evaluates the 10,000 test examples in eval mode.
        One JSON line: test_accuracy, train_seconds.
    pytorch_networks.py bench NAME --batch-size B --threads T [--steps N] [--warmup W] [--channels-last]
        training steps (forward, cross-entropy, backward, Adam) on random inputs held in memory:
        the step alone, no data loading, as `psrun bench train`. One JSON line: images_per_sec.

NAME is one of bench/networks.py's seven or bench/more_networks.py's fifteen (issue 34's; train
exports those at opset 17, as current PyTorch does). The token models (embedding_bag and
more_networks.py's mnist-tokens ones) train on `networks.py tokens`; bench gives them random ids
in [1, 784).

Data: pixels scaled to [0, 1] (what psrun's readers give an IDX file without --normalize); the
embedding bag reads the token ids of `networks.py tokens`.
"""
import argparse
import importlib.util
import json
import os
import platform
import statistics
import time
import warnings

import numpy as np
import torch
from torch import nn

def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


networks = _load("networks")
more_networks = _load("more_networks")  # bench only: the fifteen networks of issue 34


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


def blas():
    """Which BLAS Debian's libblas.so.3 alternative gives torch: "openblas-openmp", "blas" (the
    reference BLAS, ~10x slower on dense layers), ..."""
    path = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    return os.path.basename(os.path.dirname(path))


def uses_tokens(name):
    """Whether NAME's input is token ids (networks.py tokens) rather than images."""
    if name in more_networks.NETWORKS:
        return more_networks.NETWORKS[name][1] == "mnist-tokens"
    return name == "embedding_bag"


def build(name, seed):
    if name in more_networks.NETWORKS:
        return more_networks.build(name, seed)
    return networks.build(name, seed)


def export_initial(model, name, path):
    """NAME's module as a training-mode ONNX export: psrun starts from these very weights."""
    with warnings.catch_warnings():  # the exporter's notes on training-mode BatchNorm
        warnings.simplefilter("ignore")
        if name in more_networks.NETWORKS:
            more_networks.export(model, name, path, opset=17)
        else:
            networks.export(model, name, path, training=True)


def load(name, data_dir, tokens_dir):
    """(train_x, train_y, test_x, test_y) as tensors: float images [N, 1, 28, 28] in [0, 1], or ids."""
    if uses_tokens(name):
        return tuple(torch.from_numpy(np.load(os.path.join(tokens_dir, f))) for f in
                     ("train-tokens.npy", "train-labels.npy", "test-tokens.npy", "test-labels.npy"))
    out = []
    for prefix in ("train", "t10k"):
        images = networks.read_idx(networks.idx_file(data_dir, prefix + "-images-idx3-ubyte"))
        labels = networks.read_idx(networks.idx_file(data_dir, prefix + "-labels-idx1-ubyte"))
        out.append(torch.from_numpy(images.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28))
        out.append(torch.from_numpy(labels.astype(np.int64)))
    return tuple(out)


def train(a):
    torch.set_num_threads(a.threads)
    model = build(a.name, a.seed)
    if a.export:
        export_initial(model, a.name, a.export)
    train_x, train_y, test_x, test_y = load(a.name, a.data_dir, a.tokens)
    generator = torch.Generator().manual_seed(a.seed)
    torch.manual_seed(a.seed)  # dropout
    optimizer = torch.optim.Adam(model.parameters(), lr=a.learning_rate, betas=(0.9, 0.999), eps=1e-8)
    average = None
    if a.ema_decay:  # psrun --ema-decay D: AveragedModel updated after every step, buffers averaged too
        decay = a.ema_decay
        average = torch.optim.swa_utils.AveragedModel(
            model, avg_fn=lambda averaged, current, n: decay * averaged + (1 - decay) * current, use_buffers=True)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    order, position = torch.randperm(len(train_x), generator=generator), 0
    start = time.perf_counter()
    for _ in range(a.steps):
        if position + a.batch_size > len(order):
            order, position = torch.randperm(len(train_x), generator=generator), 0
        index = order[position:position + a.batch_size]
        position += a.batch_size
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(train_x[index]), train_y[index])
        loss.backward()
        optimizer.step()
        if average is not None:
            average.update_parameters(model)
    seconds = time.perf_counter() - start

    def accuracy(module):
        module.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(test_x), 1000):
                correct += (module(test_x[i:i + 1000]).argmax(1) == test_y[i:i + 1000]).sum().item()
        return correct / len(test_x)

    result = {"system": "pytorch", "network": a.name, "seed": a.seed, "steps": a.steps,
              "batch_size": a.batch_size, "learning_rate": a.learning_rate, "optimizer": "torch.optim.Adam",
              "test_accuracy": accuracy(model), "train_seconds": round(seconds, 2),
              "threads": a.threads, "torch": torch.__version__}
    if average is not None:
        result.update(ema_decay=a.ema_decay, ema_test_accuracy=accuracy(average))
    print(json.dumps(result), flush=True)


def bench(a):
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = build(a.name, 1)
    if uses_tokens(a.name):
        x = torch.randint(1, 784, (a.batch_size, 32))
    else:
        x = torch.rand(a.batch_size, 1, 28, 28)
        if a.channels_last:
            model = model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (a.batch_size,))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    times = []
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    print(json.dumps({"system": "pytorch", "network": a.name, "batch_size": a.batch_size,
                      "threads": a.threads, "channels_last": a.channels_last, "steps": a.steps,
                      "median_step_ms": round(1e3 * median, 3),
                      "images_per_sec": round(a.batch_size / median, 1),
                      "mean_images_per_sec": round(a.batch_size * len(times) / sum(times), 1),
                      "cpu": cpu_model(), "torch": torch.__version__, "blas": blas()}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("train", "bench"))
    ap.add_argument("name", choices=tuple(networks.NETWORKS) + tuple(more_networks.NETWORKS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    ap.add_argument("--ema-decay", type=float, default=0.0,
                    help="train: also evaluate torch.optim.swa_utils.AveragedModel with this EMA decay")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data-dir")
    ap.add_argument("--tokens")
    ap.add_argument("--export")
    ap.add_argument("--channels-last", action="store_true")
    a = ap.parse_args()
    if a.mode == "train":
        if a.steps is None:
            ap.error("train needs --steps")
        if uses_tokens(a.name) != (a.tokens is not None) or (not uses_tokens(a.name) and not a.data_dir):
            ap.error("train needs --data-dir (images) or --tokens (the token models)")
        train(a)
    else:
        a.steps = a.steps or 50
        bench(a)


if __name__ == "__main__":
    main()
