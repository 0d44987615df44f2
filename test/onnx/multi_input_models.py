#!/usr/bin/python3
"""Several inputs per model (issue 34), from PyTorch through the psrun CLI:

  three torch modules with two inputs each, exported in training mode without constant folding
  (batch axis dynamic) at opsets 13 and 17:
    - ImageMeta: forward(x, meta) = linear(concat(flatten(relu(conv(x))), relu(linear(meta))))
      (an image plus a per-example metadata vector);
    - TokensMask: forward(ids, mask) = linear(mean over L of (embedding(ids) * mask[..., None]))
      (token ids plus a float padding mask);
    - ImageTimestep: a diffusion block, an image and one float per example (t, [N]) whose
      sinusoidal embedding scales and shifts a GroupNorm;
  `psrun model show F.onnx` lists both inputs by name; `psrun model check F.onnx --input
  NAME=FILE.npy ... --gradients G.json --input-gradients` gives, for the same batch and the
  exported initial weights, torch's forward outputs (logits) and loss, every parameter's gradient
  and the gradient w.r.t. every float input (x, meta, mask) within TOLERANCE of PyTorch in float64
  (relative to the tensor's largest value), and its own finite-difference check passes. Bad
  --input values exit 2 naming the input or the files.

Prints one line per check; exits 1 when one fails, 77 when torch or onnx cannot be imported.
Usage: multi_input_models.py PSRUN [WORK_DIR]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx  # noqa: F401  (torch.onnx.export needs it)
    import torch
    from torch import nn
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import psrun_torch  # noqa: E402

TOLERANCE = 1e-4
BATCH = 6
FAILED = []


def check(what, ok, detail=""):
    shown = detail if detail and (not ok or len(detail) < 200) else ""
    print(f"{'ok' if ok else 'FAILED'}: {what}{(': ' + shown) if shown else ''}")
    if not ok:
        FAILED.append(what)
    return ok


class ImageMeta(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, stride=2)
        self.meta = nn.Linear(5, 8)
        self.head = nn.Linear(4 * 6 * 6 + 8, 10)

    def forward(self, x, meta):
        a = torch.flatten(torch.relu(self.conv(x)), 1)
        b = torch.relu(self.meta(meta))
        return self.head(torch.cat([a, b], dim=1))


class TokensMask(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.head = nn.Linear(16, 10)

    def forward(self, ids, mask):
        h = self.emb(ids) * mask.unsqueeze(-1)
        return self.head(h.mean(dim=1))


class ImageTimestep(nn.Module):
    """A diffusion network's block: an image and one float per example (the timestep t, [N]),
    t's sinusoidal embedding through an MLP scaling and shifting a GroupNorm (adaGN)."""

    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(1, 8, 3, padding=1), nn.GroupNorm(4, 8)
        self.temb = nn.Sequential(nn.Linear(8, 16), nn.SiLU(), nn.Linear(16, 16))
        self.head = nn.Linear(8 * 7 * 7, 10)

    def forward(self, x, t):
        freqs = torch.exp(-torch.arange(4, dtype=torch.float32) * 2.0)
        e = self.temb(torch.cat([torch.cos(t[:, None] * freqs), torch.sin(t[:, None] * freqs)], 1))
        scale, shift = e.chunk(2, dim=1)
        h = self.norm(self.conv(x)) * (1 + scale[:, :, None, None]) + shift[:, :, None, None]
        return self.head(torch.flatten(nn.functional.avg_pool2d(nn.functional.silu(h), 2), 1))


def batch(name, rng):
    y = rng.integers(0, 10, size=BATCH).astype(np.int64)
    if name == "image_timestep":
        return {"x": rng.random((BATCH, 1, 14, 14), dtype=np.float32),
                "t": (rng.random(BATCH) * 10).astype(np.float32)}, y
    if name == "image_meta":
        return {"x": rng.random((BATCH, 1, 14, 14), dtype=np.float32),
                "meta": rng.standard_normal((BATCH, 5)).astype(np.float32)}, y
    ids = rng.integers(0, 50, size=(BATCH, 12)).astype(np.int64)
    mask = (rng.random((BATCH, 12)) < 0.7).astype(np.float32)
    return {"ids": ids, "mask": mask}, y


def export(model, inputs, path, opset):
    names = list(inputs)
    model.train(True)
    torch.onnx.export(model, tuple(torch.from_numpy(inputs[n]) for n in names), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=names, output_names=["logits"],
                      dynamic_axes={**{n: {0: "N"} for n in names}, "logits": {0: "N"}})


def relative(mine, theirs):
    mine = np.asarray(mine, dtype=np.float64).reshape(theirs.shape)
    return float(np.max(np.abs(mine - theirs))) / max(float(np.max(np.abs(theirs))), 1e-12)


def run_one(psrun, name, ctor, opset, work):
    torch.manual_seed(3)
    model = ctor()
    inputs, y = batch(name, np.random.default_rng(7))
    path = os.path.join(work, f"{name}.opset{opset}.onnx")
    export(model, inputs, path, opset)
    show = subprocess.run([psrun, "model", "show", path], capture_output=True, text=True, timeout=120)
    check(f"{name} opset {opset}: model show lists both inputs",
          show.returncode == 0 and all(f" {n} " in show.stdout.split("\n")[1] + " " for n in inputs),
          show.stdout.split("\n")[1] if show.returncode == 0 else show.stderr.strip())
    args = []
    for n, v in inputs.items():
        f = os.path.join(work, f"{name}.{n}.npy")
        np.save(f, v)
        args += ["--input", f"{n}={f}"]
    yf = os.path.join(work, f"{name}.y.npy")
    np.save(yf, y)
    grads_path = os.path.join(work, f"{name}.opset{opset}.grads.json")
    run = subprocess.run([psrun, "model", "check", path, *args, "--labels", yf, "--gradients", grads_path,
                          "--input-gradients", "--no-bf16", "--json"], capture_output=True, text=True, timeout=300)
    if not check(f"{name} opset {opset}: psrun model check exits 0", run.returncode == 0,
                 (run.stderr.strip() or run.stdout.strip())[-400:]):
        return
    mine = json.load(open(grads_path))
    logits, loss, grads, input_grads = psrun_torch.reference(model, inputs, y, input_grads=True)
    err = relative(mine["outputs"], logits)
    check(f"{name} opset {opset}: forward outputs = torch's", err <= TOLERANCE, f"max relative error {err:.2e}")
    check(f"{name} opset {opset}: loss = torch's", abs(mine["loss"] - loss) <= TOLERANCE * max(abs(loss), 1.0),
          f"{mine['loss']:.6f} vs {loss:.6f}")
    worst, worst_name, missing = 0.0, "", []
    for tname, g in grads.items():
        if tname not in mine["tensors"]:
            missing.append(tname)
            continue
        e = relative(mine["tensors"][tname]["gradient"], g)
        if e > worst:
            worst, worst_name = e, tname
    check(f"{name} opset {opset}: {len(grads)} parameter gradients = torch's",
          not missing and worst <= TOLERANCE, f"worst {worst_name} {worst:.2e}" + (f"; missing {missing}" if missing else ""))
    for iname, g in input_grads.items():
        got = mine.get("inputs", {}).get(iname)
        e = relative(got["gradient"], g) if got else float("inf")
        check(f"{name} opset {opset}: d loss / d {iname} = torch's", e <= TOLERANCE, f"max relative error {e:.2e}")


def refusals(psrun, work):
    """Bad --input values: exit 2 with a message naming the input or the files."""
    path = os.path.join(work, "image_meta.opset13.onnx")
    x = os.path.join(work, "image_meta.x.npy")
    short = os.path.join(work, "short_meta.npy")
    np.save(short, np.zeros((BATCH - 1, 5), dtype=np.float32))
    cases = [
        (["--input", f"nosuch={x}"], "no input 'nosuch'"),
        (["--input", f"x={x}", "--input", f"x={x}"], "already given"),
        (["--input", f"x={x}", "--input", f"meta={short}"], "short_meta.npy has 5 rows"),
        (["--input", f"meta={x}"], "not examples of the model's input meta"),
    ]
    for extra, want in cases:
        r = subprocess.run([psrun, "model", "check", path, *extra, "--no-finite-differences"],
                           capture_output=True, text=True, timeout=120)
        check(f"model check {' '.join(a.replace(work + '/', '') for a in extra)}: exit 2 naming it",
              r.returncode == 2 and want in r.stderr, f"exit {r.returncode}: {r.stderr.strip()[-300:]}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    keep = len(sys.argv) > 2
    work = sys.argv[2] if keep else tempfile.mkdtemp(prefix="psrun-multi-input-")
    os.makedirs(work, exist_ok=True)
    torch.set_num_threads(1)
    try:
        for opset in (13, 17):
            run_one(psrun, "image_meta", ImageMeta, opset, work)
            run_one(psrun, "tokens_mask", TokensMask, opset, work)
            run_one(psrun, "image_timestep", ImageTimestep, opset, work)
        refusals(psrun, work)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{len(FAILED)} failed" if FAILED else "all passed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
