#!/usr/bin/python3
"""Frozen tensors through training: a fine-tuning network whose backbone does not train.

FrozenBackbone on MNIST [N, 1, 28, 28]: a Linear(784, 1400) with requires_grad=False (1,097,600
values, past a constant's 2^20), ReLU, a trained Linear(1400, 10) head, and a registered
buffer scaling the features. python/psrun_torch.py lists the frozen weight and the buffer in
psrun.frozen; psrun imports them as frozen parameters (state tensors nothing writes).

  - `psrun model show`: 14,010 trained values, 1,100,400 state values (the frozen ones);
  - `psrun model check` on a batch of real MNIST: outputs, loss and the head's gradients are
    torch's (float64) within TOLERANCE, and psrun trains no tensor torch does not;
  - `psrun local --ps 1 --workers 2` trains 300 steps (Adam, weight decay 0.01, so a frozen
    tensor that reached the optimizer would move), `psrun export`: the frozen weight and the
    buffer are bit for bit the file's and listed in its psrun.frozen, the head moved, test
    accuracy >= ACCURACY; the exported file loads back into the torch module and predicts as
    `psrun predict`.

And initializers torch.onnx merged: MergedByValue, a fresh module whose LayerNorms, zero
biases and BatchNorm statistics hold equal values, exported with torch.onnx.export's
defaults (eval mode, constant folding), which writes each equal one as Identity(the first):
psrun warns and trains each as its own tensor, so outputs and every gradient are torch's at
opsets 14 and 17.
And buffers in a file from a plain torch.onnx.export (no psrun.frozen list): Buffered's
normalisation constants and positional table train as parameters until `psrun model freeze`
lists them; then psrun trains exactly torch's parameters, with torch's gradients. freeze refuses
a name that is no float initializer and a file psrun exported (exit 2).
And a file exported without dynamic_axes (torch.onnx.export(model, x[:B], path)): its inputs fix
the batch at B, and x.view(x.size(0), -1), a class token's expand(b, -1, -1) and attention's
reshapes hold B as a constant, as do an LSTM's initial states h0.expand(1, b, H) and
x.new_zeros(1, b, H). psrun warns and reads B as the batch: nn.MultiheadAttention at B = 2,
attention by hand at B = 2 and B = 1, the LSTM at B = 2, each checked at a batch of 8: outputs
and every gradient are torch's, and psrun predict is torch's softmax.
Usage: frozen_models.py PSRUN [--data MNIST_DIR]   (exit 77 without torch)
"""
import json
import os
import shutil
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import torch
    from onnx import numpy_helper
    from torch import nn
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import networks  # noqa: E402  (load_onnx_weights)
from psrun_cli import mnist_test_set, predict_model_dir, run, train_through_psd  # noqa: E402

from torch_compare import Checks, check_model, export, probabilities  # noqa: E402

TOLERANCE = 1e-4
ACCURACY = 0.85
check = Checks()


class FrozenBackbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(784, 1400)
        self.backbone.requires_grad_(False)
        self.register_buffer("scale", torch.rand(1400) + 0.5)
        self.head = nn.Linear(1400, 10)

    def forward(self, x):
        return self.head(torch.relu(self.backbone(x.flatten(1))) * self.scale)


class MergedByValue(nn.Module):
    """x [N, 1, 28, 28] flattened -> LayerNorm, Linear, LayerNorm, ReLU, Linear, ReLU, BatchNorm1d,
    LayerNorm (zero biases, unit weights: equal values) -> a linear head."""

    def __init__(self):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(784), nn.LayerNorm(32), nn.LayerNorm(32)
        self.fc1, self.fc2 = nn.Linear(784, 32), nn.Linear(32, 32)
        for fc in (self.fc1, self.fc2):
            nn.init.zeros_(fc.bias)
        self.bn = nn.BatchNorm1d(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        h = self.fc1(self.norm1(x.flatten(1)))
        return self.head(self.norm3(self.bn(torch.relu(self.fc2(torch.relu(self.norm2(h)))))))


def export_as_torch_defaults(model, x, path, opset):
    """torch.onnx.export as a user calls it: eval mode, constant folding, a dynamic batch."""
    torch.onnx.export(model, x, path, opset_version=opset, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})


def merged_by_value(psrun, tmp, test_x):
    torch.manual_seed(1)
    path = f"{tmp}/merged.onnx"
    export_as_torch_defaults(MergedByValue(), torch.from_numpy(test_x[:2]), path, 17)
    merged = [n.output[0] for n in onnx.load(path).graph.node if n.op_type == "Identity"]
    check(f"torch.onnx.export's defaults merged equal initializers ({merged})",
          {"norm3.weight", "norm3.bias", "fc2.bias", "bn.running_mean", "bn.running_var"} <= set(merged))
    show = run([psrun, "model", "show", path])
    check("psrun model show warns that it trains them apart", show.returncode == 0 and
          "written as another initializer of equal values" in show.stdout, show.stdout[-1500:])
    # The batch norm trains on its batch statistics in both, so the functions agree.
    check_model(check, psrun, "merged_by_value", MergedByValue, (1, 28, 28), ["layer_norm", "batch_norm"], tmp,
                batch=8, seed=3, opsets=(14, 17), finite_differences=False, compare_predict=False,
                data=test_x[:8], exporter=export_as_torch_defaults)


class Buffered(nn.Module):
    """x [N, 1, 28, 28]: normalised by buffers, a sinusoidal positional table added per row (a
    buffer), a linear head."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor(0.13))
        self.register_buffer("std", torch.tensor(0.31))
        angle = torch.arange(28.0)[:, None] / 100 ** (torch.arange(28.0)[None] / 28)
        self.register_buffer("pe", torch.where(torch.arange(28)[None] % 2 == 0, angle.sin(), angle.cos()))
        self.head = nn.Linear(784, 10)

    def forward(self, x):
        return self.head((((x - self.mean) / self.std)[:, 0] + 0.1 * self.pe).flatten(1))


class FixedBatchAttention(nn.Module):
    """x [N, 1, 28, 28]: a conv to 4 x 8 x 8, its 32 rows of 8 after a class token
    (self.cls.expand(b, -1, -1)) through two-head self-attention, all written with the batch size
    b = h.size(0): by hand (view(b, 33, 2, 4)), or nn.MultiheadAttention, whose reshapes are
    view(L, b * heads, d) and view(L * b, E); then x.reshape(b, -1) into a linear head."""

    def __init__(self, torch_mha=False):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 5, stride=3)
        self.cls = nn.Parameter(torch.randn(1, 1, 8))
        self.q = nn.Linear(8, 8)
        self.mha = nn.MultiheadAttention(8, 2) if torch_mha else None
        self.head = nn.Linear(33 * 8, 10)

    def forward(self, x):
        h = torch.relu(self.conv(x))
        b = h.size(0)
        t = torch.cat([self.cls.expand(b, -1, -1), h.view(b, 32, 8)], 1)
        if self.mha is not None:
            s = t.transpose(0, 1)
            a = self.mha(s, s, s, need_weights=False)[0].transpose(0, 1)
        else:
            u = self.q(t).view(b, 33, 2, 4).transpose(1, 2)
            a = (torch.softmax(u @ u.transpose(-1, -2), -1) @ u).transpose(1, 2)
        return self.head(a.reshape(b, -1))


class FixedBatchRecurrent(nn.Module):
    """x [N, 1, 28, 28] as 28 steps of 28: an LSTM from a learned initial state h0.expand(1, b, 16)
    and a zero cell state x.new_zeros(1, b, 16), a linear head on its last output."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(28, 16, batch_first=True)
        self.h0 = nn.Parameter(0.1 * torch.randn(1, 1, 16))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        b = x.size(0)
        out, _ = self.lstm(x[:, 0], (self.h0.expand(1, b, 16).contiguous(), x.new_zeros(1, b, 16)))
        return self.head(out[:, -1])


class FixedBatchRetry(nn.Module):
    """x [N, 1, 28, 28]: a conv to 32 rows of 8, sequence first ([32, N, 8]), reshaped to
    (32 * b, 2, 4) and summed over its 2: at a fixed batch of 1 the first reading of that target
    ([32, 2N, 4], as attention's view(L, b * heads, d)) sums over the batch, which the graph
    refuses, so psrun walks it again with the batch inside the 32, torch's."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 5, stride=3)
        self.q = nn.Linear(8, 8)
        self.head = nn.Linear(32 * 4, 10)

    def forward(self, x):
        h = torch.relu(self.conv(x))
        b = h.size(0)
        t = self.q(h.view(b, 32, 8).transpose(0, 1)).reshape(32 * b, 2, 4).sum(1)
        return self.head(t.view(32, b, 4).transpose(0, 1).reshape(b, -1))


def export_fixed_batch(psrun, batch, other_readings=0):
    """torch.onnx.export without dynamic_axes, on the first `batch` examples; psrun's warning
    says how many shapes (Reshape targets, Expand shapes, fills) it read otherwise than first."""
    def exporter(model, x, path, opset):
        torch.onnx.export(model, x[:batch], path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False)
        show = run([psrun, "model", "show", path])
        check(f"a file of fixed batch {batch}: psrun model show warns how it reads it",
              show.returncode == 0 and f"fixed batch size of {batch} (exported without dynamic_axes)" in show.stdout,
              show.stdout[-1500:])
        again = f"({other_readings} of them read so here)" in show.stdout
        check(f"a file of fixed batch {batch}: {other_readings} shapes read otherwise than first",
              again if other_readings else "of them read so here" not in show.stdout, show.stdout[:2500])
    return exporter


def plain_export_then_freeze(psrun):
    def exporter(model, x, path, opset):
        torch.onnx.export(model, x, path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}})
        before = run([psrun, "model", "show", path])
        check("a plain export's buffers train: 7,850 + 786 values, no state",
              "total: 8,636 parameters" in before.stdout and "state:" not in before.stdout, before.stdout[-800:])
        froze = run([psrun, "model", "freeze", path, "--tensors", "mean,std,pe", "-o", path])
        check("psrun model freeze --tensors mean,std,pe exits 0", froze.returncode == 0, froze.stdout)
    return exporter


def freeze_refusals(psrun, tmp, exported):
    bad = run([psrun, "model", "freeze", f"{tmp}/buffered_17.onnx", "--tensors", "pe,nope", "-o", f"{tmp}/x.onnx"])
    check("freeze of a name that is no float initializer exits 2 naming it",
          bad.returncode == 2 and "'nope' is not a float initializer" in bad.stdout, bad.stdout)
    own = run([psrun, "model", "freeze", exported, "--tensors", "head.bias", "-o", f"{tmp}/x.onnx"])
    check("freeze of a file psrun exported exits 2", own.returncode == 2 and "exported by psrun" in own.stdout,
          own.stdout)


def log_tail(path):
    return open(path).read()[-1500:] if os.path.exists(path) else ""


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    psrun = os.path.abspath(args[0])
    test_x, _ = mnist_test_set(args, 1000)
    tmp = tempfile.mkdtemp(prefix="psrun-frozen-")
    torch.set_num_threads(1)
    try:
        merged_by_value(psrun, tmp, test_x)
        # At a fixed batch of 1, attention's view(L, 1 * heads, d) does not say which axis held
        # the batch: psrun reads it as torch writes it (the batch outside the heads).
        for b, torch_mha in ((2, True), (1, True), (2, False), (1, False)):
            check_model(check, psrun, f"fixed_batch_{b}{'_mha' if torch_mha else ''}",
                        lambda: FixedBatchAttention(torch_mha), (1, 28, 28), ["reshape", "expand", "dense"], tmp,
                        batch=8, seed=3, opsets=(14, 17), finite_differences=False, data=test_x[:8],
                        exporter=export_fixed_batch(psrun, b))
        check_model(check, psrun, "fixed_batch_1_retry", FixedBatchRetry, (1, 28, 28), ["reshape", "reduce_sum", "dense"],
                    tmp, batch=8, seed=3, opsets=(17,), finite_differences=False, data=test_x[:8],
                    exporter=export_fixed_batch(psrun, 1, other_readings=1))
        # At 1, h0.expand(1, b, 16) is first read with the batch first (a class token's): the LSTM
        # refuses it, and the next walk reads it with the batch on axis 1.
        for b, others in ((2, 0), (1, 1)):
            check_model(check, psrun, f"fixed_batch_{b}_lstm", FixedBatchRecurrent, (1, 28, 28),
                        ["lstm", "expand", "dense"], tmp, batch=8, seed=3, opsets=(17,), finite_differences=False,
                        data=test_x[:8], exporter=export_fixed_batch(psrun, b, other_readings=others))
        check_model(check, psrun, "buffered", Buffered, (1, 28, 28), ["dense"], tmp, batch=8, seed=3, opsets=(17,),
                    finite_differences=False, compare_predict=False, data=test_x[:8],
                    exporter=plain_export_then_freeze(psrun))
        # The gradients against torch's (torch_compare exports through psrun_torch too).
        check_model(check, psrun, "frozen_backbone", FrozenBackbone, (1, 28, 28), ["parameter", "dense"], tmp,
                    batch=8, seed=3, opsets=(17,), finite_differences=False, compare_predict=False)
        torch.manual_seed(3)
        model = FrozenBackbone()
        path = f"{tmp}/frozen.onnx"
        export(model, torch.zeros(2, 1, 28, 28), path, 17)
        show = run([psrun, "model", "show", path])
        check("model show: 14,010 trained values, 1,100,400 state (frozen)",
              show.returncode == 0 and "total: 14,010 parameters" in show.stdout and "state: 1,100,400 values"
              in show.stdout, show.stdout[-800:])
        run_dir, log = f"{tmp}/run", f"{tmp}/train.log"
        rc = train_through_psd(psrun, path, run_dir, 300, ["--weight-decay", "0.01"], timeout=400)
        with open(log, "w") as out:
            out.write(rc.stdout)
        if not check(f"trains 300 steps through psd, 1 ps + 2 workers (rc={rc.returncode})", rc.returncode == 0,
                     log_tail(log)):
            return
        accuracy = json.load(open(f"{run_dir}/summary.json")).get("test_accuracy", -1)
        check(f"test accuracy {accuracy:.4f} >= {ACCURACY}", accuracy >= ACCURACY)
        exported = f"{tmp}/trained.onnx"
        rc = run([psrun, "export", "--model-dir", run_dir, "-o", exported])
        if not check("psrun export exits 0", rc.returncode == 0, rc.stdout):
            return
        freeze_refusals(psrun, tmp, exported)
        before = {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}
        after = {t.name: numpy_helper.to_array(t) for t in onnx.load(exported).graph.initializer}
        for name in ("backbone.weight", "backbone.bias", "scale"):
            same = name in after and np.array_equal(before[name], after[name])
            check(f"{name} (frozen) is the file's, bit for bit, after training", same,
                  f"largest change {np.abs(before[name] - after[name]).max():.3e}" if name in after else "absent")
        listed = {m.key: m.value for m in onnx.load(exported).metadata_props}.get("psrun.frozen", "[]")
        check(f"the export lists them in psrun.frozen ({listed})",
              sorted(json.loads(listed)) == ["backbone.bias", "backbone.weight", "scale"])
        moved = "head.weight" in after and float(np.abs(before["head.weight"] - after["head.weight"]).max())
        check(f"head.weight trained (largest change {moved:.3f})", bool(moved) and moved > 1e-3)
        probs = f"{tmp}/probs.npy"
        np.save(f"{tmp}/test-x.npy", test_x)
        rc = predict_model_dir(psrun, run_dir, f"{tmp}/test-x.npy", probs)
        if not check("psrun predict --model-dir exits 0", rc.returncode == 0, rc.stdout):
            return
        networks.load_onnx_weights(model, exported)
        theirs = probabilities(model, test_x)
        diff = float(np.abs(np.load(probs) - theirs).max())
        check(f"the export loaded into torch predicts as psrun (largest difference {diff:.1e})", diff <= 1e-4)
    finally:
        if "--keep" not in args:
            shutil.rmtree(tmp, ignore_errors=True)
    check.finish()


if __name__ == "__main__":
    main()
