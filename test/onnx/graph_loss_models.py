#!/usr/bin/python3
"""Modules that end in their own loss, as torch.onnx exports them (docs/models.md "Loss in the
graph"), checked whole against PyTorch, then trained through psd.

Each module's forward takes its inputs and its labels or targets and returns a scalar loss:
  ce_mlp       MNIST MLP, nn.CrossEntropyLoss with class weights (SoftmaxCrossEntropyLoss)
  two_heads    a shared trunk, a softmax head on the labels plus 0.5 x a multi-label sigmoid head
               (binary_cross_entropy_with_logits, exported element-wise, ReduceMean over every axis)
  token_ce     per-token cross-entropy over [N, C, L] with padding ignored (ignore_index=0), the
               labels [N, L] an input of their own
  mse          a regression's mean squared error written out ((y - t) ** 2).mean()
  soft_targets cross-entropy against probability targets (a SoftmaxCrossEntropyLoss with float
               labels) plus F.kl_div with reduction="batchmean" (a division by the batch size)
  focal        a focal loss written out with torch.gather (GatherElements) of the labels' entries
then a regression ending in nn.MSELoss (exported by python/psrun_torch.py, which writes it: torch
1.13 cannot) trained through psd from images and a target column without any labels: its test
loss below a third of the untrained model's, reported by psrun local's summary, its predictions
(a value head) from psrun predict without targets and scored by psrun eval as torch computes
them from the exported weights; and, last,
bench/graph_loss_recipes.py's character transformer trained 30 updates on one fixed batch
with the transformer recipe (AdamW, warm-up + cosine, clipping) by both: the losses must agree; and
8 SGD steps of it on 300 windows, PyTorch on the batches graph_loss_recipes.psrun_batches replays:
psrun's logged step losses must be PyTorch's (the benchmarks' --order psrun is psrun's order).
At opsets 14 and 17, one batch of real MNIST data goes through `psrun model check --gradients`
and through the module in float64: the loss and every trainable tensor's gradient are compared
by name (max |g_psrun - g_torch| / max |g_torch| <= TOLERANCE). Then ce_mlp and two_heads train
through psd (psrun local, 2 workers, --sync) on MNIST and their summary.json must report the
head's test accuracy above 0.85 and a test loss; psrun export writes the trained loss graph.

Usage: graph_loss_models.py PSRUN [--data MNIST_DIR]   (exit 77 without torch)
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
    from torch import nn
    import torch.nn.functional as F
except ImportError:
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench"))
import networks  # noqa: E402
from torch_compare import worst_gradient  # noqa: E402

TOLERANCE = 2e-3
BATCH = 16


class CeMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 64), nn.Linear(64, 10)
        self.loss = nn.CrossEntropyLoss(weight=torch.linspace(0.5, 1.5, 10))

    def forward(self, input, labels):
        return self.loss(self.fc2(F.relu(self.fc1(input.flatten(1)))), labels)


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk, self.classes, self.tags = nn.Linear(784, 64), nn.Linear(64, 10), nn.Linear(64, 4)

    def forward(self, input, labels, tags):
        h = torch.tanh(self.trunk(input.flatten(1)))
        return F.cross_entropy(self.classes(h), labels) + 0.5 * F.binary_cross_entropy_with_logits(self.tags(h), tags)


class TokenCe(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed, self.out = nn.Embedding(50, 8), nn.Linear(8, 50)

    def forward(self, input, targets):
        return F.cross_entropy(self.out(torch.tanh(self.embed(input))).transpose(1, 2), targets, ignore_index=0)


class Mse(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 16), nn.Linear(16, 3)

    def forward(self, input, targets):
        return ((self.fc2(torch.tanh(self.fc1(input.flatten(1)))) - targets) ** 2).mean()


class Regression(nn.Module):  # three float targets from an image, nn.MSELoss in the graph
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 13 * 13, 32),
                                 nn.ReLU(), nn.Linear(32, 3))
        self.loss = nn.MSELoss()

    def forward(self, input, targets):
        return self.loss(self.net(input), targets)


class SoftTargets(nn.Module):
    """Probability targets: cross-entropy against them (torch writes a SoftmaxCrossEntropyLoss
    with float labels) plus F.kl_div(..., reduction="batchmean"), which divides by the batch
    size computed from the input's shape."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 32), nn.Linear(32, 10)

    def forward(self, input, targets):
        logits = self.fc2(torch.tanh(self.fc1(input.flatten(1))))
        return F.cross_entropy(logits, targets) + F.kl_div(F.log_softmax(logits, 1), targets, reduction="batchmean")


class Focal(nn.Module):
    """A focal loss written out with torch.gather (ONNX GatherElements) of the labels' entries."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(784, 32), nn.Linear(32, 10)

    def forward(self, input, labels):
        log_p = F.log_softmax(self.fc2(torch.tanh(self.fc1(input.flatten(1)))), 1).gather(1, labels.unsqueeze(1))
        return (-(1 - log_p.exp()) ** 2 * log_p).mean()


def tags_of(labels):
    """Four multi-hot tags per digit: even, > 4, prime, a loop in its shape."""
    y = labels.astype(np.int64)
    return np.stack([y % 2 == 0, y > 4, np.isin(y, [2, 3, 5, 7]), np.isin(y, [0, 6, 8, 9])], 1).astype(np.float32)


def batch(name, images, labels):
    """The module's inputs by name (the first is the primary input) and the data's labels (or None)."""
    x = (images.astype(np.float32) / 255.0).reshape(len(images), 1, 28, 28)
    y = labels.astype(np.int64)
    if name in ("ce_mlp", "focal"):
        return {"input": x, "labels": y}, y
    if name == "soft_targets":  # labels smoothed: 0.91 on the digit, 0.01 elsewhere
        return {"input": x, "targets": (np.eye(10)[y] * 0.9 + 0.01).astype(np.float32)}, None
    if name == "two_heads":
        return {"input": x, "labels": y, "tags": tags_of(y)}, y
    if name == "token_ce":
        ids = networks.tokens_of(images)[:, :16].astype(np.int64) % 50
        targets = np.roll(ids, -1, axis=1)
        targets[:, -1] = 0  # padding: ignored
        return {"input": ids, "targets": targets}, None
    t = np.stack([y / 9.0, (y % 2).astype(np.float64), (y > 4).astype(np.float64)], 1).astype(np.float32)
    return {"input": x, "targets": t}, None


MODULES = {"ce_mlp": CeMlp, "two_heads": TwoHeads, "token_ce": TokenCe, "mse": Mse, "soft_targets": SoftTargets,
           "focal": Focal}


def export(model, inputs, path, opset):
    names = list(inputs)
    torch.onnx.export(model, tuple(torch.from_numpy(v) for v in inputs.values()), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=names, output_names=["loss"], dynamic_axes={n: {0: "N"} for n in names})


def torch_gradients(model, inputs):
    model.zero_grad()
    loss = model(*(torch.from_numpy(v) for v in inputs.values()))
    loss.backward()
    return float(loss), {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}


def run(args, log):
    with open(log, "w") as f:
        return subprocess.run(args, stdout=f, stderr=subprocess.STDOUT, timeout=600).returncode


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    psrun = os.path.abspath(args[0])
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    data = args[args.index("--data") + 1] if "--data" in args else os.path.join(cache, "psrun", "data", "mnist")
    images = networks.read_idx(networks.idx_file(data, "train-images-idx3-ubyte"))
    labels = networks.read_idx(networks.idx_file(data, "train-labels-idx1-ubyte"))
    test_images = networks.read_idx(networks.idx_file(data, "t10k-images-idx3-ubyte"))
    test_labels = networks.read_idx(networks.idx_file(data, "t10k-labels-idx1-ubyte"))
    tmp = tempfile.mkdtemp(prefix="graph_loss_")
    ok = True

    def check(what, cond, log=None):
        nonlocal ok
        print(f"{'ok' if cond else 'FAILED'}: {what}", flush=True)
        if not cond:
            ok = False
            if log and os.path.exists(log):
                print("    " + open(log).read()[-1500:].replace("\n", "\n    "))

    torch.manual_seed(0)
    for name, ctor in MODULES.items():
        model = ctor()
        inputs, y = batch(name, test_images[:BATCH], test_labels[:BATCH])
        for opset in (14, 17):
            path = f"{tmp}/{name}.{opset}.onnx"
            export(model, inputs, path, opset)
            cmd = [psrun, "model", "check", path, "--json", "--tolerance", "0.25",
                   "--gradients", f"{tmp}/{name}.{opset}.grads.json"]
            for k, (input_name, v) in enumerate(inputs.items()):
                np.save(f"{tmp}/{name}.{input_name}.npy", v)
                cmd += ["--input", (f"{input_name}=" if k else "") + f"{tmp}/{name}.{input_name}.npy"]
            log = f"{tmp}/{name}.{opset}.check.log"
            rc = run(cmd, log)
            if rc not in (0, 1) or not os.path.exists(f"{tmp}/{name}.{opset}.grads.json"):
                check(f"{name} opset {opset}: psrun model check exits 0 or 1 (rc={rc})", False, log)
                continue
            mine = json.load(open(f"{tmp}/{name}.{opset}.grads.json"))
            torch_loss, theirs = torch_gradients(model.double(), {k: v.astype(np.float64) if v.dtype.kind == "f" else v
                                                                  for k, v in inputs.items()})
            model.float()
            worst, worst_name, missing = worst_gradient(mine["tensors"], theirs)
            loss_error = abs(mine["loss"] - torch_loss) / max(abs(torch_loss), 1e-8)
            check(f"{name} opset {opset}: loss {mine['loss']:.6f} vs torch {torch_loss:.6f}, {len(theirs)} gradients, "
                  f"worst {worst_name} {worst:.2e}" + (f", missing {missing}" if missing else ""),
                  not missing and worst <= TOLERANCE and loss_error <= TOLERANCE, log)

    # Training through psd: the data's labels feed the graph's label input; the tags are a column.
    train_n, test_n = 12000, 2000
    for name in ("ce_mlp", "two_heads"):
        model = MODULES[name]()
        train, _ = batch(name, images[:train_n], labels[:train_n])
        test, _ = batch(name, test_images[:test_n], test_labels[:test_n])
        path = f"{tmp}/{name}.train.onnx"
        export(model, {k: v[:2] for k, v in train.items()}, path, 17)
        files = []
        for split, values, n in (("train", train, images[:train_n]), ("test", test, test_images[:test_n])):
            np.save(f"{tmp}/{name}.{split}-x.npy", values["input"])
            np.save(f"{tmp}/{name}.{split}-y.npy", values["labels"].astype(np.int32))
            files += [f"--{split}-images", f"{tmp}/{name}.{split}-x.npy", f"--{split}-labels", f"{tmp}/{name}.{split}-y.npy"]
            if "tags" in values:
                np.save(f"{tmp}/{name}.{split}-tags.npy", values["tags"])
                files += [f"--{split}-input", f"tags={tmp}/{name}.{split}-tags.npy"]
        run_dir, log = f"{tmp}/run-{name}", f"{tmp}/{name}.train.log"
        rc = run([psrun, "local", "--ps", "1", "--workers", "2", "--sync", "--grace", "30", "--", "--model", path,
                  "--model-dir", run_dir, "--steps", "300", "--batch-size", "32", "--optimizer", "adam_torch",
                  "--learning-rate", "2e-3", "--threads", "1", "--log-every", "1000"] + files, log)
        check(f"{name}: trains 300 steps through psd, 2 workers, --sync (rc={rc})", rc == 0, log)
        if rc != 0:
            continue
        summary = json.load(open(f"{run_dir}/summary.json"))
        accuracy, loss = summary.get("test_accuracy", -1), summary.get("test_loss", -1)
        check(f"{name}: the head's test accuracy {accuracy:.4f} > 0.85, test loss {loss:.4f} reported",
              accuracy > 0.85 and 0 < loss < 1.0, log)
        exported = f"{tmp}/{name}.trained.onnx"
        rc = run([psrun, "export", "--model-dir", run_dir, "-o", exported], log)
        check(f"{name}: psrun export writes the trained loss graph (rc={rc})", rc == 0, log)
        if rc == 0:
            import onnx
            from onnx import numpy_helper
            weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(exported).graph.initializer}
            missing = [n for n, _ in model.named_parameters() if n not in weights]
            check(f"{name}: the export holds every parameter by its torch name", not missing, log)
            if missing:
                continue
            with torch.no_grad():
                for n, p in model.named_parameters():
                    p.copy_(torch.from_numpy(weights[n].copy()))
            with torch.no_grad():
                t = tuple(torch.from_numpy(v) for v in test.values())
                torch_loss = float(model(*t))
            check(f"{name}: the exported weights in torch give the test loss psrun reported ({torch_loss:.4f} vs "
                  f"{loss:.4f})", abs(torch_loss - loss) <= 1e-3 * max(1.0, abs(loss)))
            # psrun predict: the softmax of the head (the scores its label loss reads).
            # (--output F.npz: one array per head; a single head's is "probabilities".)
            probs = f"{tmp}/{name}.probs.npz"
            cmd = [psrun, "predict", "--model-dir", run_dir, "--images", f"{tmp}/{name}.test-x.npy", "--output", probs]
            if "tags" in test:
                cmd += ["--input", f"tags={tmp}/{name}.test-tags.npy"]
            rc = run(cmd, log)
            diff = float("inf")
            if rc == 0:
                with torch.no_grad():
                    x = torch.from_numpy(test["input"]).flatten(1)
                    if name == "ce_mlp":
                        scores = model.fc2(F.relu(model.fc1(x)))
                    else:
                        scores = model.classes(torch.tanh(model.trunk(x)))
                    arrays = dict(np.load(probs))
                    got = arrays.get("probabilities")
                    if got is None:  # two_heads: the softmax head's array (10 classes)
                        got = next(v for v in arrays.values() if v.shape[1] == 10)
                    diff = float(np.abs(got - torch.softmax(scores, 1).numpy()).max())
            check(f"{name}: psrun predict gives the head's softmax as torch computes it (largest difference {diff:.1e})",
                  rc == 0 and diff <= 1e-4, log)
            # (psrun's test loss is the mean of the evaluation batches' losses: with class
            # weights a batch's mean divides by its own summed weights, so ce_mlp's differs from
            # the whole set's weighted mean in the fourth digit.)
    # A regression ending in nn.MSELoss (which torch 1.13 cannot export; psrun_torch.export()
    # writes it), trained through psd from images and a target column alone: no labels given.
    sys.path.insert(0, os.path.join(here, "..", "..", "python"))
    import psrun_torch
    torch.manual_seed(0)
    model = Regression()
    train, _ = batch("mse", images[:train_n], labels[:train_n])
    test, _ = batch("mse", test_images[:test_n], test_labels[:test_n])
    path = f"{tmp}/regression.onnx"
    psrun_torch.export(model, tuple(torch.from_numpy(v[:2]) for v in train.values()), path,
                       input_names=["input", "targets"])
    files = []
    for split, values in (("train", train), ("test", test)):
        np.save(f"{tmp}/regression.{split}-x.npy", values["input"])
        np.save(f"{tmp}/regression.{split}-t.npy", values["targets"])
        files += [f"--{split}-images", f"{tmp}/regression.{split}-x.npy",
                  f"--{split}-input", f"targets={tmp}/regression.{split}-t.npy"]
    with torch.no_grad():
        untrained = float(model(*(torch.from_numpy(v) for v in test.values())))
    run_dir, log = f"{tmp}/run-regression", f"{tmp}/regression.train.log"
    rc = run([psrun, "local", "--ps", "1", "--workers", "2", "--sync", "--grace", "30", "--", "--model", path,
              "--model-dir", run_dir, "--steps", "300", "--batch-size", "32", "--optimizer", "adam_torch",
              "--learning-rate", "2e-3", "--threads", "1", "--log-every", "1000"] + files, log)
    check(f"regression (nn.MSELoss): trains 300 steps through psd without labels (rc={rc})", rc == 0, log)
    if rc == 0:
        summary = json.load(open(f"{run_dir}/summary.json"))
        loss = summary.get("test_loss", -1)
        check(f"regression: test loss {loss:.4f} below a third of the untrained model's {untrained:.4f}, "
              f"no accuracy ({summary.get('test_accuracy')})",
              0 < loss < untrained / 3 and summary.get("test_accuracy") == -1, log)
        said = re.search(r"final test loss ([0-9.]+) at global step 300", open(log).read())
        check("regression: psrun local's summary reports the final test loss",
              said is not None and abs(float(said.group(1)) - loss) <= 1e-3 * max(loss, 1e-3), log)
        # Its predictions are a value head (the operand its loss subtracts the targets from):
        # psrun predict writes them as they are without the targets, psrun eval scores them by
        # MSE and MAE, both as torch computes them from the exported trained weights.
        exported = f"{tmp}/regression.trained.onnx"
        rc = run([psrun, "export", "--model-dir", run_dir, "-o", exported], log)
        check(f"regression: psrun export (rc={rc})", rc == 0, log)
        if rc == 0:
            import onnx
            from onnx import numpy_helper
            weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(exported).graph.initializer}
            with torch.no_grad():
                for n, p in model.named_parameters():
                    p.copy_(torch.from_numpy(weights[n].copy()))
                want = model.net(torch.from_numpy(test["input"])).numpy()
            values = f"{tmp}/regression.values.npz"
            rc = run([psrun, "predict", "--model-dir", run_dir, "--images", f"{tmp}/regression.test-x.npy",
                      "--output", values], log)
            got = next(iter(np.load(values).values())) if rc == 0 else np.zeros(0)
            diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
            check(f"regression: psrun predict without the targets gives torch's predictions (largest difference "
                  f"{diff:.1e})", rc == 0 and diff <= 1e-4, log)
            elog = f"{tmp}/regression.eval.log"
            rc = run([psrun, "eval", "--model-dir", run_dir, "--test-images", f"{tmp}/regression.test-x.npy",
                      "--test-input", f"targets={tmp}/regression.test-t.npy"], elog)
            said = re.search(r"MSE ([0-9.e-]+), MAE ([0-9.e-]+)", open(elog).read())
            mse = float(((want - test["targets"]) ** 2).mean())
            mae = float(np.abs(want - test["targets"]).mean())
            check(f"regression: psrun eval scores the value head by torch's MSE {mse:.5f} and MAE {mae:.5f}",
                  rc == 0 and said is not None and abs(float(said.group(1)) - mse) <= 1e-3 * mse
                  and abs(float(said.group(2)) - mae) <= 1e-3 * mae, elog)
    # The transformer recipe whole (AdamW with decay on rank >= 2, betas 0.9/0.95, warm-up then
    # cosine, global-norm clipping) on one fixed batch, so the data order cannot differ: psrun's
    # loss after 30 updates against PyTorch's.
    import graph_loss_recipes as recipes
    ids, vocabulary = recipes.corpus()
    x, t = recipes.windows(ids[:20000], 32, 8)
    x, t = x[:128], t[:128]
    steps, warmup, lr = 30, 5, 3e-3
    torch.manual_seed(1)
    lm = recipes.CharLm(vocabulary)
    path = f"{tmp}/char_lm.onnx"
    recipes.export(lm, {"input": x, "targets": t}, path)
    decay = [p for p in lm.parameters() if p.dim() >= 2]
    rest = [p for p in lm.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                  lr=lr, betas=(0.9, 0.95), eps=1e-8)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: recipes.lm_rate(s + 1, warmup, steps))
    X, T = torch.from_numpy(x), torch.from_numpy(t)
    for _ in range(steps):
        optimizer.zero_grad()
        lm(X, T).backward()
        nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
        optimizer.step()
        schedule.step()
    with torch.no_grad():
        torch_loss = float(lm(X, T))
    files = []
    for key, v in (("x", x), ("t", t), ("y", np.zeros(len(x), np.int32))):
        np.save(f"{tmp}/char_lm.{key}.npy", v)
    for split in ("train", "test"):
        files += [f"--{split}-images", f"{tmp}/char_lm.x.npy", f"--{split}-labels", f"{tmp}/char_lm.y.npy",
                  f"--{split}-input", f"targets={tmp}/char_lm.t.npy"]
    run_dir, log = f"{tmp}/run-char_lm", f"{tmp}/char_lm.train.log"
    rc = run([psrun, "local", "--ps", "1", "--workers", "1", "--grace", "30", "--", "--model", path,
              "--model-dir", run_dir, "--steps", str(steps), "--batch-size", "128", "--optimizer", "adamw",
              "--learning-rate", str(lr), "--beta1", "0.9", "--beta2", "0.95", "--epsilon", "1e-8",
              "--weight-decay", "0.1", "--lr-schedule", f"cosine:steps={steps - warmup}",
              "--lr-warmup-steps", str(warmup), "--clip-global-norm", "1.0", "--precision", "f32",
              "--threads", "1", "--log-every", "1000"] + files, log)
    loss = json.load(open(f"{run_dir}/summary.json"))["test_loss"] if rc == 0 else float("nan")
    check(f"char_lm recipe on a fixed batch, 30 updates: psrun's loss {loss:.6f} vs PyTorch's {torch_loss:.6f}",
          rc == 0 and abs(loss - torch_loss) <= 1e-4 * abs(torch_loss), log)

    # graph_loss_recipes.psrun_batches replays the batches psrun's worker trains on (the benchmarks'
    # --order psrun): 300 windows in batches of 128, so epochs end inside batches 3, 5 and 8. Each
    # step's training loss psrun logs (before that step's update) must be PyTorch's on the replayed
    # batch with the same SGD updates.
    x, t = recipes.windows(ids[:20000], 32, 8)
    x, t = x[:300], t[:300]
    torch.manual_seed(2)
    lm = recipes.CharLm(vocabulary)
    path = f"{tmp}/char_lm_order.onnx"
    recipes.export(lm, {"input": x, "targets": t}, path)
    draw, sgd, torch_losses = recipes.psrun_batches(len(x), 128, 7), torch.optim.SGD(lm.parameters(), lr=0.05), []
    X, T = torch.from_numpy(x), torch.from_numpy(t)
    for _ in range(8):
        i = next(draw)
        sgd.zero_grad()
        step_loss = lm(X[i], T[i])
        step_loss.backward()
        sgd.step()
        torch_losses.append(float(step_loss))
    for key, v in (("x", x), ("t", t), ("y", np.zeros(len(x), np.int32))):
        np.save(f"{tmp}/order.{key}.npy", v)
    run_dir, log = f"{tmp}/run-order", f"{tmp}/order.train.log"
    rc = run([psrun, "local", "--ps", "1", "--workers", "1", "--grace", "30", "--", "--model", path,
              "--model-dir", run_dir, "--steps", "8", "--batch-size", "128", "--optimizer", "sgd",
              "--learning-rate", "0.05", "--seed", "7", "--precision", "f32", "--threads", "1", "--log-every", "1",
              "--train-images", f"{tmp}/order.x.npy", "--train-labels", f"{tmp}/order.y.npy",
              "--train-input", f"targets={tmp}/order.t.npy", "--test-images", f"{tmp}/order.x.npy",
              "--test-labels", f"{tmp}/order.y.npy", "--test-input", f"targets={tmp}/order.t.npy"], log)
    logged = [float(m.group(1)) for m in re.finditer(r"\[workerd:0\] step \d+/8 .*? loss ([0-9.]+)", open(log).read())]
    close = len(logged) == 8 and all(abs(a - b) <= 2e-4 * abs(b) for a, b in zip(logged, torch_losses))
    check(f"psrun_batches replays psrun's order: logged losses {logged} vs PyTorch's "
          f"{[round(v, 4) for v in torch_losses]} on the replayed batches", rc == 0 and close, log)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
