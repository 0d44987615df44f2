#!/usr/bin/python3
"""torch.einsum through ONNX Einsum (opsets 12, 14 and 17), lowered at import to matmul, mul,
reduce_sum, transpose and reshape layers (workerd/nn/ops/einsum.h). Six torch.nn modules on
MNIST images [N, 1, 28, 28]:

  attention  rows as 28 tokens (embedded), 2 heads: scores "bhqd,bhkd->bhqk", context "bhqk,bhkd->bhqd"
  bilinear   "bij,jk->bik" (a [28, 16] weight on every row), then "bi,ij->bj" (a [448, 10] weight)
  ellipsis   "...d,de->...e", the transpose "bij->bji" and the one-operand sum "bij->bj"
  dot_head   a per-example dot product "bd,bd->b" of two projections feeding a linear head
  trilinear  nn.Bilinear written out, "bi,oij,bj->bo", and a four-operand "bi,ij,bj,j->b"
             (chains of pairs)
  diagonal   "bii->bi" of the images, "ii->i" of a weight, the implicit trace "ii", "bij,jj->bi"
             (a repeated letter: its diagonal gathered first)

For each module and opset: `psrun model check F.onnx --input x.npy --labels y.npy --gradients G`
on a batch of real MNIST images: the forward outputs, the loss and every parameter's gradient
must equal torch's in float64 within TOLERANCE (1e-4) relative to the tensor's largest value (or
to 1e-3 of the network's largest gradient for a tensor whose gradient is zero but for rounding:
attention's key bias). Then attention and bilinear (opset 17)
train 1500 steps through psd (`psrun local --ps 1 --workers 2`, MNIST, batch 64, Adam 2e-3) to a
test accuracy >= ACCURACY, `psrun export` writes the lowered graph (no Einsum), the exported
weights load back into the torch module by name and predict what `psrun predict` predicts
(probabilities within 1e-4). Refused: a sum over the batch axis exits 2 naming the node, Einsum
and the equation.

Usage: einsum_models.py PSRUN [--data MNIST_DIR]   (exit 77 without torch)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import torch
    from torch import nn
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import networks  # noqa: E402  (load_onnx_weights)
from psrun_cli import mnist_test_set, predict_model_dir, train_through_psd  # noqa: E402
from torch_compare import probabilities, torch_reference  # noqa: E402

TOLERANCE = 1e-4
ACCURACY = 0.90
BATCH = 8
FAILED = []


def check(what, ok, log=None):
    print(f"{'ok' if ok else 'FAILED'}: {what}", flush=True)
    if not ok:
        FAILED.append(what)
        if log and os.path.exists(log):
            print("    " + open(log).read()[-1500:].replace("\n", "\n    "))
    return ok


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(28, 32)
        self.q, self.k, self.v = nn.Linear(32, 16), nn.Linear(32, 16), nn.Linear(32, 16)
        self.head = nn.Linear(28 * 16, 10)

    def forward(self, x):
        t = torch.relu(self.embed(x.view(x.size(0), 28, 28)))  # 28 row tokens
        q, k, v = (p(t).view(t.size(0), 28, 2, 8).permute(0, 2, 1, 3) for p in (self.q, self.k, self.v))
        a = torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k) * 8 ** -0.5, dim=-1)
        c = torch.einsum("bhqk,bhkd->bhqd", a, v)
        return self.head(c.permute(0, 2, 1, 3).reshape(t.size(0), 28 * 16))


class Bilinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(28, 16) * 28 ** -0.5)
        self.w2 = nn.Parameter(torch.randn(448, 10) * 448 ** -0.5)
        self.b2 = nn.Parameter(torch.zeros(10))

    def forward(self, x):
        h = torch.relu(torch.einsum("bij,jk->bik", x.view(x.size(0), 28, 28), self.w1))
        return torch.einsum("bi,ij->bj", h.flatten(1), self.w2) + self.b2


class EllipsisNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(28, 12) * 28 ** -0.5)
        self.head = nn.Linear(28, 10)

    def forward(self, x):
        h = torch.tanh(torch.einsum("...d,de->...e", x.view(x.size(0), 28, 28), self.w))  # [N, 28, 12]
        h = torch.einsum("bij->bji", h)  # [N, 12, 28]
        return self.head(torch.einsum("bij->bj", h))  # [N, 28]


class DotHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(784, 32), nn.Linear(784, 32)
        self.head = nn.Linear(33, 10)

    def forward(self, x):
        a, b = self.a(x.flatten(1)), torch.tanh(self.b(x.flatten(1)))
        dot = torch.einsum("bd,bd->b", a, b)
        return self.head(torch.cat([torch.relu(a), dot.unsqueeze(1)], dim=1))


class Trilinear(nn.Module):
    """nn.Bilinear written out: "bi,oij,bj->bo" of two projections and a [10, 16, 12] weight (three
    operands: a chain of pairs), plus a four-operand "bi,ij,bj,j->b" score beside it."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(784, 16), nn.Linear(784, 12)
        self.w = nn.Parameter(torch.randn(10, 16, 12) * 0.05)
        self.m, self.v = nn.Parameter(torch.randn(16, 12) * 0.1), nn.Parameter(torch.randn(12) * 0.1)

    def forward(self, x):
        a, b = torch.tanh(self.a(x.flatten(1))), torch.tanh(self.b(x.flatten(1)))
        score = torch.einsum("bi,ij,bj,j->b", a, self.m, b, self.v)
        return torch.einsum("bi,oij,bj->bo", a, self.w, b) + score.unsqueeze(1)


class Diagonal(nn.Module):
    """Diagonals: "bii->bi" of each image's 28 x 28 (the rows' diagonal), "ii->i" of a trainable
    [10, 10] weight, the implicit trace "ii" of another, and "bij,jj->bi" (a diagonal inside a
    two-operand product), feeding a linear head."""

    def __init__(self):
        super().__init__()
        self.w, self.v, self.u = (nn.Parameter(torch.randn(10, 10)), nn.Parameter(torch.randn(6, 6) * 0.2),
                                  nn.Parameter(torch.randn(28, 28) * 0.1))
        self.head = nn.Linear(28, 10)

    def forward(self, x):
        img = x.view(x.size(0), 28, 28)
        d = torch.einsum("bii->bi", img) + torch.einsum("bij,jj->bi", img, self.u)
        return self.head(d) * torch.einsum("ii->i", self.w) + torch.einsum("ii", self.v)


MODULES = {"attention": Attention, "bilinear": Bilinear, "ellipsis": EllipsisNet, "dot_head": DotHead,
           "trilinear": Trilinear, "diagonal": Diagonal}


def export(model, path, opset, module=None):
    model.train(True)
    torch.onnx.export(module or model, torch.zeros(2, 1, 28, 28), path, opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "N"}, "logits": {0: "N"}})


def run(args, log):
    with open(log, "w") as f:
        return subprocess.run(args, stdout=f, stderr=subprocess.STDOUT, timeout=600).returncode


def relative(mine, theirs, floor=1e-12):
    """The largest difference relative to the largest value of `theirs` (at least `floor`)."""
    mine = np.asarray(mine, dtype=np.float64).reshape(theirs.shape)
    return float(np.max(np.abs(mine - theirs))) / max(float(np.max(np.abs(theirs))), floor)


def gradients(psrun, name, opset, x, y, tmp):
    torch.manual_seed(5)
    model = MODULES[name]()
    path = f"{tmp}/{name}.{opset}.onnx"
    export(model, path, opset)
    einsums = [n.attribute[0].s.decode() for n in onnx.load(path).graph.node if n.op_type == "Einsum"]
    grads_path, log = f"{tmp}/{name}.{opset}.grads.json", f"{tmp}/{name}.{opset}.check.log"
    rc = run([psrun, "model", "check", path, "--input", f"{tmp}/x.npy", "--labels", f"{tmp}/y.npy",
              "--gradients", grads_path, "--json"], log)
    if not check(f"{name} opset {opset} (Einsum {', '.join(einsums)}): psrun model check exits 0 (rc={rc})", rc == 0, log):
        return
    mine = json.load(open(grads_path))
    logits, loss, grads = torch_reference(model, x, y)
    out = relative(mine["outputs"], logits)
    worst, worst_name, missing = 0.0, "", []
    # A gradient that is zero but for rounding (attention's key bias: softmax ignores a constant
    # per row) is compared relative to 1e-3 of the network's largest gradient.
    floor = 1e-3 * max(float(np.max(np.abs(g))) for g in grads.values())
    for tname, g in grads.items():
        if tname not in mine["tensors"]:
            missing.append(tname)
            continue
        e = relative(mine["tensors"][tname]["gradient"], g, floor)
        if e > worst:
            worst, worst_name = e, tname
    check(f"{name} opset {opset}: outputs {out:.1e}, loss {mine['loss']:.6f} vs {loss:.6f}, {len(grads)} gradients "
          f"worst {worst_name} {worst:.1e} (relative, limit {TOLERANCE:g})" + (f"; missing {missing}" if missing else ""),
          out <= TOLERANCE and abs(mine["loss"] - loss) <= TOLERANCE * max(1.0, abs(loss)) and not missing
          and worst <= TOLERANCE)


def train_and_export(psrun, name, tmp, test_x):
    torch.manual_seed(5)
    model = MODULES[name]()
    path = f"{tmp}/{name}.train.onnx"
    export(model, path, 17)
    run_dir, log = f"{tmp}/run-{name}", f"{tmp}/{name}.train.log"
    trained = train_through_psd(psrun, path, run_dir, 1500)
    with open(log, "w") as out:
        out.write(trained.stdout)
    rc = trained.returncode
    if not check(f"{name}: trains 1500 steps through psd, 1 ps + 2 workers, on MNIST (rc={rc})", rc == 0, log):
        return
    accuracy = json.load(open(f"{run_dir}/summary.json")).get("test_accuracy", -1)
    check(f"{name}: test accuracy {accuracy:.4f} >= {ACCURACY}", accuracy >= ACCURACY, log)
    exported = f"{tmp}/{name}.trained.onnx"
    rc = run([psrun, "export", "--model-dir", run_dir, "-o", exported], log)
    if not check(f"{name}: psrun export exits 0", rc == 0, log):
        return
    ops = sorted({n.op_type for n in onnx.load(exported).graph.node})
    check(f"{name}: the export writes the lowered nodes, no Einsum ({' '.join(ops)})", "Einsum" not in ops)
    try:
        onnx.checker.check_model(onnx.load(exported), full_check=True)
        check(f"{name}: the export passes onnx.checker (full_check)", True)
    except Exception as e:  # noqa: BLE001 (the checker's exception types vary)
        check(f"{name}: the export passes onnx.checker (full_check): {e}", False)
    probs = f"{tmp}/{name}.probs.npy"
    predicted = predict_model_dir(psrun, run_dir, f"{tmp}/test-x.npy", probs)
    with open(log, "a") as out:
        out.write(predicted.stdout)
    if not check(f"{name}: psrun predict --model-dir exits 0", predicted.returncode == 0, log):
        return
    networks.load_onnx_weights(model, exported)
    theirs = probabilities(model, test_x)
    diff = float(np.abs(np.load(probs) - theirs).max())
    agree = float((np.load(probs).argmax(1) == theirs.argmax(1)).mean())
    check(f"{name}: the exported weights, loaded into torch by name, predict as psrun (classes {agree:.1%}, "
          f"largest difference {diff:.1e})", diff <= 1e-4)


class BatchSum(nn.Module):
    def forward(self, x):
        return torch.einsum("bij,bjk->ik", x.view(x.size(0), 28, 28), x.view(x.size(0), 28, 28))[:, :10]


def refusals(psrun, tmp):
    for name, module, equation in (("batch_sum", BatchSum(), "bij,bjk->ik"),):
        path = f"{tmp}/refuse-{name}.onnx"
        export(module, path, 14)
        r = subprocess.run([psrun, "model", "show", path], capture_output=True, text=True, timeout=120)
        want = f"(Einsum): equation \"{equation}\""
        check(f"{name}: {equation} is refused, exit 2 naming Einsum and the equation ({r.stderr.strip()[-160:]})",
              r.returncode == 2 and want in r.stderr and "node '" in r.stderr)


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    psrun = os.path.abspath(args[0])
    test_x, test_y = mnist_test_set(args, 1000)
    x, y = test_x[:BATCH], test_y[:BATCH]
    tmp = tempfile.mkdtemp(prefix="psrun-einsum-")
    torch.set_num_threads(1)
    try:
        np.save(f"{tmp}/x.npy", x)
        np.save(f"{tmp}/y.npy", y)
        np.save(f"{tmp}/test-x.npy", test_x)
        for opset in (12, 14, 17):
            for name in MODULES:
                gradients(psrun, name, opset, x, y, tmp)
        refusals(psrun, tmp)
        for name in ("attention", "bilinear"):
            train_and_export(psrun, name, tmp, test_x)
    finally:
        if "--keep" not in args:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(FAILED)} failed" if FAILED else "all passed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
