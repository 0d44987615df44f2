#!/usr/bin/env python3
"""Same-host reference for time to accuracy: TF's mnist_deep trained with PyTorch (Debian's python3-torch) on
real MNIST with the recipe psrun's main job uses, one JSON line.

Not part of the build or the tests: docs/benchmarks.md "Time to accuracy" compares it with psrun in the same
session. The recipe mirrors `workerd --standalone`: batch B drawn from a fresh permutation each epoch, Adam with
TF's epsilon, torch.optim.lr_scheduler.OneCycleLR (cos, PyTorch's defaults pct_start 0.3, div 25, final_div
1e4: psrun's `--lr-schedule onecycle:total=N`) peaking at --learning-rate, evaluation on the 10,000 test images
every --eval-every steps. Only the training steps are timed (evaluation excluded, reported apart), as psrun's
summary.json does. Images come from psrun's data cache (`psrun data fetch`).

    /usr/bin/python3 bench/pytorch_time_to_accuracy.py --steps 1300 --learning-rate 4e-3 --seed 1 [--bf16]
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

from pytorch_mnist_deep import MnistDeep


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, prefix):
    for ext in ("", ".gz"):
        images = os.path.join(data_dir, prefix + "-images-idx3-ubyte" + ext)
        if os.path.exists(images):
            labels = os.path.join(data_dir, prefix + "-labels-idx1-ubyte" + ext)
            x = torch.from_numpy(read_idx(images).astype(np.float32) / 255.0).unsqueeze(1)
            return x, torch.from_numpy(read_idx(labels).astype(np.int64))
    raise SystemExit(f"no {prefix} images in {data_dir}: run `psrun data fetch`")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=os.path.expanduser("~/.cache/psrun/data/mnist"))
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=1300)
    ap.add_argument("--learning-rate", type=float, default=4e-3)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bf16", action="store_true", help="autocast to bfloat16 on the CPU")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train_x, train_y = load(a.data_dir, "train")
    test_x, test_y = load(a.data_dir, "t10k")
    model = MnistDeep().to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=a.learning_rate, eps=1e-8)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.learning_rate, total_steps=a.steps)
    generator = torch.Generator().manual_seed(a.seed)
    order, pos = torch.randperm(len(train_y), generator=generator), 0

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            for i in range(0, len(test_y), 500):
                correct += (model(test_x[i:i + 500]).argmax(1) == test_y[i:i + 500]).sum().item()
        model.train()
        return correct / len(test_y)

    train_seconds = eval_seconds = 0.0
    evaluations = []
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        if pos + a.batch_size > len(order):
            order, pos = torch.randperm(len(train_y), generator=generator), 0
        idx = order[pos:pos + a.batch_size]
        pos += a.batch_size
        x = train_x[idx].contiguous(memory_format=torch.channels_last)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = F.cross_entropy(model(x), train_y[idx])
        loss.backward()
        opt.step()
        sched.step()
        train_seconds += time.perf_counter() - t0
        if step % a.eval_every == 0 or step == a.steps:
            t1 = time.perf_counter()
            evaluations.append({"step": step, "test_accuracy": evaluate(), "train_seconds": round(train_seconds, 2)})
            eval_seconds += time.perf_counter() - t1

    def first(threshold):
        hit = [e for e in evaluations if e["test_accuracy"] >= threshold]
        return hit[0] if hit else None

    print(json.dumps({
        "bench": "pytorch_time_to_accuracy", "torch": torch.__version__, "batch_size": a.batch_size,
        "steps": a.steps, "learning_rate": a.learning_rate, "schedule": "onecycle", "bf16": a.bf16,
        "threads": a.threads, "seed": a.seed, "final_test_accuracy": evaluations[-1]["test_accuracy"],
        "train_seconds": round(train_seconds, 2), "eval_seconds": round(eval_seconds, 2),
        "first_99_0": first(0.99), "first_99_2": first(0.992),
    }))


if __name__ == "__main__":
    main()
