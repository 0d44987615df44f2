#!/usr/bin/python3
"""python/psrun_torch.py's check(): a user's one call that exports a torch.nn module, runs
`psrun model check` on a batch and compares every gradient with PyTorch's in float64.
  - a small CNN (conv, batch norm, GELU, pooling, linear): outputs and every gradient within
    1e-4, no tensor missing or extra, the worst printed;
  - a module of two inputs (an image and a metadata vector) given by name: every gradient within
    1e-4;
  - the same CNN with dropout 0.5: psrun's masks are its own, so check() must report a
    large error (the check can fail);
  - a model psrun cannot import raises RuntimeError naming psrun's refusal;
  - nn.Dropout2d (refused by torch.onnx in training mode) exported by export(): at p = 0 every
    gradient torch's, at p = 0.5 whole channels dropped in psrun's training forward; torchvision's
    StochasticDepth at p = 0.5: whole examples dropped ("row"), or the whole batch ("batch");
    timm's DropPath (bernoulli_ in place, refused by torch.onnx) at 0.5: whole examples dropped;
  - nn.LayerNorm(elementwise_affine=False) at opset 17 (an invalid file from a bare torch.onnx):
    every gradient torch's;
  - modules torch.onnx refuses, written by export() as the same function: nn.Bilinear (rows and a
    rank-3 tensor) and adaptive pools to sizes that do not divide the input's (1-D max and
    average, 2-D average with a None axis and max upsampling 2 x 2 to 7 x 7, 3-D average): every
    gradient within 1e-4 of torch's; nn.ChannelShuffle (no gradient in torch 1.13): outputs
    within 1e-5; 19 element-wise functions (asinh ... atan2, addcdiv, diff), >= and <= (ONNX
    GreaterOrEqual, LessOrEqual), nn.Unflatten and nn.Threshold: every gradient within 1e-4;
  - an nn.Embedding with max_norm or scale_grad_by_freq (which torch.onnx drops without a word)
    raises ValueError naming the module and the setting.
Prints one line per check; exits 1 when one fails, 77 without torch.
Usage: psrun_torch_check.py PSRUN"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    from torch import nn
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import psrun_torch  # noqa: E402
from torch_compare import Checks  # noqa: E402


class Small(nn.Module):
    def __init__(self, dropout=0.0):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(1, 6, 3, padding=1), nn.BatchNorm2d(6)
        self.drop, self.head = nn.Dropout(dropout), nn.Linear(6 * 4 * 4, 10)

    def forward(self, x):
        h = nn.functional.max_pool2d(nn.functional.gelu(self.bn(self.conv(x))), 2)
        return self.head(self.drop(h.flatten(1)))


class TwoInputs(nn.Module):  # an image and a metadata vector, fused before the head
    def __init__(self):
        super().__init__()
        self.conv, self.meta, self.head = nn.Conv2d(1, 4, 3), nn.Linear(3, 4), nn.Linear(4 * 6 * 6 + 4, 10)

    def forward(self, image, meta):
        return self.head(torch.cat([torch.relu(self.conv(image)).flatten(1), torch.tanh(self.meta(meta))], 1))


class Unimportable(nn.Module):  # a scale from torch.nonzero (ONNX NonZero): psrun refuses it
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 10)

    def forward(self, x):
        return self.head(x * torch.nonzero(x > 0).shape[0])


class DropPath(nn.Module):  # timm's drop_path, as many repositories copy it: bernoulli_ in place
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if self.p == 0.0 or not self.training:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask.div_(keep)


class Bilinear(nn.Module):  # nn.Bilinear over rows and over a rank-3 tensor's last axis
    def __init__(self):
        super().__init__()
        self.pair = nn.Bilinear(32, 32, 10)
        self.tokens = nn.Bilinear(4, 4, 3, bias=False)
        self.head = nn.Linear(12, 10)

    def forward(self, x):
        x = x.flatten(1)
        t = self.tokens(x[:, :16].view(-1, 4, 4), x[:, 16:32].view(-1, 4, 4))  # N x 4 x 3
        return self.pair(x[:, :32], x[:, 32:]) + self.head(torch.tanh(t).flatten(1))


class AdaptivePools(nn.Module):  # output sizes that do not divide the input's, 1-D to 3-D
    def __init__(self):
        super().__init__()
        self.conv1d = nn.Conv1d(1, 2, 3)  # 62 long
        self.max1d, self.avg1d = nn.AdaptiveMaxPool1d(4), nn.AdaptiveAvgPool1d(5)
        self.conv2d = nn.Conv2d(1, 2, 3)  # 6 x 6
        self.avg2d, self.max2d = nn.AdaptiveAvgPool2d((4, None)), nn.AdaptiveMaxPool2d(7)  # 7 x 7 from 2 x 2
        self.conv3d = nn.Conv3d(1, 2, 2)  # 3 x 3 x 3
        self.avg3d = nn.AdaptiveAvgPool3d(2)
        self.head = nn.Linear(2 * (4 + 5 + 24 + 49 + 8), 10)

    def forward(self, x):
        a = self.conv1d(x.view(-1, 1, 64))
        b = self.conv2d(x)
        c = self.conv3d(x.view(-1, 1, 4, 4, 4))
        parts = [self.max1d(a), self.avg1d(a), self.avg2d(b), self.max2d(b[:, :, :2, :2]), self.avg3d(c)]
        return self.head(torch.cat([p.flatten(1) for p in parts], 1))


class Functions(nn.Module):  # element-wise functions and nn.Unflatten torch 1.13 cannot export
    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(64, 24)
        self.unflatten = nn.Unflatten(1, (3, 8))
        self.threshold = nn.Threshold(0.1, -0.5)
        self.head = nn.Linear(8 * 17 + 7, 10)

    def forward(self, x):
        h = self.trunk(x.flatten(1))
        t, p = torch.tanh(h), torch.sigmoid(h)  # (-1, 1) and (0, 1)
        parts = [torch.asinh(3 * h), torch.acosh(h.abs() + 1.5), torch.atanh(0.9 * t), h.sinh(), torch.cosh(h),
                 torch.expm1(h), torch.exp2(h), torch.deg2rad(h), h + torch.trunc(4 * h), torch.frac(4 * h),
                 torch.logit(p, eps=1e-3), torch.xlogy(h, p + 0.5), torch.hypot(h, t), torch.copysign(h, h.flip(1)),
                 torch.logaddexp(h, 2 * t), torch.sinc(h), torch.atan2(h, t.flip(1) + 2.0),
                 torch.addcdiv(h, t, p + 1.0, value=0.5), self.threshold(h), torch.where(h <= 0.2, h, 2 * h)]
        rows = self.unflatten(torch.stack(parts, 1).sum(1))  # N x 3 x 8
        return self.head(torch.cat([rows.flatten(1), torch.diff(h[:, :8], dim=1)] + [r.flatten(1) for r in
                                                                                    parts[:14]], 1)[:, :8 * 17 + 7])


def psrun_outputs(psrun, model, batch):
    """`model` exported by psrun_torch.export() and run by `psrun model check` on `batch` (training
    mode, psrun's own random masks): (the completed process, psrun's outputs as a flat array)."""
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "x.npy"), batch)
        psrun_torch.export(model, torch.from_numpy(batch), os.path.join(tmp, "m.onnx"))
        run = subprocess.run([psrun, "model", "check", os.path.join(tmp, "m.onnx"), "--input",
                              os.path.join(tmp, "x.npy"), "--gradients", os.path.join(tmp, "g.json"),
                              "--no-finite-differences", "--no-bf16"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=300, check=False)
        g = os.path.join(tmp, "g.json")
        out = np.asarray(json.load(open(g))["outputs"]) if os.path.exists(g) else np.zeros(0)
    return run, out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    check = Checks()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, 8)
    r = psrun_torch.check(Small(), x, y, psrun=psrun)
    check("small CNN: outputs = torch's", r["outputs_error"] <= 1e-4, f"{r['outputs_error']:.2e}", True)
    check("small CNN: loss = torch's", abs(r["loss"] - r["torch_loss"]) <= 1e-4, f"{r['loss']} vs {r['torch_loss']}")
    check("small CNN: every gradient = torch's", r["worst"][1] <= 1e-4, f"worst {r['worst'][0]} {r['worst'][1]:.2e}",
          True)
    check("small CNN: 6 tensors, none missing or extra", len(r["errors"]) == 6 and not r["missing"] and not r["extra"],
          f"{sorted(r['errors'])} missing {r['missing']} extra {r['extra']}")
    r = psrun_torch.check(TwoInputs(), {"image": x, "meta": rng.standard_normal((8, 3))}, y, psrun=psrun,
                          verbose=False)
    check("two inputs by name: every gradient = torch's", r["worst"][1] <= 1e-4 and len(r["errors"]) == 6,
          f"worst {r['worst'][0]} {r['worst'][1]:.2e}, {len(r['errors'])} tensors", True)
    r = psrun_torch.check(Small(dropout=0.5), x, y, psrun=psrun, verbose=False)
    check("with dropout 0.5 (masks differ): check() reports the difference", r["worst"][1] > 1e-2,
          f"worst {r['worst'][0]} {r['worst'][1]:.2e}", True)
    try:
        psrun_torch.check(Unimportable(), rng.standard_normal((4, 4)).astype(np.float32), y[:4], psrun=psrun,
                          verbose=False)
        check("a model psrun cannot run raises RuntimeError", False, "no exception")
    except RuntimeError as e:
        check("a model psrun cannot run raises RuntimeError with psrun's message", "exited 2" in str(e), str(e)[:300])
    # nn.Dropout2d, which torch.onnx refuses in training mode: at p = 0 the same as torch's; at
    # p = 0.5 psrun's training forward zeroes whole channels of each example, the rest doubled.
    drop = nn.Sequential(nn.Conv2d(1, 4, 1), nn.Dropout2d(0.0), nn.Flatten())
    r = psrun_torch.check(drop, x, y, psrun=psrun, verbose=False)
    check("Dropout2d(0): exported, every gradient = torch's", r["worst"][1] <= 1e-4,
          f"worst {r['worst'][0]} {r['worst'][1]:.2e}", True)
    drop[1].p = 0.5
    batch = rng.standard_normal((32, 1, 8, 8)).astype(np.float32)
    run, out = psrun_outputs(psrun, drop, batch)
    out = out.reshape(32, 4, 64)
    with torch.no_grad():
        plain = drop[0](torch.from_numpy(batch)).numpy().reshape(32, 4, 64)
    dropped = np.all(out == 0, axis=2)
    kept = np.all(np.abs(out - 2 * plain) <= 1e-5 * np.abs(plain).max(), axis=2)
    check("Dropout2d(0.5): psrun model check runs the export", run.returncode in (0, 1), run.stdout[-300:])
    check("Dropout2d(0.5): each channel of each example dropped whole or kept doubled",
          bool(np.all(dropped | kept)), f"{int(np.sum(~(dropped | kept)))} of 128 neither")
    check("Dropout2d(0.5): about half the channels dropped", 0.3 <= dropped.mean() <= 0.7,
          f"{dropped.mean():.2f} dropped")
    # torchvision's stochastic depth (p = 0.5), which torch.onnx cannot write in training mode:
    # "row" drops whole examples, "batch" the whole batch or none of it.
    try:
        from torchvision.ops import StochasticDepth
    except ImportError:
        StochasticDepth = None
    droppers = [(f"StochasticDepth(0.5, {mode})", mode, lambda mode=mode: StochasticDepth(0.5, mode))
                for mode in (("row", "batch") if StochasticDepth else ())]
    droppers.append(("timm's DropPath(0.5)", "row", lambda: DropPath(0.5)))
    for what, mode, make in droppers:
        depth = nn.Sequential(nn.Conv2d(1, 4, 1), make(), nn.Flatten())
        run, out = psrun_outputs(psrun, depth, batch)
        out = out.reshape(32, 256)
        with torch.no_grad():
            plain = depth[0](torch.from_numpy(batch)).numpy().reshape(32, 256)
        dropped = np.all(out == 0, axis=1)
        kept = np.all(np.abs(out - 2 * plain) <= 1e-5 * np.abs(plain).max(), axis=1)
        whole = bool(np.all(dropped | kept)) and (mode == "row" or dropped.all() or kept.all())
        check(f"{what}: exported, each example dropped or doubled"
              f"{'' if mode == 'row' else ', the batch as one'}", run.returncode in (0, 1) and whole,
              f"{int(dropped.sum())} dropped, {int(kept.sum())} kept of 32; {run.stdout[-200:]}")
        if mode == "row":
            check(f"{what}: about half the examples dropped", 0.2 <= dropped.mean() <= 0.8,
                  f"{dropped.mean():.2f} dropped")
    # A layer norm without weight, which torch 1.13 writes at opset 17 as an invalid
    # LayerNormalization (no Scale): exported, and psrun trains only torch's parameters.
    plain_norm = nn.Sequential(nn.Flatten(), nn.Linear(64, 12), nn.LayerNorm(12, elementwise_affine=False),
                               nn.Linear(12, 10))
    r = psrun_torch.check(plain_norm, x, y, psrun=psrun, verbose=False)
    check("LayerNorm(elementwise_affine=False) at opset 17: every gradient = torch's",
          r["worst"][1] <= 1e-4 and len(r["errors"]) == 4 and not r["extra"],
          f"worst {r['worst'][0]} {r['worst'][1]:.2e}, {sorted(r['errors'])}, extra {r['extra']}", True)
    # Modules torch.onnx refuses, written by export() as the same function of ops it can write.
    for what, module in (("nn.Bilinear", Bilinear()), ("adaptive pools to sizes that do not divide", AdaptivePools())):
        r = psrun_torch.check(module, x, y, psrun=psrun, verbose=False)
        count = sum(1 for _ in module.parameters())
        check(f"{what}: exported, every gradient = torch's", r["worst"][1] <= 1e-4 and r["outputs_error"] <= 1e-4
              and len(r["errors"]) == count and not r["extra"],
              f"worst {r['worst'][0]} {r['worst'][1]:.2e}, outputs {r['outputs_error']:.2e}, "
              f"{len(r['errors'])} of {count} tensors, extra {r['extra']}", True)
    r = psrun_torch.check(Functions(), x, y, psrun=psrun, verbose=False)
    check("19 element-wise functions, >= and <=, nn.Unflatten and nn.Threshold: exported, every gradient = torch's",
          r["worst"][1] <= 1e-4 and r["outputs_error"] <= 1e-4 and len(r["errors"]) == 4 and not r["extra"],
          f"worst {r['worst'][0]} {r['worst'][1]:.2e}, outputs {r['outputs_error']:.2e}, {len(r['errors'])} tensors",
          True)
    # nn.ChannelShuffle: torch 1.13 has no gradient for it either, so its forward is compared.
    shuffle = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ChannelShuffle(2), nn.Conv2d(8, 4, 1, groups=4),
                            nn.Flatten(), nn.Linear(256, 10))
    run, out = psrun_outputs(psrun, shuffle, x)
    with torch.no_grad():
        want = shuffle(torch.from_numpy(x)).numpy()
    check("nn.ChannelShuffle: exported, psrun's outputs = torch's",
          run.returncode in (0, 1) and out.size == want.size and np.abs(out.reshape(want.shape) - want).max() <= 1e-5,
          run.stdout[-300:] if out.size != want.size else f"{np.abs(out.reshape(want.shape) - want).max():.2e}")
    # Settings torch.onnx drops without a word: refused by name, before any file is written.
    ids = rng.integers(0, 10, (4, 6)).astype(np.int64)
    for setting in ({"max_norm": 1.0}, {"scale_grad_by_freq": True}):
        bag = nn.Sequential(nn.Embedding(10, 4, **setting), nn.Flatten(), nn.Linear(24, 10))
        word = next(iter(setting))
        try:
            psrun_torch.check(bag, {"ids": ids}, y[:4], psrun=psrun, verbose=False)
            check(f"Embedding({word}=...) is refused", False, "no exception")
        except ValueError as e:
            check(f"Embedding({word}=...) is refused naming the module and the setting",
                  "'0'" in str(e) and word in str(e), str(e)[:300])
    check.finish()


if __name__ == "__main__":
    main()
