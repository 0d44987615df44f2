#!/usr/bin/python3
"""Element-wise operators of PyTorch as torch.onnx.export writes them at opsets 13, 14 and 17
(issue 34: PRelu, HardSwish/HardSigmoid, Selu, Mish, Max/Min, ReduceMax/ReduceMin, a causal -inf
mask before Softmax, a padding mask through Equal/Not/Where/Cast, a class token through Expand, a
final ArgMax; opset 18's Reduce* with axes inputs and Mish by onnx.helper),
end to end through the psrun CLI:

  small torch modules, exported in training mode without constant folding, batch axis dynamic:
  `psrun model show F.onnx` exits 0 and lists the expected kinds, and `psrun predict --onnx F.onnx`
  gives torch's softmax probabilities within 1e-4; at opset 13 `psrun model check` (gradients of one
  batch against the loss's change) exits 0. A module on integer ids (a padding mask
  `ids != 0`) is checked for import only (psrun predict reads images).

Prints one line per check; exits 1 when one fails, 77 when torch or onnx cannot be imported.
Usage: eltwise_models.py PSRUN [WORK_DIR]
"""
import os
import re
import sys
import tempfile

try:
    import numpy as np
    import onnx  # noqa: F401  (torch.onnx.export needs it)
    import torch
    from torch import nn
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from psrun_cli import predict, run  # noqa: E402

FAILED = []


def check(what, ok, detail="", always=False):
    """Prints `detail` when the check fails (or `always`)."""
    print(f"{'ok' if ok else 'FAILED'}: {what}{(': ' + detail) if detail and (always or not ok) else ''}")
    if not ok:
        FAILED.append(what)
    return ok


def conv_head(act, channels=4):
    return nn.Sequential(nn.Conv2d(1, channels, 3, padding=1), act, nn.Flatten(), nn.Linear(channels * 144, 10))


class HardMobile(nn.Module):
    """Hardswish, then a squeeze-excite gate with Hardsigmoid (F.hardsigmoid: alpha 1/6)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.act = nn.Hardswish()
        self.gate = nn.Conv2d(4, 4, 1)
        self.fc = nn.Linear(4 * 144, 10)

    def forward(self, x):
        y = self.act(self.conv(x) * 3.0)
        y = y * nn.functional.hardsigmoid(self.gate(y))
        return self.fc(y.flatten(1))


class MaxMin(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.fc = nn.Linear(144, 16), nn.Linear(144, 16), nn.Linear(16, 10)

    def forward(self, x):
        a, b = self.a(x.flatten(1)), self.b(x.flatten(1))
        return self.fc(torch.maximum(a, b) + torch.minimum(a, torch.full_like(a, 0.1)))


class Amax(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(1, 6, 3, padding=1), nn.Linear(6 * 12 + 6, 10)

    def forward(self, x):
        y = self.conv(x)
        rows = torch.amax(y, dim=3).flatten(1)          # [N, 6 * 12]
        low = torch.amin(y, dim=(2, 3))                  # [N, 6]
        return self.fc(torch.cat([rows, low], dim=1))


class Causal(nn.Module):
    """One attention head over the 12 rows of the image, a registered triu(-inf) mask."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.fc = nn.Linear(12, 12), nn.Linear(12, 12), nn.Linear(144, 10)
        self.register_buffer("mask", torch.triu(torch.full((12, 12), float("-inf")), diagonal=1))

    def forward(self, x):
        s = x.flatten(1, 2)                              # [N, 12, 12]
        scores = self.q(s) @ self.k(s).transpose(1, 2) / 12 ** 0.5 + self.mask
        return self.fc((torch.softmax(scores, dim=-1) @ s).flatten(1))


class MaskedMean(nn.Module):
    """Mean over the non-zero pixels of a per-pixel embedding (a padding mask on floats)."""

    def __init__(self):
        super().__init__()
        self.embed, self.fc = nn.Linear(1, 8), nn.Linear(8, 10)

    def forward(self, x):
        v = x.flatten(1)                                 # [N, 144]
        mask = v != 0
        e = self.embed(v.unsqueeze(-1))                  # [N, 144, 8]
        e = torch.where(mask.unsqueeze(-1), e, torch.zeros(()))
        count = mask.sum(1, keepdim=True).clamp(min=1)
        return self.fc(e.sum(1) / count)


class ClassToken(nn.Module):
    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(1, 8, 4, stride=4)       # [N, 8, 3, 3]
        self.cls = nn.Parameter(torch.randn(1, 1, 8))
        self.fc = nn.Linear(8 * 10, 10)

    def forward(self, x):
        t = self.patch(x).flatten(2).transpose(1, 2)     # [N, 9, 8]
        t = torch.cat([self.cls.expand(x.shape[0], -1, -1), t], dim=1)
        return self.fc(t.flatten(1))


class ArgmaxHead(nn.Module):
    """A predict graph: the class ids (ArgMax), whose logits psrun trains and predicts from."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(144, 10))

    def forward(self, x):
        return self.net(x).argmax(1)


class IdsBag(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding, self.fc = nn.Embedding(20, 8), nn.Linear(8, 10)

    def forward(self, ids):
        mask = (ids != 0).unsqueeze(-1)
        e = torch.where(mask, self.embedding(ids), torch.zeros(()))
        return self.fc(e.sum(1) / mask.sum(1).clamp(min=1))


# name -> (builder, kinds expected in `psrun model show`)
MODELS = {
    "prelu_shared": (lambda: conv_head(nn.PReLU()), ["prelu"]),
    "prelu_channel": (lambda: conv_head(nn.PReLU(4)), ["prelu"]),
    "hard": (HardMobile, ["hard_sigmoid"]),
    "selu_mish": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(144, 32), nn.SELU(), nn.Linear(32, 32), nn.Mish(),
                                        nn.Linear(32, 10)), ["selu"]),
    "maxmin": (MaxMin, ["maximum", "minimum"]),
    "amax": (Amax, ["reduce_max", "reduce_min"]),
    "causal": (Causal, ["softmax"]),
    "masked_mean": (MaskedMean, ["equal", "not", "where"]),
    "class_token": (ClassToken, ["expand"]),
}


def export(model, x, path, opset, input_name="images"):
    torch.onnx.export(model, x, path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=[input_name], output_names=["logits"],
                      dynamic_axes={input_name: {0: "N"}, "logits": {0: "N"}})


def opset18(psrun, work):
    """Opset 18 (torch 1.13 cannot write it): every Reduce* takes its axes as an input, and Mish.
    A graph by onnx.helper on images [N, 1, 4, 6], against numpy."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = rng.standard_normal((10, 15)).astype(np.float32)
    ints = lambda name, v: numpy_helper.from_array(np.array(v, dtype=np.int64), name)  # noqa: E731
    nodes = [
        helper.make_node("ReduceMax", ["x", "a3"], ["mx"], keepdims=0),         # [N, 1, 4]
        helper.make_node("ReduceMin", ["x", "a2"], ["mn"], keepdims=0),         # [N, 1, 6]
        helper.make_node("ReduceMean", ["x", "a23"], ["me"], keepdims=0),       # [N, 1]
        helper.make_node("Unsqueeze", ["me", "a2"], ["me3"]),                   # [N, 1, 1]
        helper.make_node("ReduceSum", ["x", "a3"], ["sm"], keepdims=0),         # [N, 1, 4]
        helper.make_node("ReduceSum", ["sm"], ["sm2"], noop_with_empty_axes=1),  # no axes: the input
        helper.make_node("Concat", ["mx", "mn", "me3", "sm2"], ["cat"], axis=2),  # [N, 1, 15]
        helper.make_node("Mish", ["cat"], ["act"]),
        helper.make_node("Flatten", ["act"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "w"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(nodes, "opset18", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 4, 6])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              [numpy_helper.from_array(w, "w"), ints("a2", [2]), ints("a3", [3]), ints("a23", [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    path = os.path.join(work, "opset18.onnx")
    onnx.save(model, path)
    show = run([psrun, "model", "show", path])
    if not check("opset18: psrun model show exits 0", show.returncode == 0, show.stdout[-1500:]):
        return
    x = rng.random((5, 1, 4, 6)).astype(np.float32) * 2 - 1
    cat = np.concatenate([x.max(3), x.min(2), x.mean((2, 3))[:, :, None], x.sum(3)], axis=2).reshape(5, 15)
    act = cat * np.tanh(np.log1p(np.exp(cat)))
    logits = act @ w.T
    want = np.exp(logits - logits.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    got, err = predict(psrun, path, x, work, "opset18")
    if check("opset18: psrun predict exits 0", got is not None, err):
        diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
        check("opset18: psrun predict = numpy", diff <= 1e-4, f"largest difference {diff:.2e}", True)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    only = os.environ.get("ELTWISE_MODELS")  # a comma-separated subset, for debugging
    with tempfile.TemporaryDirectory() as tmp:
        work = sys.argv[2] if len(sys.argv) == 3 else tmp
        os.makedirs(work, exist_ok=True)
        torch.manual_seed(0)
        x = torch.rand(7, 1, 12, 12)
        x[x < 0.3] = 0.0  # zeros for the padding mask
        for name, (build, kinds) in MODELS.items():
            if only and name not in only.split(","):
                continue
            model = build()
            model.eval()
            with torch.no_grad():
                want = torch.softmax(model(x), dim=1).numpy()
            for opset in (13, 14, 17):
                tag = f"{name}_{opset}"
                path = os.path.join(work, tag + ".onnx")
                export(model, x, path, opset)
                show = run([psrun, "model", "show", path])
                if not check(f"{tag}: psrun model show exits 0", show.returncode == 0, show.stdout[-1500:]):
                    continue
                missing = [k for k in kinds if not re.search(rf"\b{k}\b", show.stdout)]
                check(f"{tag}: its layers", not missing, f"missing {missing}")
                if name.startswith("prelu"):  # nn.PReLU's weight keeps its name (Sequential index 1)
                    check(f"{tag}: PyTorch's PReLU weight bound by name",
                          re.search(r"\b1\.weight(_param)?\b", show.stdout) is not None)
                if opset == 13:  # one batch forward and backward, gradients against the loss's change
                    grad = run([psrun, "model", "check", path])
                    check(f"{tag}: psrun model check (gradients) exits 0", grad.returncode == 0, grad.stdout[-1500:])
                got, err = predict(psrun, path, x.numpy(), work, tag)
                if not check(f"{tag}: psrun predict exits 0", got is not None, err):
                    continue
                diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
                check(f"{tag}: psrun predict = torch softmax", diff <= 1e-4, f"largest difference {diff:.2e}", True)
        if not only or "ids_bag" in only.split(","):
            ids = torch.randint(0, 20, (5, 16))
            for opset in (13, 14, 17):
                path = os.path.join(work, f"ids_bag_{opset}.onnx")
                export(IdsBag(), ids, path, opset, "ids")
                show = run([psrun, "model", "show", path])
                check(f"ids_bag_{opset}: psrun model show exits 0", show.returncode == 0, show.stdout[-1500:])
                grad = run([psrun, "model", "check", path])
                check(f"ids_bag_{opset}: psrun model check (gradients) exits 0", grad.returncode == 0, grad.stdout[-1500:])
        if not only or "argmax" in only.split(","):
            head = ArgmaxHead().eval()
            with torch.no_grad():
                want = torch.softmax(head.net(x), dim=1).numpy()
            for opset in (13, 17):
                path = os.path.join(work, f"argmax_{opset}.onnx")
                export(head, x, path, opset)
                show = run([psrun, "model", "show", path])
                if check(f"argmax_{opset}: psrun model show exits 0", show.returncode == 0, show.stdout[-1500:]):
                    got, err = predict(psrun, path, x.numpy(), work, f"argmax_{opset}")
                    if check(f"argmax_{opset}: psrun predict exits 0", got is not None, err):
                        diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
                        check(f"argmax_{opset}: psrun predict = torch softmax of the logits", diff <= 1e-4,
                              f"largest difference {diff:.2e}", True)
        if not only or "opset18" in only.split(","):
            opset18(psrun, work)
    print(f"{len(FAILED)} failed" if FAILED else "all passed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
