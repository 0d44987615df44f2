"""Exporting a torch.nn module for psrun in one call, and checking psrun's gradients of it against
PyTorch's (docs/models.md "Importing from PyTorch", "Checking a network").

    import sys; sys.path.insert(0, "<psrun checkout>/python")
    import psrun_torch
    psrun_torch.export(model, example_batch, "model.onnx")                    # one input
    psrun_torch.export(model, (image, meta), "model.onnx", input_names=["image", "meta"])
    report = psrun_torch.check(model, images, labels)                         # prints the worst tensor

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
  - refuses (ValueError) a module with a setting torch.onnx drops without a word, where the file
    would train something else: nn.Embedding / nn.EmbeddingBag with max_norm (the rows renormed
    in place at each lookup) or scale_grad_by_freq (the gradient scaled by each id's count).
"""
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn.functional as F

FROZEN_KEY = "psrun.frozen"


class _StopGradient(torch.autograd.Function):
    """x.detach() while exporting: the same values, written as psrun::StopGradient."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return torch.zeros_like(grad)

    @staticmethod
    def symbolic(g, x):
        return g.op("psrun::StopGradient", x)


def _channel_dropout(original, spatial):
    """F.dropout1d/2d/3d while exporting: torch.onnx cannot write them in training mode
    (aten::feature_dropout), so a batched input is multiplied by ordinary dropout of ones
    [N, C, 1, ...]: the same distribution (each channel of each example zeroed with probability
    p, the others scaled by 1 / (1 - p)), written as ConstantOfShape, Dropout and Mul."""

    def dropout(x, p=0.5, training=True, inplace=False):
        if not training or x.dim() != spatial + 2:
            return original(x, p, training, inplace)
        if p == 0.0:
            return x
        keep = torch.ones_like(x[(slice(None), slice(None)) + (slice(0, 1),) * spatial])
        return x * F.dropout(keep, p, True)

    return dropout


def _stochastic_depth(original):
    """torchvision.ops.stochastic_depth while exporting (StochasticDepth, DropPath in EfficientNet,
    ConvNeXt, Swin): its bernoulli_ on an empty tensor has no ONNX form in training mode, so the
    noise is ordinary dropout of ones, [N, 1, ...] per example ("row") or [1, ...] for the whole
    batch ("batch"): the same distribution, the kept scaled by 1 / (1 - p)."""

    def stochastic_depth(input, p, mode, training=True):
        if not training or p == 0.0 or p >= 1.0 or mode not in ("row", "batch"):
            return original(input, p, mode, training)
        if mode == "row":
            keep = torch.ones_like(input[(slice(None),) + (slice(0, 1),) * (input.dim() - 1)])
        else:
            keep = torch.ones([1] * input.dim(), dtype=input.dtype)
        return input * F.dropout(keep, p, True)

    return stochastic_depth


def _bernoulli_(original):
    """Tensor.bernoulli_(p) of a number p while exporting (timm's DropPath, as copied into many
    repositories: x.new_empty(shape).bernoulli_(keep)), which torch.onnx refuses ("out parameter is
    not supported"): the tensor is filled with rand_like(t) < p instead (RandomUniformLike, Less,
    Cast in the file), the same distribution."""

    def bernoulli_(self, p=0.5, *, generator=None):
        if isinstance(p, (int, float)) and generator is None:
            return self.copy_((torch.rand_like(self) < p).to(self.dtype))
        return original(self, p, generator=generator)

    return bernoulli_


def _layer_norm(original):
    """F.layer_norm while exporting: torch 1.13 writes a LayerNormalization (opset 17 and above)
    without its Scale input where there is no weight (nn.LayerNorm(elementwise_affine=False),
    F.layer_norm(x, shape)), which the ONNX checker refuses and no one can read; ones are passed
    as the weight (a Constant in the file), the same function."""

    def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
        if weight is None:
            weight = torch.ones(tuple(normalized_shape), dtype=x.dtype)
        return original(x, normalized_shape, weight, bias, eps)

    return layer_norm


def _bilinear(original):
    """F.bilinear while exporting (nn.Bilinear), which torch.onnx refuses (aten::bilinear): written
    as the Einsum x1_i W_oij x2_j over the rows of the inputs' leading axes, plus the bias."""

    def bilinear(input1, input2, weight, bias=None):
        rows1 = input1.reshape(-1, input1.shape[-1])
        out = torch.einsum("bi,oij,bj->bo", rows1, weight, input2.reshape(-1, input2.shape[-1]))
        if bias is not None:
            out = out + bias
        return out.reshape(tuple(input1.shape[:-1]) + (weight.shape[0],))

    return bilinear


def _channel_shuffle(original):
    """F.channel_shuffle while exporting (nn.ChannelShuffle, ShuffleNet), which torch.onnx refuses:
    written as the view [N, g, C / g, ...], the swap of axes 1 and 2 and the view back."""

    def channel_shuffle(input, groups):
        n, c, rest = input.shape[0], input.shape[1], tuple(input.shape[2:])
        return input.reshape((n, groups, c // groups) + rest).transpose(1, 2).reshape((n, c) + rest)

    return channel_shuffle


def _adaptive_pool(original, dims, reduce):
    """F.adaptive_avg_pool{dims}d / adaptive_max_pool{dims}d while exporting. torch.onnx writes
    them only where each output size divides the input's (an AlexNet's or VGG's pool to 6 x 6 or
    7 x 7 from a CIFAR-sized image is refused). Where one does not, each such axis is written as
    PyTorch computes it: output i reduces input positions floor(i L / n) to ceil((i + 1) L / n)
    (a Slice and a ReduceMean or ReduceMax each, then a Concat); a window of a rectangle is the
    same reduced one axis after the other. Indices (return_indices=True) are left to torch.onnx."""

    def pool(input, output_size, *rest, **named):
        with warnings.catch_warnings():  # the sizes are fixed: only the batch axis varies
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            sizes = [int(s) for s in input.shape[-dims:]]
        wanted = [output_size] * dims if isinstance(output_size, int) else list(output_size)
        wanted = [s if o is None else int(o) for s, o in zip(sizes, wanted)]
        if (rest and rest[0]) or named.get("return_indices") or all(s % o == 0 for s, o in zip(sizes, wanted)):
            return original(input, output_size, *rest, **named)
        x = input
        for axis, (size, out) in enumerate(zip(sizes, wanted), start=input.dim() - dims):
            if size == out:
                continue
            windows = [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]
            x = torch.cat([reduce(x.narrow(axis, a, b - a), axis) for a, b in windows], axis)
        return x

    return pool


def _export_rewrites():
    """(owner, attribute, wrap) for each function export() replaces by wrap(original) while
    torch.onnx traces the module (the module docstring says why)."""
    rewrites = [(torch.Tensor, "detach", lambda original: lambda self: _StopGradient.apply(self)),
                (torch.Tensor, "bernoulli_", _bernoulli_), (F, "layer_norm", _layer_norm)]
    rewrites += [(F, f"dropout{d}d", lambda original, d=d: _channel_dropout(original, d))
                 for d in (1, 2, 3) if hasattr(F, f"dropout{d}d")]
    rewrites += [(F, "bilinear", _bilinear), (F, "channel_shuffle", _channel_shuffle)]
    reductions = {"avg": lambda x, axis: x.mean(axis, keepdim=True), "max": lambda x, axis: x.amax(axis, keepdim=True)}
    rewrites += [(F, f"adaptive_{kind}_pool{d}d", lambda original, d=d, r=r: _adaptive_pool(original, d, r))
                 for kind, r in reductions.items() for d in (1, 2, 3)]
    depth = sys.modules.get("torchvision.ops.stochastic_depth")  # where the model uses torchvision
    if depth is not None and hasattr(depth, "stochastic_depth"):
        rewrites.append((depth, "stochastic_depth", _stochastic_depth))
    return rewrites


@contextlib.contextmanager
def _rewritten(rewrites):
    """Each (owner, attribute, wrap) of `rewrites` replaced inside the block, restored after."""
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in rewrites]
    try:
        for (owner, name, wrap), (_, _, original) in zip(rewrites, originals):
            setattr(owner, name, wrap(original))
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


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
        with _rewritten(_export_rewrites()):
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
    """PyTorch's outputs, loss (F.cross_entropy against the class labels y) and every parameter's
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
    y [N], and compares psrun's outputs, loss and every parameter's gradient with PyTorch's
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
    y = np.asarray(y, dtype=np.int64)
    with tempfile.TemporaryDirectory() as tmp:
        where = work or tmp
        os.makedirs(where, exist_ok=True)
        path, yf, gf = (os.path.join(where, n) for n in ("model.onnx", "y.npy", "gradients.json"))
        args = []
        for n, v in inputs.items():
            np.save(os.path.join(where, n + ".npy"), v)
            args += ["--input", f"{n}={os.path.join(where, n + '.npy')}"]
        np.save(yf, y)
        batch = tuple(torch.from_numpy(v) for v in inputs.values())
        export(model, batch if len(batch) > 1 else batch[0], path, input_names=list(inputs), opset=opset)
        r = subprocess.run([psrun, "model", "check", path, *args, "--labels", yf, "--gradients", gf,
                            "--no-finite-differences", "--no-bf16", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, check=False)
        if r.returncode not in (0, 1) or not os.path.exists(gf):
            raise RuntimeError(f"psrun model check exited {r.returncode}: {r.stdout[-2000:]}")
        with open(gf) as f:
            mine = json.load(f)
    logits, loss, grads = reference(model, inputs, y)
    outputs = np.asarray(mine["outputs"], dtype=np.float64).reshape(logits.shape)
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
