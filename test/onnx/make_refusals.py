#!/usr/bin/python3
"""Writes ONNX files psrun must refuse (exit 2, naming the node), one per refusal class, built
with onnx.helper from a graph psrun accepts by changing one thing (Conv 3x3 pad 1, Relu, MaxPool 2, Flatten, Gemm).

Usage: make_refusals.py OUT_DIR  -> OUT_DIR/<class>.onnx and OUT_DIR/expected.tsv
(file, text the error must contain).
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def weights():
    rng = np.random.default_rng(0)
    return [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in
            (("conv.w", (4, 1, 3, 3)), ("conv.b", (4,)), ("fc.w", (10, 4 * 14 * 14)), ("fc.b", (10,)))]


def graph(nodes, extra_inits=(), inputs=None):
    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 28, 28])]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])
    g = helper.make_graph(nodes, "refusal", inputs, [out], weights() + list(extra_inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def chain(conv_attrs=None, pool_attrs=None, flatten=None, relu_op="Relu"):
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    conv.update(conv_attrs or {})
    conv = {k: v for k, v in conv.items() if v is not None}
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    pool.update(pool_attrs or {})
    return [
        helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["c"], name="conv", **conv),
        helper.make_node(relu_op, ["c"], ["r"], name="act"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", **pool),
        flatten or helper.make_node("Flatten", ["p"], ["f"], name="flat", axis=1),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["y"], name="fc", transB=1),
    ]


def main():
    out = sys.argv[1]
    cases = {}
    cases["good"] = (graph(chain()), "")
    cases["unsupported_op"] = (graph(chain(relu_op="Hardmax")),
                               "node 'act' (Hardmax): the engine has no operator for ONNX Hardmax")
    shape_of = [helper.make_node("Shape", ["p"], ["s"], name="shape_of")]
    reshape = helper.make_node("Reshape", ["p", "s"], ["f"], name="reshape")
    # Reshape(p, Shape(p)) is evaluated at import (the identity): the Gemm then sees a 4-D value.
    cases["reshape_to_own_shape"] = (graph(chain(flatten=reshape)[:3] + shape_of + chain(flatten=reshape)[3:]),
                                     "node 'fc' (Gemm): input A must be a 2-D graph value [N, F]")
    cases["storage_order"] = (graph(chain(pool_attrs=dict(storage_order=1))),
                              "node 'pool' (MaxPool): storage_order 1 (column major) is not supported")
    cases["same_lower"] = (graph(chain(conv_attrs=dict(auto_pad="SAME_LOWER", pads=None))),
                           "node 'conv' (Conv): auto_pad SAME_LOWER is not supported")
    with open(f"{out}/expected.tsv", "w") as f:
        for name, (model, expected) in cases.items():
            onnx.save(model, f"{out}/{name}.onnx")
            f.write(f"{name}.onnx\t{expected}\n")
    good = open(f"{out}/good.onnx", "rb").read()
    with open(f"{out}/truncated.onnx", "wb") as f:
        f.write(good[:len(good) * 2 // 3])
    with open(f"{out}/expected.tsv", "a") as f:
        f.write("truncated.onnx\tnot an ONNX model\n")


if __name__ == "__main__":
    main()
