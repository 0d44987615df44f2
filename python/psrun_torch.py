"""Exporting a torch.nn module for psrun in one call, and checking psrun's gradients of it against
PyTorch's (docs/models.md "Importing from PyTorch", "Checking a network").

    import sys; sys.path.insert(0, "<psrun checkout>/python")
    import psrun_torch
    psrun_torch.export(model, example_batch, "model.onnx")                    # one input
    psrun_torch.export(model, (image, meta), "model.onnx", input_names=["image", "meta"])
    report = psrun_torch.check(model, images, labels)                         # prints the worst tensor
    report = psrun_torch.check(with_loss, {"x": images, "target": targets}, None)  # forward returns its loss

What it does that a bare torch.onnx.export does not:
  - exports in training mode without constant folding, so batch norms and dropout stay in the
    graph (an eval-mode export folds batch norms into the convolutions: psrun warns);
  - makes axis 0 of every input and output the batch axis (dynamic_axes), so shapes PyTorch
    computes from the batch are not frozen at the example's batch size;
  - lists the module's buffers (register_buffer: positional tables, rotary angles, fixed filters)
    and its parameters with requires_grad=False (a frozen backbone) in the file's "psrun.frozen"
    metadata, so psrun imports them as constants instead of training them: torch.onnx writes both
    as initializers exactly like trainable parameters. Normalization layers' running statistics
    are left out (psrun keeps them as state, as torch does). A constant holds at most 2^20
    values: psrun refuses a larger frozen tensor (exit 2) rather than train it;
  - keeps the module's buffers as they were: torch.onnx runs the forward in training mode, which
    moves every batch norm's running statistics towards the example batch's (all the way with
    momentum=None) and writes the moved values into the file; export() restores them in the
    module and writes the values from before the export into the file;
  - writes each x.detach() the forward calls as a psrun::StopGradient node: ONNX has no
    stop-gradient and torch.onnx drops detach(), so a straight-through estimator
    x + (q(x) - x).detach() would otherwise train with q's gradient. Code under
    `with torch.no_grad():` is not seen: write x.detach() (or stop_gradient(x)) there;
  - writes nn.Dropout1d/2d/3d (whole channels dropped), which torch.onnx refuses in training
    mode, as Dropout of ones [N, C, 1, ...] times the input: psrun trains with channel dropout;
  - writes torchvision's stochastic depth (StochasticDepth, in EfficientNet, ConvNeXt, Swin;
    bernoulli_ has no ONNX form in training mode) as dropout of ones per example ("row") or for
    the batch ("batch") times the input;
  - fills Tensor.bernoulli_(p) (timm's DropPath) from rand_like(t) < p, which torch.onnx can
    write;
  - gives a layer norm without weight (nn.LayerNorm(elementwise_affine=False), F.layer_norm(x,
    shape)) a weight of ones: torch 1.13 writes its LayerNormalization (opset 17) without the
    required Scale input, an invalid file;
  - writes what torch.onnx refuses to, as the same function of ops it can write:
    nn.Bilinear (F.bilinear) as an Einsum, nn.ChannelShuffle as view/transpose/view, and an
    adaptive average or max pool to sizes that do not divide the input's (VGG's and AlexNet's
    classifiers on a small image) as the slices PyTorch reduces;
  - writes the losses torch 1.13 refuses (nn.MSELoss, L1Loss, SmoothL1Loss, HuberLoss, BCELoss,
    CosineEmbeddingLoss, SoftMarginLoss, MarginRankingLoss, HingeEmbeddingLoss, MultiMarginLoss,
    TripletMarginLoss, PoissonNLLLoss, and CrossEntropyLoss with label_smoothing) as PyTorch
    defines them, so a module that ends in its own loss exports (psrun_torch_losses.py);
  - writes the element-wise functions torch 1.13 refuses (asinh, acosh, atanh, sinh, cosh, expm1,
    exp2, deg2rad, trunc, frac, logit, xlogy, hypot, copysign, logaddexp, sinc, atan2, addcdiv,
    diff), Tensor.unflatten (nn.Unflatten) and F.threshold with a non-zero threshold as formulas
    of operators it writes (psrun_torch_math.py);
  - refuses (ValueError) a module with a setting torch.onnx drops without a word, where the file
    would train something else: nn.Embedding / nn.EmbeddingBag with max_norm (the rows renormed
    in place at each lookup) or scale_grad_by_freq (the gradient scaled by each id's count).
"""
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper
import torch

from psrun_torch_rewrites import export_rewrites, rewritten

FROZEN_KEY = "psrun.frozen"


def stop_gradient(x):
    """x.detach() that export() writes as psrun::StopGradient (what every x.detach() becomes
    during export() anyway)."""
    return x.detach()


def dropped_settings(model):
    """The settings of `model`'s modules that torch.onnx drops without a word (the file computes
    or trains something else): one line each, naming the module and what to do."""
    found = []
    for name, module in model.named_modules():
        if not isinstance(module, (torch.nn.Embedding, torch.nn.EmbeddingBag)):
            continue
        what = f"{type(module).__name__} '{name or '(the model)'}'"
        if module.max_norm is not None:
            found.append(f"{what} has max_norm={module.max_norm}: torch.onnx writes a plain lookup, without the "
                         "renorm of each row it looks up; set max_norm=None to train without it, or divide the "
                         "looked-up rows by max(1, norm / max_norm) in forward()")
        if module.scale_grad_by_freq:
            found.append(f"{what} has scale_grad_by_freq=True: the file cannot say that a row's gradient is "
                         "divided by its id's count in the batch; set it to False to train without it")
    return found


def frozen_names(model):
    """The parameters of `model` with requires_grad=False and its float buffers that are not a
    normalization layer's running statistics."""
    names = [name for name, p in model.named_parameters() if not p.requires_grad]
    for module_name, module in model.named_modules():
        if isinstance(module, torch.nn.modules.batchnorm._NormBase):
            continue
        for name, buffer in module.named_buffers(recurse=False):
            if buffer is not None and buffer.is_floating_point():
                names.append(f"{module_name}.{name}" if module_name else name)
    return names


def export(model, args, path, input_names=None, output_names=None, opset=17):
    """torch.onnx.export for psrun: training mode, no folding, a batch axis on every input and
    output, the buffers and frozen parameters listed in psrun.frozen (returned). `args` is the
    example batch (a tensor or a tuple). ValueError for a setting torch.onnx would drop
    (dropped_settings())."""
    dropped = dropped_settings(model)
    if dropped:
        raise ValueError("psrun_torch.export: the ONNX file would not say what the module does:\n  " +
                         "\n  ".join(dropped))
    inputs = args if isinstance(args, tuple) else (args,)
    input_names = input_names or (["x"] if len(inputs) == 1 else [f"x{i}" for i in range(len(inputs))])
    output_names = output_names or ["logits"]
    was_training = model.training
    saved = {name: b.detach().clone() for name, b in model.named_buffers()}
    model.train()
    try:
        with rewritten(export_rewrites()):
            torch.onnx.export(model, args, path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, input_names=input_names, output_names=output_names,
                              dynamic_axes={name: {0: "N"} for name in input_names + output_names},
                              custom_opsets={"psrun": 1})
    finally:
        model.train(was_training)
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(saved[name])
    exported = onnx.load(path)
    for i, t in enumerate(exported.graph.initializer):
        if t.name in saved:
            exported.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(saved[t.name].numpy(), t.name))
    initializers = {t.name for t in exported.graph.initializer}
    frozen = [name for name in frozen_names(model) if name in initializers]
    if frozen:
        entry = exported.metadata_props.add()
        entry.key, entry.value = FROZEN_KEY, json.dumps(frozen)
    onnx.save(exported, path)
    return frozen


def _inputs(x):
    """x as {input name: NumPy array}: a dict as given, else {"x": x}; floats as float32."""
    named = x if isinstance(x, dict) else {"x": x}
    return {n: np.ascontiguousarray(v, dtype=np.float32) if np.asarray(v).dtype.kind == "f" else np.ascontiguousarray(v)
            for n, v in named.items()}


def reference(model, x, y, input_grads=False):
    """PyTorch's outputs, loss (F.cross_entropy against the class labels y; with y None, the
    module's own: its forward returns a float scalar, its outputs) and every parameter's
    gradient for the batch x, in float64 and in training mode (a batch norm uses the batch's
    statistics): (outputs, loss, {name: gradient}), and with input_grads a fourth item, each
    float input's gradient {input name: gradient}. x is a NumPy array, or {input name: array}
    in the order forward() takes them (integer arrays, ids, stay integers). The module's buffers
    and its precision are left as they were."""
    saved = {n: b.detach().clone() for n, b in model.named_buffers()}
    was_training = model.training
    model = model.double().train()
    model.zero_grad()
    args = {}
    for n, v in _inputs(x).items():
        args[n] = torch.from_numpy(v.astype(np.float64) if v.dtype.kind == "f" else v)
        if input_grads and v.dtype.kind == "f":
            args[n].requires_grad_(True)
    logits = model(*args.values())
    if y is None:
        loss = logits
    else:
        loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(np.asarray(y, dtype=np.int64)))
    loss.backward()
    grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters() if p.grad is not None}
    model.float()
    model.zero_grad()
    model.train(was_training)
    with torch.no_grad():
        for n, b in model.named_buffers():
            b.copy_(saved[n])
    if input_grads:
        return logits.detach().numpy(), float(loss), grads, {n: t.grad.numpy() for n, t in args.items()
                                                             if t.grad is not None}
    return logits.detach().numpy(), float(loss), grads


def check(model, x, y, psrun="psrun", opset=17, floor=1e-3, work=None, verbose=True):
    """The whole network against PyTorch on one batch: exports `model` (export() above), runs
    `psrun model check --no-finite-differences` on the batch x (a float NumPy array [N, ...], or
    {input name: array} for a module of several inputs, in forward()'s order) with class labels
    y [N] (or, with y None, a module whose forward computes its own loss from its inputs, targets
    among them, and returns that float scalar: its outputs are the loss), and compares psrun's outputs, loss and every parameter's gradient with PyTorch's
    in float64 (reference()), tensor by tensor. A tensor's error is its largest difference over its
    largest |gradient|, or over `floor` times the network's largest |gradient| where that is larger
    (a bias before a batch norm has a gradient that is zero but for rounding). `work`: a directory
    for the files (default: a temporary one, removed). Dropout must be 0 (or the module in a state
    without randomness) for the two to compute the same function. Prints a table (verbose) and
    returns {"outputs_error", "loss", "torch_loss", "errors": {name: error}, "worst": (name,
    error), "missing": [parameters psrun does not train], "extra": [tensors psrun trains that
    torch does not]}. Raises RuntimeError when psrun cannot import or run the model, ValueError
    where export() refuses the module."""
    inputs = _inputs(x)
    with tempfile.TemporaryDirectory() as tmp:
        where = work or tmp
        os.makedirs(where, exist_ok=True)
        path, yf, gf = (os.path.join(where, n) for n in ("model.onnx", "y.npy", "gradients.json"))
        args = []
        for n, v in inputs.items():
            np.save(os.path.join(where, n + ".npy"), v)
            args += ["--input", f"{n}={os.path.join(where, n + '.npy')}"]
        if y is not None:
            np.save(yf, np.asarray(y, dtype=np.int64))
            args += ["--labels", yf]
        batch = tuple(torch.from_numpy(v) for v in inputs.values())
        export(model, batch if len(batch) > 1 else batch[0], path, input_names=list(inputs), opset=opset)
        r = subprocess.run([psrun, "model", "check", path, *args, "--gradients", gf,
                            "--no-finite-differences", "--no-bf16", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, check=False)
        if r.returncode not in (0, 1) or not os.path.exists(gf):
            raise RuntimeError(f"psrun model check exited {r.returncode}: {r.stdout[-2000:]}")
        with open(gf) as f:
            mine = json.load(f)
    logits, loss, grads = reference(model, inputs, y)
    outputs = np.asarray(mine["loss"] if y is None else mine["outputs"], dtype=np.float64).reshape(logits.shape)
    report = {"outputs_error": float(np.abs(outputs - logits).max() / max(np.abs(logits).max(), 1e-12)),
              "loss": float(mine["loss"]), "torch_loss": loss, "errors": {},
              "missing": sorted(set(grads) - set(mine["tensors"])),
              "extra": sorted(set(mine["tensors"]) - set(grads))}
    largest = max((float(np.abs(g).max()) for g in grads.values()), default=0.0)
    for name, g in grads.items():
        if name in mine["tensors"]:
            got = np.asarray(mine["tensors"][name]["gradient"], dtype=np.float64).reshape(g.shape)
            report["errors"][name] = float(np.abs(got - g).max() / max(float(np.abs(g).max()), floor * largest, 1e-12))
    report["worst"] = max(report["errors"].items(), key=lambda e: e[1], default=("", 0.0))
    if verbose:
        print(f"{'tensor':40s} {'|gradient|':>12s} {'rel error':>10s}")
        for name, g in grads.items():
            e = report["errors"].get(name)
            print(f"{name:40s} {float(np.abs(g).max()):12.4g} {'missing' if e is None else f'{e:10.2e}'}")
        print(f"outputs: relative error {report['outputs_error']:.2e}; loss {report['loss']:.6f} "
              f"(torch {loss:.6f}); worst: {report['worst'][0]}, relative error {report['worst'][1]:.2e}")
        for what in ("missing", "extra"):
            if report[what]:
                print(f"{what}: {report[what]}")
    return report
