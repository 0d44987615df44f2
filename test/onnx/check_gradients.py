#!/usr/bin/python3
"""Whole-network gradient check against PyTorch (docs/models.md "Checking a network").

For each network (bench/networks.py and bench/more_networks.py modules), at each opset: the
module (dropout set to 0) is exported as torch.onnx.export writes it for training; one batch of
real data (MNIST or Fashion-MNIST images, or MNIST token ids) goes through `psrun model check
--gradients`, which runs psrun's forward, loss and backward from the exported initial weights and
checks each gradient against the loss's own change; the same batch goes through the module in
PyTorch (train mode, nn.CrossEntropyLoss). Every trainable tensor's gradient is compared by name:
max |g_psrun - g_torch| / max(max |g_torch|, 1e-2 of the network's largest) <= TOLERANCE (PyTorch in float64; check() says more). Prints one line per network and
opset, the worst tensor named, and exits 1 if any tensor of any network differs or is missing.
Where the CPU has bf16, the same batch's gradients in bf16 (psrun model check writes them too)
must lie within BF16_TOLERANCE of psrun's f32 gradients (relative L2 over the whole network), or
within twice the distance of PyTorch's CPU autocast to bfloat16 from its float64 gradients.

Usage: check_gradients.py PSRUN [--opsets 13,17] [--data MNIST_DIR] [--keep DIR] [NAME ...]
  MNIST_DIR holds MNIST's IDX files (default: psrun data fetch's ~/.cache/psrun/data/mnist);
  Fashion-MNIST is read from Debian's dataset-fashion-mnist, else MNIST is used for those
  networks too. --keep writes the exports, batches and gradients there (default: a temporary dir).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "bench"))
import networks  # noqa: E402
import more_networks  # noqa: E402

TOLERANCE = 2e-3
ZERO_NOISE = 1e-2  # of 1e-2 of the network's largest gradient: 1e-4 of it
# bf16 against f32: the whole network's relative L2 distance may be this, or twice PyTorch's CPU
# autocast distance where that is larger (resnet20 on a batch of 16: 0.29 both; most networks
# 2e-3 to 6e-2; torch 1.13's autocast cannot run hardshrink or layer norm in bf16).
BF16_TOLERANCE = 0.1
BATCH = 16
FASHION_DIRS = ["/usr/share/datasets/fashion-mnist"]  # Debian's dataset-fashion-mnist


def registry():
    table = {}
    for name, (ctor, data, shape) in networks.NETWORKS.items():
        table[name] = (networks, data, shape)
    for name, (ctor, data, shape) in more_networks.NETWORKS.items():
        table[name] = (more_networks, data, shape)
    return table


def fashion_dir():
    for d in FASHION_DIRS:
        for root, _, files in os.walk(d) if os.path.isdir(d) else []:
            if any(f.startswith("t10k-images") for f in files):
                return root
    return None


def batch_for(data, shape, mnist_dir):
    data_dir = fashion_dir() if data == "fashion-mnist" else mnist_dir
    data_dir = data_dir or mnist_dir
    images = networks.read_idx(networks.idx_file(data_dir, "t10k-images-idx3-ubyte"))[:BATCH]
    labels = networks.read_idx(networks.idx_file(data_dir, "t10k-labels-idx1-ubyte"))[:BATCH].astype(np.int64)
    if data == "mnist-tokens":
        return networks.tokens_of(images), labels
    return (images.astype(np.float32) / 255.0).reshape(BATCH, *shape[1:]), labels


def without_dropout(model):
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
        if isinstance(m, nn.MultiheadAttention):
            m.dropout = 0.0
    return model


def export(module, name, model, path, opset):
    model.train(True)
    torch.onnx.export(model, module.example_input(name), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})


def torch_gradients(model, x, y):
    model.train(True)
    model.zero_grad()
    inputs = torch.from_numpy(x)
    loss = nn.functional.cross_entropy(model(inputs), torch.from_numpy(y))
    loss.backward()
    return float(loss), {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}


def torch_autocast_gradients(model, x, y):
    """The parameter gradients of PyTorch's CPU autocast to bfloat16 (float32 parameters)."""
    model.train(True)
    model.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(torch.from_numpy(x))
    nn.functional.cross_entropy(logits.float(), torch.from_numpy(y)).backward()
    return {n: p.grad.double().numpy() for n, p in model.named_parameters() if p.grad is not None}


def check(psrun, name, module, data, shape, opset, mnist_dir, out):
    model = without_dropout(module.build(name))
    path = os.path.join(out, f"{name}.opset{opset}.onnx")
    export(module, name, model, path, opset)
    x, y = batch_for(data, shape, mnist_dir)
    np.save(os.path.join(out, f"{name}.x.npy"), x)
    np.save(os.path.join(out, f"{name}.y.npy"), y)
    grads_path = os.path.join(out, f"{name}.opset{opset}.grads.json")
    run = subprocess.run([psrun, "model", "check", path, "--input", os.path.join(out, f"{name}.x.npy"),
                          "--labels", os.path.join(out, f"{name}.y.npy"), "--gradients", grads_path, "--json",
                          # psrun's own finite differences are the coarse check here (ReLU kinks
                          # near a step: ResNet-20 read 5.0e-2 at opset 13); PyTorch's gradients
                          # are the fine one.
                          "--tolerance", "0.25"],
                         capture_output=True, text=True, timeout=600)
    if run.returncode not in (0, 1) or not os.path.exists(grads_path):
        return False, f"psrun model check exited {run.returncode}: {run.stderr.strip()[-400:]}"
    report = json.loads(run.stdout)
    mine = json.load(open(grads_path))
    # The reference is PyTorch in float64 (after the export): PyTorch's own f32 gradients are
    # not close enough where rounding moves activations across a ReLU's kink (ResNet-20 on
    # MNIST: blocks.5.conv1.weight 2.9e-2 off float64's; psrun's under 4e-6). A tensor's
    # allowance: TOLERANCE, twice PyTorch f32's own error where that is larger, and ZERO_NOISE
    # for a gradient that float64 finds zero (a conv bias before a batch norm): f32 rounding
    # alone (PyTorch f32 7e-4, psrun 2.6e-3 on mobilenet_v3's project.0.bias).
    _, theirs32 = torch_gradients(model, x, y)
    torch_loss, theirs = torch_gradients(model.double(), x.astype(np.float64) if x.dtype.kind == "f" else x, y)
    # A tensor's error is relative to its own largest gradient, or to 1e-2 of the network's
    # largest when the tensor's is smaller.
    floor = 1e-2 * max(float(np.max(np.abs(g))) for g in theirs.values())
    worst, worst_name, missing, over = 0.0, "", [], []
    for tname, g in theirs.items():
        if tname not in mine["tensors"]:
            missing.append(tname)
            continue
        p = np.array(mine["tensors"][tname]["gradient"], dtype=np.float64).reshape(g.shape)
        scale = max(float(np.max(np.abs(g))), floor, 1e-12)
        err = float(np.max(np.abs(p - g))) / scale
        zero = float(np.max(np.abs(g))) <= 1e-9 * floor
        if err > max(TOLERANCE, 2 * float(np.max(np.abs(theirs32[tname] - g))) / scale, ZERO_NOISE if zero else 0.0):
            over.append(tname)
        if err > worst:
            worst, worst_name = err, tname
    # bf16 against f32, whole: where the CPU has bf16, psrun model check also writes the batch's
    # gradients computed in bf16. Their relative L2 distance from psrun's f32 gradients over the
    # whole network, against the same distance of PyTorch's CPU autocast to bfloat16 from its
    # float64 gradients (the precision users compare with).
    bf16 = [(np.asarray(t["bf16_gradient"], dtype=np.float64), np.asarray(t["gradient"], dtype=np.float64))
            for t in mine["tensors"].values() if "bf16_gradient" in t]
    bf16_distance = None
    if bf16:
        bf16_distance = (sum(float(np.sum((b - g) ** 2)) for b, g in bf16) /
                         max(sum(float(np.sum(g ** 2)) for _, g in bf16), 1e-300)) ** 0.5
        try:
            autocast = torch_autocast_gradients(model.float(), x, y)
            torch_distance = (sum(float(np.sum((autocast[n] - g) ** 2)) for n, g in theirs.items()) /
                              max(sum(float(np.sum(g ** 2)) for g in theirs.values()), 1e-300)) ** 0.5
        except RuntimeError as e:  # torch 1.13's CPU autocast lacks some ops (hardshrink, layer norm)
            torch_distance, autocast_error = None, str(e).split("\n")[0][:80]
    loss_error = abs(mine["loss"] - torch_loss) / max(abs(torch_loss), 1e-8)
    fd = max((t["relative_error"] for t in report["tensors"]), default=0.0)
    ok = not missing and not over and loss_error <= TOLERANCE and report["ok"]
    text = (f"loss {mine['loss']:.6f} vs torch {torch_loss:.6f}; {len(theirs)} tensors, worst {worst_name} "
            f"{worst:.2e}; finite-difference worst {fd:.2e}")
    if bf16_distance is None:
        text += f"; bf16 not run ({report.get('bf16_note', 'no bf16 gradients')})"
    else:
        bound = max(BF16_TOLERANCE, 2 * (torch_distance or 0.0))
        text += f"; bf16 against f32 {bf16_distance:.2e} " + (
            f"(torch autocast bf16 {torch_distance:.2e})" if torch_distance is not None
            else f"(torch autocast bf16 fails: {autocast_error})")
        if bf16_distance > bound:
            ok = False
            text += f", over {bound:.2e}"
    if over:
        text += f"; over the tolerance: {', '.join(over[:5])}"
    if missing:
        text += f"; not in psrun's gradients: {', '.join(missing[:5])}"
    return ok, text


def option(args, flag, default):
    if flag not in args:
        return default
    k = args.index(flag)
    value = args[k + 1]
    del args[k:k + 2]
    return value


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    opsets = [int(v) for v in option(args, "--opsets", "13,17").split(",")]
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    mnist_dir = option(args, "--data", os.path.join(cache, "psrun", "data", "mnist"))
    keep = option(args, "--keep", "")
    psrun = args[0]
    table = registry()
    names = args[1:] or list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        sys.exit(f"unknown network(s) {', '.join(unknown)}: {', '.join(table)}")
    torch.manual_seed(0)
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        out = keep or scratch
        os.makedirs(out, exist_ok=True)
        for name in names:
            module, data, shape = table[name]
            for opset in opsets:
                try:
                    ok, text = check(psrun, name, module, data, shape, opset, mnist_dir, out)
                except Exception as e:  # an export or comparison error is this network's failure
                    ok, text = False, f"{type(e).__name__}: {e}"
                print(f"{'ok' if ok else 'FAILED'}: {name} opset {opset}: {text}", flush=True)
                failed += not ok
    print(f"{len(names) * len(opsets) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
