#!/usr/bin/env python3
"""Same-host reference: TF's mnist_deep trained with PyTorch (Debian's python3-torch), Adam, one JSON line.

Not part of the build or the tests: it measures what `psrun bench train` is compared against on the machine
at hand (the targets of docs/benchmarks.md are ratios to PyTorch's best configuration). Inputs are random
tensors in preallocated buffers, so the figure is the training step alone (no data loading).

    /usr/bin/python3 bench/pytorch_mnist_deep.py --batch-size 100 --threads 2 [--channels-last] [--steps 100]

Best configuration on Debian 12: OpenBLAS as libblas.so.3 (libopenblas0-openmp), --channels-last, and glibc's
malloc told to keep freed activations (GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:
glibc.malloc.trim_threshold=1073741824; 32 MiB is the largest mmap threshold glibc accepts).
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class MnistDeep(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(7 * 7 * 64, 1024)
        self.fc2 = nn.Linear(1024, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.dropout(F.relu(self.fc1(torch.flatten(x, 1))), p=0.5, training=self.training)
        return self.fc2(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--learning-rate", type=float, default=1e-3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    fmt = torch.channels_last if a.channels_last else torch.contiguous_format
    model = MnistDeep().to(memory_format=fmt)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=a.learning_rate)
    x = torch.randn(a.batch_size, 1, 28, 28).to(memory_format=fmt)
    y = torch.randint(0, 10, (a.batch_size,))

    def step():
        opt.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    median = times[len(times) // 2]
    total = sum(times)
    print(json.dumps({
        "bench": "pytorch_mnist_deep", "torch": torch.__version__, "batch_size": a.batch_size,
        "threads": a.threads, "channels_last": a.channels_last, "steps": a.steps,
        "images_per_sec": round(a.batch_size * a.steps / total, 1),
        "images_per_sec_median_step": round(a.batch_size / median, 1),
        "ms_per_step_median": round(1000 * median, 2),
        "blas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3"),
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
        "loadavg_1m": os.getloadavg()[0],
    }))


if __name__ == "__main__":
    main()
