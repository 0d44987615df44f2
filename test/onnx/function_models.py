#!/usr/bin/python3
"""ONNX model-local functions, inlined at import (workerd/onnx/onnx_functions.cpp):
  - torch.onnx.export(..., export_modules_as_functions={Block, Inner}): a residual block class
    used twice, each holding an inner module class (calls inside a function's body), at opsets
    15 and 17: torch_compare.check_model's outputs, loss and every parameter's gradient against
    torch in float64, and psrun predict against torch's softmax;
  - a function by onnx.helper whose LeakyRelu takes its alpha from the call's attribute
    (ref_attr_name), called with slope 0.2 and without (ONNX's default 0.01), against numpy;
  - refusals, exit 2 naming the function: a function calling itself, a call with more inputs than
    the function declares.
Prints one line per check; exits 1 when one fails, 77 without torch.
Usage: function_models.py PSRUN [WORK_DIR]"""
import copy
import os
import sys

try:
    import numpy as np
    import onnx
    import torch
    from onnx import TensorProto, helper, numpy_helper
    from torch import nn
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

from psrun_cli import predict, run  # noqa: E402
from torch_compare import Checks, check_model, run_main  # noqa: E402

check = Checks()


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.n = nn.Linear(8, 8), nn.LayerNorm(8)

    def forward(self, x):
        return torch.relu(self.n(self.a(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner, self.out = Inner(), nn.Linear(8, 8)

    def forward(self, x):
        return x + self.out(self.inner(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp, self.b1, self.b2, self.head = nn.Linear(6, 8), Block(), Block(), nn.Linear(8, 10)

    def forward(self, x):
        return self.head(self.b2(self.b1(torch.tanh(self.inp(x)))))


def as_functions(model, x, path, opset):
    # A copy each time: torch 1.13 asserts (function_extraction.cpp) when one module instance is
    # exported as functions twice.
    torch.onnx.export(copy.deepcopy(model), x, path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["x"], output_names=["logits"],
                      dynamic_axes={"x": {0: "N"}, "logits": {0: "N"}}, export_modules_as_functions={Block, Inner})
    functions = [f.name for f in onnx.load(path).functions]
    check(f"torch wrote its modules as functions (opset {opset})", sorted(functions) == ["Block", "Inner"], functions)


def leaky_model(path, calls, declared_inputs=1, recursive=False):
    """x [N, 4] -> Gemm -> the function "Act" per call (attributes of each call) -> logits [N, 4]."""
    alpha = helper.make_attribute_ref("alpha", TensorProto.FLOAT) if hasattr(helper, "make_attribute_ref") else None
    if alpha is None:
        alpha = onnx.AttributeProto()
        alpha.name, alpha.ref_attr_name, alpha.type = "alpha", "slope", onnx.AttributeProto.FLOAT
    else:
        alpha.ref_attr_name = "slope"
    body = [helper.make_node("LeakyRelu", ["a"], ["b"])]
    body[0].attribute.append(alpha)
    if recursive:
        body.append(helper.make_node("Act", ["b"], ["c"], domain="local"))
    else:
        body.append(helper.make_node("Identity", ["b"], ["c"]))
    fn = helper.make_function("local", "Act", [f"in{i}" if i else "a" for i in range(declared_inputs)], ["c"], body,
                              [helper.make_opsetid("", 17)], ["slope"])
    nodes, last = [helper.make_node("Gemm", ["x", "w"], ["h0"], transB=1)], "h0"
    for k, (slope, extra_inputs) in enumerate(calls):
        attrs = {} if slope is None else {"slope": slope}
        nodes.append(helper.make_node("Act", [last] + ["w"] * extra_inputs, [f"h{k + 1}"], domain="local", **attrs))
        last = f"h{k + 1}"
    nodes.append(helper.make_node("Identity", [last], ["logits"]))
    w = np.random.default_rng(2).standard_normal((4, 4)).astype(np.float32)
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 4])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                              functions=[fn])
    model.ir_version = 8
    onnx.save(model, path)
    return w


def attribute_refs(psrun, work):
    path = os.path.join(work, "act.onnx")
    w = leaky_model(path, [(0.2, 0), (None, 0)])
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    h = x @ w.T
    h = np.where(h > 0, h, 0.2 * h)
    h = np.where(h > 0, h, 0.01 * h)
    want = np.exp(h - h.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    got, err = predict(psrun, path, x, work, "act")
    if check("ref_attr_name: psrun predict exits 0", got is not None, err):
        diff = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
        check("ref_attr_name: alpha 0.2 from the call, then ONNX's default 0.01 = numpy", diff <= 1e-5,
              f"largest difference {diff:.2e}", True)


def refusals(psrun, work):
    for name, kwargs, says in [("recursive", {"recursive": True}, "nested deeper than 16"),
                               ("extra_input", {}, "2 inputs and 1 outputs where the function declares 1 and 1")]:
        path = os.path.join(work, name + ".onnx")
        leaky_model(path, [(0.2, 1 if name == "extra_input" else 0)], **kwargs)
        r = run([psrun, "model", "show", path])
        check(f"{name}: refused, exit 2, naming the function", r.returncode == 2 and says in r.stdout
              and "function 'Act'" in r.stdout, r.stdout.strip()[-400:])


def body(psrun, work):
    check_model(check, psrun, "module_functions", Net, (6,), ["layer_norm", "dense"], work, batch=6, seed=5,
                opsets=(15, 17), exporter=as_functions)
    attribute_refs(psrun, work)
    refusals(psrun, work)


if __name__ == "__main__":
    run_main(__doc__, body)
    check.finish()
