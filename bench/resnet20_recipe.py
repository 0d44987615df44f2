#!/usr/bin/python3
"""ResNet-20's published recipe on Fashion-MNIST, trained by psrun and by PyTorch side by side from
the same initial weights (docs/benchmarks.md "ResNet-20's recipe against PyTorch", issue 35).

  resnet20_recipe.py [--seeds 1,2,3] [--epochs 15] [--batch-size 128] [--order psrun|torch]

The module is bench/networks.py's ResNet20 (1-channel 28x28 input), drawn with torch.manual_seed(seed)
and exported by torch.onnx (opset 17, training mode); psrun starts from that export. The recipe, the
same on both sides, and given to psrun as a recipe file (--recipe):
  SGD with Nesterov momentum 0.9, learning rate 0.1, weight decay 5e-4 coupled to the gradient (torch's
  weight_decay) on conv and linear weights only (tensors of rank >= 2: no decay on BatchNorm scales and
  shifts or on biases), cosine from 0.1 to 0 over every update (stepped per update), label smoothing 0.1,
  batch 128, epochs x 60000 / 128 updates (rounded down), no augmentation.
psrun trains through psd (psrun local --ps 1 --workers 1). PyTorch trains the module
(torch.optim.SGD, LambdaLR with the same per-update factor, F.cross_entropy with label_smoothing;
channels_last, its fastest layout here) on the very batches psrun's worker draws (--order psrun,
the default; --order torch: its own shuffle). Images are uint8 / 255 on both sides. Both trained
weight sets (psrun's through psrun export) are scored by the same code on the 10,000 test images,
in eval mode (running statistics).

One JSON line per run, then the medians. Needs build/launcher/psrun (or PSRUN=path), python3-torch and
python3-onnx, and Fashion-MNIST (psrun data fetch --dataset fashion-mnist).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import networks  # noqa: E402
from graph_loss_recipes import batches, lm_rate, psrun  # noqa: E402


def fashion_mnist():
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    d = os.path.join(cache, "psrun", "data", "fashion-mnist")
    out = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x = networks.read_idx(networks.idx_file(d, prefix + "-images-idx3-ubyte"))
        y = networks.read_idx(networks.idx_file(d, prefix + "-labels-idx1-ubyte"))
        out[split] = (x.astype(np.float32).reshape(-1, 1, 28, 28) / 255.0, y.astype(np.int64))
    return d, out


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        predicted = torch.cat([model(torch.from_numpy(x[k:k + 1000])).argmax(1) for k in range(0, len(x), 1000)])
    return float((predicted.numpy() == y).mean())


def torch_train(model, x, y, steps, batch, seed, order):
    """`steps` updates of the recipe over (x, y), batches in graph_loss_recipes.batches()'s `order` from
    `seed`. Returns the seconds taken."""
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 5e-4}, {"params": rest, "weight_decay": 0.0}],
                                lr=0.1, momentum=0.9, nesterov=True)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lm_rate(step + 1, 0, steps))
    # channels_last: PyTorch's fastest form of this network on CPU (docs/benchmarks.md); the
    # same arithmetic as the default layout, in another order.
    model.to(memory_format=torch.channels_last)
    xs, ys = torch.from_numpy(x).contiguous(memory_format=torch.channels_last), torch.from_numpy(y)
    draw = batches(len(xs), batch, seed, order)
    model.train()
    start = time.perf_counter()
    for _ in range(steps):
        i = next(draw)
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(xs[i]), ys[i], label_smoothing=0.1).backward()
        optimizer.step()
        schedule.step()
    return time.perf_counter() - start


def run(seed, steps, batch, tmp, data_dir, data, systems, order):
    (x, y), (tx, ty) = data["train"], data["test"]
    model = networks.build("resnet20", seed)
    init = os.path.join(tmp, f"resnet20-{seed}.onnx")
    networks.export(model, "resnet20", init, training=True, opset=17)
    results = []
    if "pytorch" in systems:
        seconds = torch_train(model, x, y, steps, batch, seed, order)
        results.append({"system": "pytorch", "seed": seed, "order": order, "steps": steps, "train_seconds": round(seconds, 1),
                        "test_accuracy": accuracy(model, tx, ty)})
    if "psrun" in systems:
        recipe = os.path.join(tmp, "recipe.json")
        with open(recipe, "w") as f:
            json.dump({"recipe": {"optimizer": "nesterov", "learning_rate": 0.1, "momentum": 0.9,
                                  "weight_decay": 5e-4, "weight_decay_on": "matrices", "label_smoothing": 0.1,
                                  "lr_schedule": f"cosine:steps={steps}", "batch_size": batch, "steps": steps}}, f)
        run_dir = os.path.join(tmp, f"run-resnet20-{seed}")
        psrun(["local", "--ps", "1", "--workers", "1", "--", "--model", init, "--model-dir", run_dir,
               "--recipe", recipe, "--data-dir", data_dir, "--dataset", "fashion-mnist", "--seed", str(seed),
               "--precision", "f32", "--log-every", "100000", "--eval-every", "0"],
              os.path.join(tmp, f"psrun-{seed}.log"))
        summary = json.load(open(os.path.join(run_dir, "summary.json")))
        exported = os.path.join(tmp, f"resnet20-{seed}.trained.onnx")
        psrun(["export", "--model-dir", run_dir, "-o", exported], os.path.join(tmp, "export.log"))
        trained = networks.build("resnet20", seed)
        networks.load_onnx_weights(trained, exported)
        results.append({"system": "psrun", "seed": seed, "steps": steps,
                        "train_seconds": round(summary["train_seconds"], 1),
                        "summary_test_accuracy": summary["test_accuracy"], "test_accuracy": accuracy(trained, tx, ty),
                        "recorded_recipe": json.load(open(os.path.join(run_dir, "recipe.json")))["recipe"]})
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=0, help="updates (default: epochs x 60000 / batch)")
    ap.add_argument("--systems", default="pytorch,psrun", help="either or both (comma-separated)")
    ap.add_argument("--order", choices=("torch", "psrun"), default="psrun",
                    help="PyTorch's batches: the very ones psrun trains on (default), or its own shuffle")
    a = ap.parse_args()
    if a.epochs < 1 or not 1 <= a.batch_size <= 60000 or a.steps < 0:
        ap.error("--epochs must be >= 1, --batch-size in [1, 60000] and --steps >= 0")
    steps = a.steps or a.epochs * 60000 // a.batch_size
    systems = set(a.systems.split(","))
    data_dir, data = fashion_mnist()
    runs = []
    with tempfile.TemporaryDirectory(prefix="resnet20_recipe_") as tmp:
        for seed in (int(s) for s in a.seeds.split(",")):
            for r in run(seed, steps, a.batch_size, tmp, data_dir, data, systems, a.order):
                r.update(case="resnet20_recipe", epochs=a.epochs)
                print(json.dumps(r), flush=True)
                runs.append(r)
    medians = {s: statistics.median(r["test_accuracy"] for r in runs if r["system"] == s)
               for s in ("pytorch", "psrun") if any(r["system"] == s for r in runs)}
    print(json.dumps({"case": "resnet20_recipe", "median_test_accuracy": medians}))
    if len(medians) == 2:
        print(f"median test accuracy: PyTorch {100 * medians['pytorch']:.2f}%, psrun {100 * medians['psrun']:.2f}%, "
              f"psrun - PyTorch {100 * (medians['psrun'] - medians['pytorch']):+.2f} points")


if __name__ == "__main__":
    main()
