#!/usr/bin/python3
"""Modules that return their own loss, trained by psrun and by PyTorch side by side with the same
initial weights, data and recipe (docs/benchmarks.md "Losses in the graph against PyTorch").

  graph_loss_recipes.py two_heads [--seeds 1,2,3] [--steps 600]
    An MNIST MLP with two heads: softmax over the digits and a 4-tag multi-label sigmoid head
    (even, > 4, prime, a closed loop), loss = cross-entropy + 0.5 x binary cross-entropy, written
    in the module and exported with it. psrun trains the export through psd (psrun local --ps 1
    --workers 2 --sync, batch 64 per worker, adam_torch 1e-3); PyTorch trains the module (batch
    128, torch.optim.Adam 1e-3). Both trained weight sets are scored by the same code on the
    MNIST test set: the digit head's accuracy, the tag head's exact match and mean F1.

  graph_loss_recipes.py char_lm [--seeds 1,2,3] [--steps 800] [--order torch|psrun]
    A causal character-level transformer (2 pre-norm blocks, d 64, 4 heads, context 32) on the
    license texts every Debian system carries (/usr/share/common-licenses), per-token
    cross-entropy in the module. Recipe: AdamW (weight decay 0.1 on tensors of rank >= 2, betas
    0.9/0.95), linear warm-up over 50 updates then cosine to 0, global-norm clipping 1.0, batch
    128. psrun: psrun local --ps 1 --workers 1 (the clipping is then over the same batch as
    PyTorch's). Validation loss: psrun's test_loss (summary.json) against PyTorch's on the same
    last 10% of the text. --order psrun gives PyTorch the very batches psrun's worker draws
    (workerd/data/sampler.cpp's shuffle, replayed here bit for bit) instead of its own shuffle.

One JSON line per run, then a table of medians. Needs build/launcher/psrun (or PSRUN=path), python3-torch and
python3-onnx, and MNIST (psrun data fetch) for two_heads.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
import onnx
from onnx import numpy_helper

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import networks  # noqa: E402
from more_networks import GptBlock  # noqa: E402

PSRUN = os.environ.get("PSRUN") or os.path.join(here, "..", "build", "launcher", "psrun")


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk, self.digits, self.tags = nn.Linear(784, 128), nn.Linear(128, 10), nn.Linear(128, 4)

    def heads(self, x):
        h = torch.tanh(self.trunk(x.flatten(1)))
        return self.digits(h), self.tags(h)

    def forward(self, input, labels, tags):
        d, t = self.heads(input)
        return F.cross_entropy(d, labels) + 0.5 * F.binary_cross_entropy_with_logits(t, tags)


class CharLm(nn.Module):
    def __init__(self, vocabulary, d=64, heads=4, layers=2, length=32):
        super().__init__()
        self.token = nn.Embedding(vocabulary, d)
        self.position = nn.Parameter(torch.randn(length, d) * 0.02)
        self.blocks = nn.ModuleList([GptBlock(d, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocabulary)
        self.register_buffer("causal", torch.triu(torch.full((length, length), float("-inf")), diagonal=1),
                             persistent=False)

    def forward(self, input, targets):
        x = self.token(input) + self.position
        for block in self.blocks:
            x = block(x, self.causal)
        return F.cross_entropy(self.out(self.norm(x)).transpose(1, 2), targets)


def tags_of(y):
    return np.stack([y % 2 == 0, y > 4, np.isin(y, [2, 3, 5, 7]), np.isin(y, [0, 6, 8, 9])], 1).astype(np.float32)


def export(model, inputs, path):
    names = list(inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, tuple(torch.from_numpy(v[:2]) for v in inputs.values()), path, opset_version=17,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=names, output_names=["loss"], dynamic_axes={n: {0: "N"} for n in names})


def load_weights(model, path):
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(weights[name].copy()))


def psrun(args, log):
    with open(log, "w") as f:
        rc = subprocess.run([PSRUN] + args, stdout=f, stderr=subprocess.STDOUT, timeout=3600).returncode
    if rc != 0:
        sys.exit(f"psrun {' '.join(args[:3])} ... exited {rc}:\n" + open(log).read()[-2000:])


def save(tmp, arrays):
    paths = {}
    for name, v in arrays.items():
        paths[name] = os.path.join(tmp, name + ".npy")
        np.save(paths[name], v)
    return paths


M64 = (1 << 64) - 1


class SplitMix64:
    """common/rng.h's psrun::Rng, bit for bit."""

    def __init__(self, seed, stream=None):
        self.state = seed & M64
        if stream is not None:
            self.state = self.next() ^ ((stream * 0xD1B54A32D192ED03) & M64)

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def below(self, bound):
        return (self.next() * bound) >> 64


def psrun_batches(n, batch, seed):
    """The batches (example indices) a single psrun worker (shard 0/1) trains on, as
    workerd/data/sampler.cpp draws them: epoch e's order is a Fisher-Yates shuffle of epoch e-1's,
    keyed by (seed, epoch); a batch runs on across an epoch's end."""
    order, epoch, position = list(range(n)), 0, 0

    def shuffle():
        rng = SplitMix64(seed, epoch)
        for i in range(n, 1, -1):
            j = rng.below(i)
            order[i - 1], order[j] = order[j], order[i - 1]

    shuffle()
    while True:
        out = []
        for _ in range(batch):
            if position == n:
                epoch, position = epoch + 1, 0
                shuffle()
            out.append(order[position])
            position += 1
        yield torch.tensor(out)


def torch_batches(n, batch, seed):
    """Batches in a random order drawn by torch from `seed`, redrawn each epoch (the last partial
    batch of an epoch dropped)."""
    generator = torch.Generator().manual_seed(seed)
    while True:
        order = torch.randperm(n, generator=generator)
        for position in range(0, n - batch + 1, batch):
            yield order[position:position + batch]


def batches(n, batch, seed, order):
    """order "torch": PyTorch's own shuffle; "psrun": the very batches psrun's worker trains on."""
    return psrun_batches(n, batch, seed) if order == "psrun" else torch_batches(n, batch, seed)


def torch_train(model, arrays, steps, seed, optimizer, after_backward=None, schedule=None, order="torch"):
    """`steps` steps of batch 128 over `arrays` (the module's inputs) in the `order` of batches()
    from `seed`. Returns the seconds taken."""
    torch.set_num_threads(2)
    tensors = [torch.from_numpy(a) for a in arrays]
    draw = batches(len(tensors[0]), 128, seed, order)
    start = time.perf_counter()
    for _ in range(steps):
        i = next(draw)
        optimizer.zero_grad(set_to_none=True)
        model(*(t[i] for t in tensors)).backward()
        if after_backward:
            after_backward()
        optimizer.step()
        if schedule:
            schedule.step()
    return time.perf_counter() - start


def two_heads_data():
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    d = os.path.join(cache, "psrun", "data", "mnist")
    out = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x = networks.read_idx(networks.idx_file(d, prefix + "-images-idx3-ubyte")).astype(np.float32) / 255.0
        y = networks.read_idx(networks.idx_file(d, prefix + "-labels-idx1-ubyte")).astype(np.int64)
        out[split] = (x.reshape(-1, 1, 28, 28), y, tags_of(y))
    return out


def score_two_heads(model, x, y, tags):
    with torch.no_grad():
        d, t = model.heads(torch.from_numpy(x))
    accuracy = float((d.argmax(1).numpy() == y).mean())
    predicted = t.numpy() >= 0
    truth = tags >= 0.5
    exact = float((predicted == truth).all(1).mean())
    f1 = [2 * (p & q).sum() / max(2 * (p & q).sum() + (p & ~q).sum() + (~p & q).sum(), 1)
          for p, q in zip(predicted.T, truth.T)]
    return {"digit_accuracy": accuracy, "tag_exact_match": exact, "tag_mean_f1": float(np.mean(f1))}


def run_two_heads(seed, steps, tmp):
    data = two_heads_data()
    (x, y, tags), (tx, ty, ttags) = data["train"], data["test"]
    torch.manual_seed(seed)
    model = TwoHeads()
    init = os.path.join(tmp, f"two_heads-{seed}.onnx")
    export(model, {"input": x, "labels": y, "tags": tags}, init)
    results = []
    seconds = torch_train(model, (x, y, tags), steps, seed, torch.optim.Adam(model.parameters(), lr=1e-3))
    results.append({"system": "pytorch", "seed": seed, "train_seconds": round(seconds, 2),
                    **score_two_heads(model, tx, ty, ttags)})
    # psrun through psd
    p = save(tmp, {"x": x, "y": y.astype(np.int32), "tags": tags, "tx": tx, "ty": ty.astype(np.int32), "ttags": ttags})
    run_dir = os.path.join(tmp, f"run-two_heads-{seed}")
    psrun(["local", "--ps", "1", "--workers", "2", "--sync", "--", "--model", init, "--model-dir", run_dir,
           "--steps", str(steps), "--batch-size", "64", "--optimizer", "adam_torch", "--learning-rate", "1e-3",
           "--seed", str(seed), "--precision", "f32", "--log-every", "100000",
           "--train-images", p["x"], "--train-labels", p["y"], "--train-input", "tags=" + p["tags"],
           "--test-images", p["tx"], "--test-labels", p["ty"], "--test-input", "tags=" + p["ttags"]],
          os.path.join(tmp, "psrun.log"))
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    exported = os.path.join(tmp, f"two_heads-{seed}.trained.onnx")
    psrun(["export", "--model-dir", run_dir, "-o", exported], os.path.join(tmp, "export.log"))
    trained = TwoHeads()
    load_weights(trained, exported)
    scores = score_two_heads(trained, tx, ty, ttags)
    results.append({"system": "psrun", "seed": seed, "train_seconds": round(summary["train_seconds"], 2),
                    "summary_test_accuracy": summary["test_accuracy"], **scores})
    return results


def corpus():
    text = b""
    root = "/usr/share/common-licenses"
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if os.path.isfile(path) and not os.path.islink(path):
            text += open(path, "rb").read()
    chars = sorted(set(text))
    ids = np.frombuffer(bytes(chars.index(c) for c in text), dtype=np.uint8).astype(np.int64)
    return ids, len(chars)


def windows(ids, length, stride):
    starts = np.arange(0, len(ids) - length - 1, stride)
    x = np.stack([ids[s:s + length] for s in starts])
    return x, np.stack([ids[s + 1:s + length + 1] for s in starts])


def lm_rate(t, warmup, steps):
    """psrun's --lr-schedule cosine:steps=(steps - warmup) --lr-warmup-steps warmup, update t (1-based)."""
    if t <= warmup:
        return t / warmup
    s = min(t - warmup - 1, steps - warmup)
    return 0.5 * (1 + math.cos(math.pi * s / (steps - warmup)))


def run_char_lm(seed, steps, tmp, order="torch"):
    ids, vocabulary = corpus()
    cut = int(len(ids) * 0.9)
    x, t = windows(ids[:cut], 32, 8)
    vx, vt = windows(ids[cut:], 32, 32)
    vx, vt = vx[:len(vx) // 128 * 128], vt[:len(vt) // 128 * 128]  # whole evaluation batches
    torch.manual_seed(seed)
    model = CharLm(vocabulary)
    init = os.path.join(tmp, f"char_lm-{seed}.onnx")
    export(model, {"input": x, "targets": t}, init)
    warmup, lr = 50, 3e-3
    results = []
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                  lr=lr, betas=(0.9, 0.95), eps=1e-8)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lm_rate(step + 1, warmup, steps))
    seconds = torch_train(model, (x, t), steps, seed, optimizer,
                          lambda: nn.utils.clip_grad_norm_(model.parameters(), 1.0), schedule, order)
    with torch.no_grad():
        losses = [float(model(torch.from_numpy(vx[k:k + 128]), torch.from_numpy(vt[k:k + 128])))
                  for k in range(0, len(vx), 128)]
    results.append({"system": "pytorch", "seed": seed, "order": order, "train_seconds": round(seconds, 2),
                    "validation_loss": float(np.mean(losses))})
    p = save(tmp, {"x": x, "t": t, "y": np.zeros(len(x), np.int32), "vx": vx, "vt": vt,
                   "vy": np.zeros(len(vx), np.int32)})
    run_dir = os.path.join(tmp, f"run-char_lm-{seed}")
    psrun(["local", "--ps", "1", "--workers", "1", "--", "--model", init, "--model-dir", run_dir,
           "--steps", str(steps), "--batch-size", "128", "--optimizer", "adamw", "--learning-rate", str(lr),
           "--beta1", "0.9", "--beta2", "0.95", "--epsilon", "1e-8", "--weight-decay", "0.1",
           "--lr-schedule", f"cosine:steps={steps - warmup}", "--lr-warmup-steps", str(warmup),
           "--clip-global-norm", "1.0", "--seed", str(seed), "--precision", "f32", "--log-every", "100000",
           "--train-images", p["x"], "--train-labels", p["y"], "--train-input", "targets=" + p["t"],
           "--test-images", p["vx"], "--test-labels", p["vy"], "--test-input", "targets=" + p["vt"]],
          os.path.join(tmp, "psrun.log"))
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    results.append({"system": "psrun", "seed": seed, "order": "psrun", "train_seconds": round(summary["train_seconds"], 2),
                    "validation_loss": summary["test_loss"]})
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", choices=("two_heads", "char_lm"))
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--order", choices=("torch", "psrun"), default="torch",
                    help="char_lm: PyTorch's batches in its own shuffle, or the very batches psrun trains on")
    a = ap.parse_args()
    steps = a.steps or (600 if a.case == "two_heads" else 800)
    runs = []
    with tempfile.TemporaryDirectory(prefix="graph_loss_bench_") as tmp:
        for seed in (int(s) for s in a.seeds.split(",")):
            runs_of = run_two_heads(seed, steps, tmp) if a.case == "two_heads" else run_char_lm(seed, steps, tmp, a.order)
            for r in runs_of:
                r.update(case=a.case, steps=steps)
                print(json.dumps(r), flush=True)
                runs.append(r)
    keys = ["digit_accuracy", "tag_exact_match", "tag_mean_f1"] if a.case == "two_heads" else ["validation_loss"]
    print(f"| {a.case} | median PyTorch | median psrun | psrun - PyTorch |")
    print("|---|---|---|---|")
    for k in keys:
        mt = statistics.median(r[k] for r in runs if r["system"] == "pytorch")
        mp = statistics.median(r[k] for r in runs if r["system"] == "psrun")
        print(f"| {k} | {mt:.4f} | {mp:.4f} | {mp - mt:+.4f} ({100 * (mp - mt) / mt:+.2f}%) |")


if __name__ == "__main__":
    main()
