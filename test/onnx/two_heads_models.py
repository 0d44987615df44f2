#!/usr/bin/python3
"""A model with two heads (docs/models.md "Heads"): a softmax head on the digit and a 4-tag
multi-label sigmoid head, their losses a weighted sum, through psd and against PyTorch.

  1. The torch module `forward(input, labels, tags) -> (loss, logits, tag_logits)` exported by
     torch.onnx at opsets 14 and 17: psrun imports it with the loss as its output and both
     outputs as heads (softmax on labels, sigmoid on tags); a module returning only the loss has
     the same heads, found in its graph.
  2. Trained through psd (`psrun local --ps 1 --workers 2 --sync`, adam_torch 2e-3, batch 32 per
     worker): summary.json reports each head's figures (test_accuracy/logits,
     test_label_accuracy/tag_logits, test_exact_match/..., test_mean_auc/..., and test_accuracy
     for the first softmax head) and they equal those PyTorch computes from the exported weights
     (psrun export keeps the heads as outputs beside the loss); psrun eval reports the same.
  3. The same module trained in PyTorch from the same initial weights with the same recipe
     (Adam in torch's form, batch 64, the same step count): each head's figure within
     SIDE_BY_SIDE points of psrun's (data order differs: a benchmark's bound, not an exact one).
  4. psrun predict --output F.npz: one array per head, the softmax and the sigmoid, equal to
     torch's within 1e-5; --output F.npy writes F.<head>.npy per head.
  5. The same model described in JSON with "heads" named: trains, evaluates and predicts per
     head; a "heads" entry naming a missing value exits 2 naming the field; an ONNX output that
     is no head exits 2.

Usage: two_heads_models.py PSRUN [--data MNIST_DIR] [--seed S]   (exit 77 without torch)
  --seed S: the initial weights (torch.manual_seed(S)), psrun's --seed and PyTorch's data order
            (S + 1); the test runs seed 0, docs/models.md's medians seeds 0, 1 and 2.
"""
import json
import os
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

STEPS, BATCH, LR = 400, 32, 2e-3
TRAIN_N, TEST_N = 12000, 5000
EXACT = 1e-3        # psrun's figures against torch's from the same weights (ties of float rounding)
SIDE_BY_SIDE = 0.02  # psrun against PyTorch trained side by side (2 points)


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk, self.classes, self.tags = nn.Linear(784, 64), nn.Linear(64, 10), nn.Linear(64, 4)

    def scores(self, input):
        h = torch.tanh(self.trunk(input.flatten(1)))
        return self.classes(h), self.tags(h)

    def forward(self, input, labels, tags):
        logits, tag_logits = self.scores(input)
        loss = F.cross_entropy(logits, labels) + 0.5 * F.binary_cross_entropy_with_logits(tag_logits, tags)
        return loss, logits, tag_logits


class LossOnly(TwoHeads):
    def forward(self, input, labels, tags):
        return super().forward(input, labels, tags)[0]


class NotAHead(TwoHeads):
    def forward(self, input, labels, tags):
        loss, _, _ = super().forward(input, labels, tags)
        return loss, torch.tanh(self.trunk(input.flatten(1)))


def tags_of(labels):
    """Four multi-hot tags per digit: even, > 4, prime, a loop in its shape."""
    y = labels.astype(np.int64)
    return np.stack([y % 2 == 0, y > 4, np.isin(y, [2, 3, 5, 7]), np.isin(y, [0, 6, 8, 9])], 1).astype(np.float32)


def split(images, labels):
    x = (images.astype(np.float32) / 255.0).reshape(len(images), 1, 28, 28)
    y = labels.astype(np.int64)
    return {"input": x, "labels": y, "tags": tags_of(y)}


def export(model, inputs, path, opset, outputs):
    names = list(inputs)
    torch.onnx.export(model, tuple(torch.from_numpy(v) for v in inputs.values()), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, input_names=names,
                      output_names=outputs, dynamic_axes={n: {0: "N"} for n in names + outputs[1:]})


def roc_auc(scores, truth):
    """Rank statistic, ties counted half; None with one class only."""
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        ranks[i:j] = (i + 1 + j) / 2.0
        i = j
    t = truth[order]
    pos, neg = t.sum(), len(t) - t.sum()
    if pos == 0 or neg == 0:
        return None
    return (ranks[t].sum() - pos * (pos + 1) / 2) / (pos * neg)


def figures(model, data):
    """Each head's figures as psrun names them, computed in torch (float32, as psrun runs)."""
    with torch.no_grad():
        logits, tag_logits = model.scores(torch.from_numpy(data["input"]))
    logits, tag_logits = logits.numpy(), tag_logits.numpy()
    predicted = tag_logits >= 0
    truth = data["tags"] >= 0.5
    aucs = [roc_auc(tag_logits[:, c], truth[:, c]) for c in range(truth.shape[1])]
    aucs = [a for a in aucs if a is not None]
    f1 = []
    for c in range(truth.shape[1]):
        tp = np.sum(predicted[:, c] & truth[:, c])
        d = 2 * tp + np.sum(predicted[:, c] & ~truth[:, c]) + np.sum(~predicted[:, c] & truth[:, c])
        f1.append(1.0 if d == 0 else 2.0 * tp / d)
    return {"test_accuracy/logits": float(np.mean(logits.argmax(1) == data["labels"])),
            "test_label_accuracy/tag_logits": float(np.mean(predicted == truth)),
            "test_exact_match/tag_logits": float(np.mean(np.all(predicted == truth, 1))),
            "test_mean_f1/tag_logits": float(np.mean(f1)),
            "test_mean_auc/tag_logits": float(np.mean(aucs))}


def run(args, log, timeout=900):
    with open(log, "w") as f:
        return subprocess.run(args, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode


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
    seed = int(args[args.index("--seed") + 1]) if "--seed" in args else 0
    tmp = tempfile.mkdtemp(prefix="two_heads_")
    ok = True

    def check(what, cond, log=None):
        nonlocal ok
        print(f"{'ok' if cond else 'FAILED'}: {what}", flush=True)
        if not cond:
            ok = False
            if log and os.path.exists(log):
                print("    " + open(log).read()[-2000:].replace("\n", "\n    "))

    train, test = split(images[:TRAIN_N], labels[:TRAIN_N]), split(test_images[:TEST_N], test_labels[:TEST_N])
    files = []
    for name, values in (("train", train), ("test", test)):
        np.save(f"{tmp}/{name}-x.npy", values["input"])
        np.save(f"{tmp}/{name}-y.npy", values["labels"].astype(np.int32))
        np.save(f"{tmp}/{name}-tags.npy", values["tags"])
        files += [f"--{name}-images", f"{tmp}/{name}-x.npy", f"--{name}-labels", f"{tmp}/{name}-y.npy",
                  f"--{name}-input", f"tags={tmp}/{name}-tags.npy"]
    small = {k: v[:2] for k, v in train.items()}

    # 1. Import: the loss and two heads, from three outputs or from the loss alone.
    torch.manual_seed(seed)
    model = TwoHeads()
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    want = [{"output": "logits", "kind": "softmax", "targets": "labels", "width": 10},
            {"output": "tag_logits", "kind": "sigmoid", "targets": "tags", "width": 4}]
    for opset in (14, 17):
        for ctor, outputs in ((TwoHeads, ["loss", "logits", "tag_logits"]), (LossOnly, ["loss"])):
            module = ctor()
            module.load_state_dict(initial)
            path = f"{tmp}/{ctor.__name__}.{opset}.onnx"
            export(module, small, path, opset, outputs)
            log = f"{tmp}/{ctor.__name__}.{opset}.show.log"
            r = subprocess.run([psrun, "model", "show", path, "--json"], capture_output=True, text=True)
            heads = json.loads(r.stdout).get("heads", []) if r.returncode == 0 else []
            if ctor is LossOnly:  # the heads are the Gemm outputs torch named
                heads = [dict(h, output=w["output"]) for h, w in zip(heads, want)]
            check(f"{ctor.__name__} opset {opset}: imported with heads {[(h['output'], h['kind']) for h in heads]}",
                  r.returncode == 0 and heads == want, log)
    path = f"{tmp}/TwoHeads.17.onnx"

    # 2. Through psd.
    run_dir, log = f"{tmp}/run", f"{tmp}/train.log"
    rc = run([psrun, "local", "--ps", "1", "--workers", "2", "--sync", "--grace", "30", "--", "--model", path,
              "--model-dir", run_dir, "--steps", str(STEPS), "--batch-size", str(BATCH), "--optimizer", "adam_torch",
              "--learning-rate", str(LR), "--threads", "1", "--log-every", "1000", "--seed", str(seed + 1)] + files, log)
    check(f"trains {STEPS} steps through psd, 2 workers, --sync (rc={rc})", rc == 0, log)
    if rc != 0:
        sys.exit(1)
    summary = json.load(open(f"{run_dir}/summary.json"))
    mine = {k: summary.get(k, -1) for k in figures(model, test)}
    print("psrun: " + ", ".join(f"{k} {v:.4f}" for k, v in mine.items()))
    check("summary.json: test_accuracy is the softmax head's", summary.get("test_accuracy") == mine["test_accuracy/logits"])
    evaluations = [json.loads(line) for line in open(f"{run_dir}/metrics.jsonl") if "test_mean_auc/tag_logits" in line]
    check(f"metrics.jsonl: {len(evaluations)} evaluations with every head's figures", len(evaluations) >= 1)
    exported = f"{tmp}/trained.onnx"
    rc = run([psrun, "export", "--model-dir", run_dir, "-o", exported], log)
    import onnx
    from onnx import numpy_helper
    proto = onnx.load(exported)
    outputs = [o.name for o in proto.graph.output]
    check(f"psrun export: outputs {outputs}", rc == 0 and outputs == ["loss", "logits", "tag_logits"], log)
    weights = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    trained = TwoHeads()
    with torch.no_grad():
        for n, p in trained.named_parameters():
            p.copy_(torch.from_numpy(weights[n].copy()))
    theirs = figures(trained, test)
    worst = max(abs(mine[k] - theirs[k]) for k in theirs)
    check(f"each head's figures equal torch's from the exported weights (worst difference {worst:.1e})", worst <= EXACT)
    # The export imports back with the same heads and gives the same figures.
    rc = run([psrun, "eval", "--onnx", exported, "--test-images", f"{tmp}/test-x.npy", "--test-labels",
              f"{tmp}/test-y.npy", "--test-input", f"tags={tmp}/test-tags.npy", "-o", f"{tmp}/eval-onnx"], log)
    got = json.load(open(f"{tmp}/eval-onnx/eval.json")) if rc == 0 else {}
    worst = max(abs(got.get(k, -1) - theirs[k]) for k in theirs)
    check(f"psrun eval --onnx of the export: each head's figures (worst difference {worst:.1e})", rc == 0 and worst <= EXACT,
          log)
    rc = run([psrun, "eval", "--model-dir", run_dir, "--test-images", f"{tmp}/test-x.npy", "--test-labels",
              f"{tmp}/test-y.npy", "--test-input", f"tags={tmp}/test-tags.npy", "-o", f"{tmp}/eval"], log)
    got = json.load(open(f"{tmp}/eval/eval.json")) if rc == 0 else {}
    worst = max(abs(got.get(k, -1) - mine[k]) for k in mine)
    check(f"psrun eval --model-dir: the figures of the run's last evaluation (worst difference {worst:.1e}), accuracy "
          f"{got.get('accuracy', -1):.4f}", rc == 0 and worst <= 1e-9 and got.get("accuracy") == mine["test_accuracy/logits"],
          log)

    # 3. PyTorch side by side: same initial weights, recipe and step count (batch 2 x 32).
    torch.manual_seed(seed + 1)
    torch.set_num_threads(2)
    reference = TwoHeads()
    reference.load_state_dict(initial)
    optimizer = torch.optim.Adam(reference.parameters(), lr=LR)
    x, y, t = (torch.from_numpy(train[k]) for k in ("input", "labels", "tags"))
    order = torch.randperm(TRAIN_N)
    for step in range(STEPS):
        at = (step * 2 * BATCH) % TRAIN_N
        if at + 2 * BATCH > TRAIN_N:
            order, at = torch.randperm(TRAIN_N), 0
        idx = order[at:at + 2 * BATCH]
        optimizer.zero_grad()
        reference(x[idx], y[idx], t[idx])[0].backward()
        optimizer.step()
    torch_figures = figures(reference, test)
    print("torch: " + ", ".join(f"{k} {v:.4f}" for k, v in torch_figures.items()))
    for key in ("test_accuracy/logits", "test_label_accuracy/tag_logits", "test_mean_auc/tag_logits"):
        diff = mine[key] - torch_figures[key]
        check(f"side by side, {key}: psrun {mine[key]:.4f}, PyTorch {torch_figures[key]:.4f} ({100 * diff:+.2f} points)",
              abs(diff) <= SIDE_BY_SIDE)

    # 4. psrun predict: every head.
    cmd = [psrun, "predict", "--model-dir", run_dir, "--images", f"{tmp}/test-x.npy", "--input",
           f"tags={tmp}/test-tags.npy"]
    rc = run(cmd + ["--output", f"{tmp}/probs.npz"], log)
    with torch.no_grad():
        logits, tag_logits = trained.scores(torch.from_numpy(test["input"]))
    want_probs = {"logits": torch.softmax(logits, 1).numpy(), "tag_logits": torch.sigmoid(tag_logits).numpy()}
    got = dict(np.load(f"{tmp}/probs.npz")) if rc == 0 else {}
    diffs = {k: float(np.abs(got[k] - v).max()) if k in got and got[k].shape == v.shape else float("inf")
             for k, v in want_probs.items()}
    check(f"psrun predict --output F.npz: arrays {sorted(got)}, largest differences from torch {diffs}",
          rc == 0 and sorted(got) == ["logits", "tag_logits"] and max(diffs.values()) <= 1e-5, log)
    rc = run(cmd + ["--output", f"{tmp}/probs.npy"], log)
    same = rc == 0 and all(np.array_equal(np.load(f"{tmp}/probs.{k}.npy"), got.get(k)) for k in want_probs)
    check("psrun predict --output F.npy: F.logits.npy and F.tag_logits.npy, the same arrays", same, log)
    r = subprocess.run(cmd[:-2] + ["--input", f"tags={tmp}/test-tags.npy"], capture_output=True, text=True)
    first = r.stdout.splitlines()[0].split() if r.returncode == 0 and r.stdout else []
    check(f"psrun predict prints each head per image ({' '.join(first)})",
          len(first) == 4 and first[3].startswith("tag_logits="))

    # 5. The model in JSON, heads named; and the refusals.
    layers = [
        {"kind": "flatten", "name": "flat", "inputs": ["input"]},
        {"kind": "dense", "name": "trunk", "units": 64}, {"kind": "tanh", "name": "h"},
        {"kind": "dense", "name": "logits", "inputs": ["h"], "units": 10},
        {"kind": "softmax_cross_entropy_loss", "name": "ce", "inputs": ["logits", "labels"]},
        {"kind": "dense", "name": "tag_logits", "inputs": ["h"], "units": 4},
        {"kind": "softplus", "name": "sp", "inputs": ["tag_logits"]},
        {"kind": "mul", "name": "xt", "inputs": ["tag_logits", "tags"]},
        {"kind": "sub", "name": "terms", "inputs": ["sp", "xt"]},
        {"kind": "reduce_mean", "name": "bce", "axes": [0, 1], "keepdims": False},
        {"kind": "constant", "name": "half", "shape": [], "values": [0.5]},
        {"kind": "mul", "name": "weighted", "inputs": ["bce", "half"]},
        {"kind": "add", "name": "total", "inputs": ["ce", "weighted"]},
    ]
    described = {"name": "two_heads_json",
                 "inputs": [{"name": "input", "dims": [1, 28, 28]}, {"name": "labels", "dims": [], "type": "int"},
                            {"name": "tags", "dims": [4]}],
                 "layers": layers,
                 "loss": {"kind": "graph", "labels": "labels",
                          "heads": [{"output": "logits", "kind": "softmax", "targets": "labels"},
                                    {"output": "tag_logits", "kind": "sigmoid", "targets": "tags"}]}}
    json_path = f"{tmp}/two_heads.json"
    json.dump(described, open(json_path, "w"))
    json_dir, log = f"{tmp}/run-json", f"{tmp}/json.log"
    rc = run([psrun, "local", "--ps", "1", "--workers", "2", "--sync", "--grace", "30", "--", "--model", json_path,
              "--model-dir", json_dir, "--steps", "150", "--batch-size", str(BATCH), "--optimizer", "adam_torch",
              "--learning-rate", str(LR), "--threads", "1", "--log-every", "1000"] + files, log)
    s = json.load(open(f"{json_dir}/summary.json")) if rc == 0 else {}
    check(f"the JSON two-headed model trains through psd: accuracy {s.get('test_accuracy/logits', -1):.4f}, label "
          f"accuracy {s.get('test_label_accuracy/tag_logits', -1):.4f}, mean AUC {s.get('test_mean_auc/tag_logits', -1):.4f}",
          rc == 0 and s.get("test_accuracy/logits", 0) > 0.8 and s.get("test_label_accuracy/tag_logits", 0) > 0.8 and
          s.get("test_mean_auc/tag_logits", 0) > 0.9, log)
    rc = run([psrun, "predict", "--model-dir", json_dir, "--images", f"{tmp}/test-x.npy", "--input",
              f"tags={tmp}/test-tags.npy", "--output", f"{tmp}/json.npz"], log)
    arrays = dict(np.load(f"{tmp}/json.npz")) if rc == 0 else {}
    check(f"its psrun predict: {[(k, v.shape) for k, v in arrays.items()]}",
          rc == 0 and arrays.get("logits", np.zeros(0)).shape == (TEST_N, 10) and
          arrays.get("tag_logits", np.zeros(0)).shape == (TEST_N, 4), log)
    bad = json.loads(json.dumps(described))
    bad["loss"]["heads"][1]["output"] = "tag_scores"
    json.dump(bad, open(f"{tmp}/bad.json", "w"))
    r = subprocess.run([psrun, "model", "show", f"{tmp}/bad.json"], capture_output=True, text=True)
    check(f"a heads entry naming a missing value: exit {r.returncode}, {r.stderr.strip()[-160:]}",
          r.returncode == 2 and 'field "heads": heads[1]: "output" "tag_scores" is not a value' in r.stderr)
    module = NotAHead()
    export(module, small, f"{tmp}/not_a_head.onnx", 17, ["loss", "hidden"])
    r = subprocess.run([psrun, "model", "show", f"{tmp}/not_a_head.onnx"], capture_output=True, text=True)
    check(f"an ONNX output beside the loss that is no head: exit {r.returncode}, {r.stderr.strip()[-160:]}",
          r.returncode == 2 and "is not a head" in r.stderr)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
