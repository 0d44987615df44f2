"""One torch module against psrun, whole: the check the operator-family tests of test/onnx
(volumetric_models.py, lowered_ops_models.py) run per module and opset. Exported by torch.onnx
in training mode without constant folding, batch axis dynamic (input "x", output "logits"):
  - `psrun model show F.onnx` exits 0 and lists the expected kinds;
  - `psrun model check F.onnx --gradients G.json` gives torch's forward outputs, loss and every
    parameter's gradient, tensor by tensor, and trains no tensor torch does not (the module's
    buffers are listed frozen by python/psrun_torch.py, as users export), in float64 within the tolerance (each relative to
    the tensor's largest value, or to `gradient_floor` of the network's largest gradient when
    that is larger; the worst printed);
  - `psrun predict --onnx F.onnx` gives torch's softmax (eval mode), unless predict=False."""
import json
import os
import re
import sys
import tempfile

import numpy as np
import torch

from psrun_cli import predict, run

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import psrun_torch  # noqa: E402


class Checks:
    """Prints one line per check and remembers the failures; finish() exits 1 when one failed."""

    def __init__(self):
        self.failed = []

    def __call__(self, what, ok, detail="", always=False):
        shown = f": {detail}" if detail and (always or not ok) else ""
        print(f"{'ok' if ok else 'FAILED'}: {what}{shown}", flush=True)
        if not ok:
            self.failed.append(what)
        return ok

    def finish(self):
        print(f"{len(self.failed)} failed" if self.failed else "all passed")
        sys.exit(1 if self.failed else 0)


def export(model, x, path, opset):
    """As a user exports for psrun (python/psrun_torch.py): training mode, no folding, the batch
    axis dynamic, the module's buffers listed as frozen."""
    psrun_torch.export(model, x, path, input_names=["x"], output_names=["logits"], opset=opset)


def probabilities(model, x):
    """The module's softmax over its logits for the float batch x, in eval mode (NumPy)."""
    model.eval()
    with torch.no_grad():
        return torch.softmax(model(torch.from_numpy(x)), dim=1).numpy()


def torch_reference(model, x, y):
    """Outputs, loss and parameter gradients in float64 (train mode: a batch norm's batch
    statistics); the module's buffers (running statistics) are left as they were."""
    return psrun_torch.reference(model, x, y)


def relative(mine, theirs, floor=1e-12):
    mine = np.asarray(mine, dtype=np.float64).reshape(theirs.shape)
    return float(np.max(np.abs(mine - theirs))) / max(float(np.max(np.abs(theirs))), floor)


def worst_gradient(mine, theirs):
    """psrun model check's gradients (`mine`: its --gradients JSON "tensors") against torch's by
    name: (the largest relative error, its tensor, the torch tensors psrun did not report)."""
    worst, worst_name, missing = 0.0, "", []
    for name, g in theirs.items():
        if name not in mine:
            missing.append(name)
            continue
        err = relative(mine[name]["gradient"], g)
        if err > worst:
            worst, worst_name = err, name
    return worst, worst_name, missing


def compare_with_torch(check, tag, mine, logits, loss, grads, tolerance, gradient_floor):
    """psrun model check's --gradients JSON `mine` against torch's float64 `logits`, `loss` and
    parameter `grads` (by name): one check each for the outputs, the loss and all gradients (each
    relative to the tensor's largest value, or to `gradient_floor` of the network's largest
    gradient when that is larger: a tensor whose gradient is zero but for rounding)."""
    err = relative(mine["outputs"], logits)
    check(f"{tag}: forward outputs = torch's", err <= tolerance, f"max relative error {err:.2e}", True)
    check(f"{tag}: loss = torch's", abs(mine["loss"] - loss) <= tolerance * max(abs(loss), 1.0),
          f"{mine['loss']:.6f} vs {loss:.6f}")
    extra = sorted(set(mine["tensors"]) - set(grads))
    check(f"{tag}: psrun trains only torch's parameters", not extra,
          f"{len(extra)} more: {extra[:6]} (a buffer imported as a parameter?)")
    floor = max(gradient_floor * max(float(np.max(np.abs(g))) for g in grads.values()), 1e-12)
    worst, worst_name, absent = 0.0, "", []
    for tname, g in grads.items():
        if tname not in mine["tensors"]:
            absent.append(tname)
            continue
        e = relative(mine["tensors"][tname]["gradient"], g, floor)
        if e >= worst:
            worst, worst_name = e, tname
    check(f"{tag}: {len(grads)} parameter gradients = torch's", not absent and worst <= tolerance,
          f"worst {worst_name} {worst:.2e}" + (f"; missing {absent}" if absent else ""), True)


def check_model(check, psrun, name, build, shape, kinds, work, *, batch, seed, tolerance=1e-4,
                opsets=(13, 14, 17), check_tolerance=None, gradient_floor=0.0, compare_predict=True,
                finite_differences=True, data=None, exporter=None):
    """`build()` (seeded with torch.manual_seed(1)) on a [batch, *shape] input from
    default_rng(seed), at each opset. check_tolerance: psrun model check's own central-difference
    bound (--tolerance), where ReLU and max kinks need a coarser one than its default.
    finite_differences=False: torch's float64 gradients are the only reference (two forward
    passes per tensor cost minutes for a network of hundreds of tensors). data: the input batch
    itself (real images) instead of normal draws. exporter(model, x, path, opset): another way to
    write the file than export() (torch.onnx.export's defaults, say)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, *shape)).astype(np.float32) if data is None else np.asarray(data, np.float32)
    y = rng.integers(0, 10, size=batch).astype(np.int64)
    xf, yf = os.path.join(work, f"{name}.x.npy"), os.path.join(work, f"{name}.y.npy")
    np.save(xf, x)
    np.save(yf, y)
    torch.manual_seed(1)
    model = build()
    with torch.no_grad():
        want = torch.softmax(model.eval()(torch.from_numpy(x)), dim=1).numpy()
    for opset in opsets:
        tag = f"{name}_{opset}"
        path = os.path.join(work, tag + ".onnx")
        (exporter or export)(model.train(), torch.from_numpy(x), path, opset)
        show = run([psrun, "model", "show", path])
        if not check(f"{tag}: psrun model show exits 0", show.returncode == 0, show.stdout[-1500:]):
            continue
        missing = [k for k in kinds if not re.search(rf"\b{k}\b", show.stdout)]
        check(f"{tag}: its layers", not missing, f"missing {missing}")
        grads_path = os.path.join(work, tag + ".grads.json")
        cmd = [psrun, "model", "check", path, "--input", xf, "--labels", yf, "--gradients", grads_path, "--json",
               "--no-bf16"]  # torch is the reference; bf16 would double the run and the file
        if check_tolerance is not None:
            cmd += ["--tolerance", str(check_tolerance)]
        if not finite_differences:
            cmd.append("--no-finite-differences")
        r = run(cmd, 300)
        what = "its own central differences" if finite_differences else "gradients only"
        if not check(f"{tag}: psrun model check exits 0 ({what})",
                     r.returncode == 0 and os.path.exists(grads_path), r.stdout[-600:]):
            continue
        mine = json.load(open(grads_path))
        logits, loss, grads = torch_reference(model, x, y)
        # A conv bias before a batch norm has a zero gradient in float64: only rounding is left of
        # it, hence the floor relative to the network's largest gradient.
        compare_with_torch(check, tag, mine, logits, loss, grads, tolerance, gradient_floor)
        if compare_predict:
            got, perr = predict(psrun, path, x, work, tag)
            if check(f"{tag}: psrun predict exits 0", got is not None, perr):
                diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
                check(f"{tag}: psrun predict = torch softmax", diff <= tolerance, f"largest difference {diff:.2e}",
                      True)


def sweep_main(check, networks, subset_env, prefix):
    """A sweep's command line, PSRUN [WORK_DIR]: each of `networks` ({name: (input shape without
    the batch, build, kinds model show must list)}), or those named in $subset_env (a,b), through
    check_model at opsets 14 and 17, torch's float64 gradients the only reference (1e-4, gradients
    below 1e-4 of the network's largest compared absolutely) and predict compared; then
    check.finish()."""
    psrun = sys.argv[1]
    work = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix=prefix)
    os.makedirs(work, exist_ok=True)
    chosen = os.environ.get(subset_env)
    for name, (shape, build, kinds) in networks.items():
        if chosen and name not in chosen.split(","):
            continue
        check_model(check, psrun, name, build, shape, kinds, work, batch=4, seed=1, opsets=(14, 17),
                    tolerance=1e-4, gradient_floor=1e-4, finite_differences=False, compare_predict=True)
    check.finish()


def run_main(doc, body):
    """A test script's command line, PSRUN [WORK_DIR] (else exit with `doc`): torch at one thread,
    then body(psrun, work) in WORK_DIR or in a temporary directory removed afterwards."""
    if len(sys.argv) not in (2, 3):
        sys.exit(doc)
    psrun = os.path.abspath(sys.argv[1])
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = sys.argv[2] if len(sys.argv) == 3 else tmp
        os.makedirs(work, exist_ok=True)
        body(psrun, work)
