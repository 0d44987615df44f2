#!/usr/bin/python3
"""Checks export_zoo's files: every built-in model's export passes onnx.checker (full_check),
OpenCV's dnn module loads and runs it, and its probabilities equal those of psrun's engine on
the random batch within 1e-4. OpenCV 4.6 cannot parse transformer_rows (a trained position table
read through Identity, attention's MatMul of two graph values): its exported weights go into
PyTorch's nn.TransformerEncoder module of bench/networks.py instead, which must give the same
probabilities.

Usage: check_zoo_exports.py DIR NAME...
"""
import sys

import cv2
import numpy as np
import onnx
import onnx.numpy_helper


def pytorch_transformer(model, images):
    """Probabilities of bench/networks.py's TransformerRows (eval mode) with the export's weights."""
    import os
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
    from networks import TransformerRows
    w = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy()) for t in model.graph.initializer}
    net = TransformerRows().eval()
    with torch.no_grad():
        net.embed.weight.copy_(w["embed/w"]), net.embed.bias.copy_(w["embed/b"])
        net.pos.copy_(w["pos/value"].reshape(28, 1, 64))
        for i, layer in enumerate(net.encoder.layers, 1):
            p = f"enc{i}_"
            layer.self_attn.in_proj_weight.copy_(torch.cat([w[p + t + "/w"] for t in "qkv"]))
            layer.self_attn.in_proj_bias.copy_(torch.cat([w[p + t + "/b"] for t in "qkv"]))
            layer.self_attn.out_proj.weight.copy_(w[p + "out_proj/w"]), layer.self_attn.out_proj.bias.copy_(w[p + "out_proj/b"])
            layer.linear1.weight.copy_(w[p + "ff1/w"]), layer.linear1.bias.copy_(w[p + "ff1/b"])
            layer.linear2.weight.copy_(w[p + "ff2/w"]), layer.linear2.bias.copy_(w[p + "ff2/b"])
            for n in ("norm1", "norm2"):
                getattr(layer, n).weight.copy_(w[p + n + "/scale"]), getattr(layer, n).bias.copy_(w[p + n + "/bias"])
        net.fc.weight.copy_(w["fc/w"]), net.fc.bias.copy_(w["fc/b"])
        return torch.softmax(net(torch.from_numpy(images)), dim=1).numpy()


def main():
    d, names = sys.argv[1], sys.argv[2:]
    if not names:
        sys.exit(__doc__)
    for name in names:
        path = f"{d}/{name}.onnx"
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        dims = [x.dim_value for x in model.graph.input[0].type.tensor_type.shape.dim[1:]]
        expected = np.fromfile(f"{d}/{name}.probs.f32", np.float32)
        classes = model.graph.output[0].type.tensor_type.shape.dim[1].dim_value
        expected = expected.reshape(-1, classes)
        images = np.fromfile(f"{d}/{name}.input.f32", np.float32).reshape([len(expected)] + dims)
        if name == "transformer_rows":
            probs, runner = pytorch_transformer(model, images), "PyTorch's TransformerEncoder"
        else:
            net = cv2.dnn.readNetFromONNX(path)
            net.setInput(images)
            probs, runner = net.forward(), "OpenCV"
        assert probs.shape == expected.shape, (probs.shape, expected.shape)
        assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-4)
        worst = float(np.abs(probs - expected).max())
        print(f"{name}: onnx.checker full_check ok; {runner}'s probabilities differ from psrun's engine by at most "
              f"{worst:.2e} ({len(expected)} images, arg-max classes {sorted(set(expected.argmax(axis=1)))})")
        if worst > 1e-4:
            sys.exit(f"FAILED: {name}: {runner}'s probabilities differ from the engine's by {worst}")

if __name__ == "__main__":
    main()
