#!/usr/bin/python3
"""Normalisation layers of PyTorch as torch.onnx.export writes them at opsets 13, 14 and 17, end to
end through the psrun CLI (the group_norm and layer_norm kinds, workerd/onnx/onnx_patterns_norm.cpp;
psrun's own group_norm export is tested in process by test/nn/ops_group_norm_onnx_test.cpp):

  1. small torch modules with nn.GroupNorm (affine and not; rank 4 and rank 3), nn.InstanceNorm2d
     (affine=True and False) and nn.LayerNorm (last dim; [C, H, W] at opset 17), exported in
     training mode without constant folding, batch axis dynamic: `psrun model show F.onnx` exits
     0 and lists the expected group_norm / layer_norm layers (one per torch module: nn.GroupNorm's
     Reshape/InstanceNormalization/Reshape/Mul/Add is one layer binding PyTorch's weight and bias
     by name), `psrun predict --onnx F.onnx` gives torch's softmax probabilities within 1e-4, and
     every trainable tensor's gradient of the mean cross-entropy on a batch (`psrun model check
     --gradients`) is torch's, by name, within 1e-4 of the tensor's largest;
  2. GroupNormalization at opset 18 (a graph built with onnx.helper): scale and bias per group (the
     opset-18 spec) and per channel (opset 21's), predictions and gradients against torch.

Prints one line per check; exits 1 when one fails, 77 when torch or onnx cannot be imported.
Usage: norm_models_v2.py PSRUN [WORK_DIR]
"""
import json
import os
import sys
import tempfile

try:
    import numpy as np
    import onnx
    import torch
    from torch import nn
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from psrun_cli import predict, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FAILED = []


def check(what, ok, detail=""):
    if ok and len(detail) > 200:
        detail = ""  # a command's output, shown when it failed
    print(f"{'ok' if ok else 'FAILED'}: {what}{(': ' + detail) if detail else ''}")
    if not ok:
        FAILED.append(what)
    return ok


class Rank3GroupNorm(nn.Module):
    """GroupNorm on [N, C, L] (a conv's output flattened over space)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)
        self.fc = nn.Linear(8 * 144, 10)

    def forward(self, x):
        y = self.norm(self.conv(x).flatten(2))
        return self.fc(torch.relu(y).flatten(1))


def cnn(norm1, norm2):
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), norm1, nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), norm2, nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 3 * 3, 10))


# name -> (builder, {kind: count expected in `psrun model show`}, opsets)
MODELS = {
    "groupnorm": (lambda: cnn(nn.GroupNorm(4, 16), nn.GroupNorm(8, 32)), {"group_norm": 2}, (13, 14, 17)),
    "groupnorm_plain": (lambda: cnn(nn.GroupNorm(4, 16, affine=False), nn.GroupNorm(1, 32)), {"group_norm": 2},
                        (13, 14, 17)),
    "groupnorm_rank3": (Rank3GroupNorm, {"group_norm": 1}, (13, 17)),
    "instnorm_affine": (lambda: cnn(nn.InstanceNorm2d(16, affine=True), nn.InstanceNorm2d(32, affine=True)),
                        {"group_norm": 2}, (13, 14, 17)),
    "instnorm_plain": (lambda: cnn(nn.InstanceNorm2d(16), nn.InstanceNorm2d(32)), {"group_norm": 2}, (13, 14, 17)),
    "layernorm": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(144, 32), nn.LayerNorm(32), nn.GELU(),
                                        nn.Linear(32, 10)), {"layer_norm": 1}, (13, 14, 17)),
    "layernorm_chw": (lambda: nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.LayerNorm([4, 12, 12]), nn.ReLU(),
                                            nn.Flatten(), nn.Linear(4 * 144, 10)), {"layer_norm": 1}, (17,)),
}


def randomise(model):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.GroupNorm, nn.InstanceNorm2d, nn.LayerNorm)) and m.weight is not None:
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


def show(psrun, path):
    """`psrun model show --json`: (exit 0, {kind: layers}, {kind: [tensor names]}, text)."""
    r = run([psrun, "model", "show", "--json", path])
    counts, tensors = {"group_norm": 0, "layer_norm": 0}, {"group_norm": [], "layer_norm": []}
    if r.returncode == 0:
        for layer in json.loads(r.stdout)["layers"]:
            if layer["kind"] in counts:
                counts[layer["kind"]] += 1
                tensors[layer["kind"]] += [t["name"] for t in layer.get("tensors", [])]
    return r.returncode == 0, counts, tensors, r.stdout[-1500:]


def gradients(psrun, path, model, x, labels, work, tag):
    """`psrun model check --gradients` on (x, labels) against torch's gradients of the mean
    cross-entropy, by tensor name: (ok, detail)."""
    xs, ys, out = (os.path.join(work, f"{tag}.{k}") for k in ("gx.npy", "gy.npy", "g.json"))
    np.save(xs, x.numpy().astype(np.float32))
    np.save(ys, labels.numpy().astype(np.int64))
    r = run([psrun, "model", "check", path, "--input", xs, "--labels", ys, "--gradients", out])
    if not os.path.exists(out):
        return False, r.stdout[-1500:]
    with open(out) as f:
        ours = json.load(f)["tensors"]
    model.zero_grad()
    nn.functional.cross_entropy(model(x), labels).backward()
    worst, where = 0.0, ""
    for name, p in model.named_parameters():
        if name not in ours:
            return False, f"no gradient for {name}"
        got = np.array(ours[name]["gradient"], dtype=np.float32).reshape(p.shape)
        ref = p.grad.numpy()
        # Relative to the tensor's largest gradient (a conv bias before an instance norm has
        # none: its gradient is rounding noise on both sides).
        err = float(np.abs(got - ref).max()) / max(float(np.abs(ref).max()), 1e-2)
        if err > worst:
            worst, where = err, name
    return worst <= 1e-4, f"worst {where}: {worst:.2e} of its largest gradient"


def torch_models(psrun, work):
    torch.manual_seed(0)
    x = torch.rand(7, 1, 12, 12) * 2.0 - 0.5
    labels = torch.randint(0, 10, (7,))
    for name, (build, kinds, opsets) in MODELS.items():
        model = build()
        randomise(model)
        model.eval()  # the normalisations here use their batch's statistics either way
        with torch.no_grad():
            want = torch.softmax(model(x), dim=1).numpy()
        for opset in opsets:
            tag = f"{name}_{opset}"
            path = os.path.join(work, tag + ".onnx")
            torch.onnx.export(model, x, path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, input_names=["images"], output_names=["logits"],
                              dynamic_axes={"images": {0: "N"}, "logits": {0: "N"}})
            ok, counts, tensors, text = show(psrun, path)
            if not check(f"{tag}: psrun model show exits 0", ok, text):
                continue
            check(f"{tag}: its layers", all(counts[k] == v for k, v in kinds.items()), f"{counts}, want {kinds}")
            if name in ("groupnorm", "instnorm_affine"):
                names = sorted(tensors["group_norm"])
                check(f"{tag}: PyTorch's weight and bias bound by name", names == ["1.bias", "1.weight", "5.bias", "5.weight"],
                      str(names))
            got, err = predict(psrun, path, x.numpy(), work, tag)
            if not check(f"{tag}: psrun predict exits 0", got is not None, err):
                continue
            diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
            check(f"{tag}: psrun predict = torch softmax", diff <= 1e-4, f"largest difference {diff:.2e}")
            ok, detail = gradients(psrun, path, model, x, labels, work, tag)
            check(f"{tag}: every tensor's gradient (psrun model check) = torch's", ok, detail)


class PerGroupNorm(nn.Module):
    """GroupNormalization-18's semantics: scale and bias per group."""

    def __init__(self, groups, channels):
        super().__init__()
        self.groups, self.channels = groups, channels
        self.weight = nn.Parameter(torch.empty(groups).uniform_(0.5, 1.5))
        self.bias = nn.Parameter(torch.empty(groups).uniform_(-0.5, 0.5))

    def forward(self, x):
        k = self.channels // self.groups
        return nn.functional.group_norm(x, self.groups, self.weight.repeat_interleave(k), self.bias.repeat_interleave(k))


class GroupNorm18(nn.Module):
    def __init__(self, per_group):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.norm = PerGroupNorm(2, 8) if per_group else nn.GroupNorm(2, 8)
        self.fc = nn.Linear(8 * 144, 10)
        randomise(self)

    def forward(self, x):
        return self.fc(torch.relu(self.norm(self.conv(x))).flatten(1))


def group_normalization_18(psrun, work):
    """GroupNormalization (opset 18; torch 1.13 writes no opset 18, so the graph is built by hand):
    scale and bias per group as the opset-18 spec has them, and per channel (opset 21's)."""
    from onnx import helper, numpy_helper, TensorProto
    torch.manual_seed(2)
    x = torch.rand(5, 1, 12, 12)
    labels = torch.randint(0, 10, (5,))
    for per_group in (True, False):
        tag = f"group_normalization_18_{'group' if per_group else 'channel'}"
        model = GroupNorm18(per_group)
        inits = [numpy_helper.from_array(p.detach().numpy(), name) for name, p in model.named_parameters()]
        nodes = [helper.make_node("Conv", ["images", "conv.weight", "conv.bias"], ["c"], pads=[1, 1, 1, 1]),
                 helper.make_node("GroupNormalization", ["c", "norm.weight", "norm.bias"], ["g"], num_groups=2,
                                  epsilon=1e-5),
                 helper.make_node("Relu", ["g"], ["r"]),
                 helper.make_node("Flatten", ["r"], ["f"], axis=1),
                 helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], transB=1)]
        graph = helper.make_graph(nodes, tag, [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 1, 12, 12])],
                                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
        path = os.path.join(work, tag + ".onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
        ok, counts, tensors, text = show(psrun, path)
        if not check(f"{tag}: psrun model show exits 0", ok, text):
            continue
        check(f"{tag}: one group_norm binding norm.weight and norm.bias",
              counts["group_norm"] == 1 and sorted(tensors["group_norm"]) == ["norm.bias", "norm.weight"], str(tensors))
        with torch.no_grad():
            want = torch.softmax(model(x), dim=1).numpy()
        got, err = predict(psrun, path, x.numpy(), work, tag)
        if check(f"{tag}: psrun predict exits 0", got is not None, err):
            diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
            check(f"{tag}: psrun predict = torch softmax", diff <= 1e-4, f"largest difference {diff:.2e}")
        ok, detail = gradients(psrun, path, model, x, labels, work, tag)
        check(f"{tag}: every tensor's gradient = torch's", ok, detail)


def layer_norm_decomposed_18(psrun, work):
    """PyTorch's opset-13 LayerNorm decomposition rewritten as opset 18 writes ReduceMean (axes as
    an input, not an attribute): still one layer_norm, predictions as torch's."""
    import onnx
    from onnx import numpy_helper
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(144, 32), nn.LayerNorm(32), nn.Linear(32, 10))
    randomise(model)
    x = torch.rand(5, 1, 12, 12)
    path13, path18 = os.path.join(work, "ln_decomposed_13.onnx"), os.path.join(work, "ln_decomposed_18.onnx")
    torch.onnx.export(model, x, path13, opset_version=13, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "N"}, "logits": {0: "N"}})
    proto = onnx.load(path13)
    for node in proto.graph.node:
        if node.op_type == "ReduceMean":
            axes = next(a for a in node.attribute if a.name == "axes")
            proto.graph.initializer.append(numpy_helper.from_array(np.array(list(axes.ints), np.int64), node.name + "_axes"))
            node.input.append(node.name + "_axes")
            node.attribute.remove(axes)
    proto.opset_import[0].version = 18
    onnx.save(proto, path18)
    ok, counts, _, text = show(psrun, path18)
    if not check("LayerNorm decomposed at opset 18: psrun model show exits 0", ok, text):
        return
    check("LayerNorm decomposed at opset 18: one layer_norm", counts["layer_norm"] == 1, str(counts))
    with torch.no_grad():
        want = torch.softmax(model(x), dim=1).numpy()
    got, err = predict(psrun, path18, x.numpy(), work, "ln_decomposed_18")
    if check("LayerNorm decomposed at opset 18: psrun predict exits 0", got is not None, err):
        diff = float(np.abs(got - want).max())
        check("LayerNorm decomposed at opset 18: psrun predict = torch softmax", diff <= 1e-4, f"largest difference {diff:.2e}")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        work = sys.argv[2] if len(sys.argv) == 3 else tmp
        os.makedirs(work, exist_ok=True)
        torch_models(psrun, work)
        group_normalization_18(psrun, work)
        layer_norm_decomposed_18(psrun, work)
    print(f"{len(FAILED)} failed" if FAILED else "all passed")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
