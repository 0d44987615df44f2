"""Modules and calls torch 1.13's exporter refuses or writes wrong, replaced while
psrun_torch.export() traces a module (psrun_torch's docstring lists them, and why each).
export_rewrites() gives (owner, attribute, wrap) for each, rewritten() applies them for a block."""
import contextlib
import sys
import warnings

import torch
import torch.nn.functional as F

from psrun_torch_losses import loss_rewrites
from psrun_torch_math import math_rewrites


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


def export_rewrites():
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
    return rewrites + loss_rewrites() + math_rewrites()


@contextlib.contextmanager
def rewritten(rewrites):
    """Each (owner, attribute, wrap) of `rewrites` replaced inside the block, restored after."""
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in rewrites]
    try:
        for (owner, name, wrap), (_, _, original) in zip(rewrites, originals):
            setattr(owner, name, wrap(original))
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
