"""Element-wise functions torch 1.13's exporter refuses ("Exporting the operator 'aten::asinh' ...
is not supported"), written while psrun_torch.export() traces a module as the same function of
operators it writes (Exp, Log, Sqrt, Floor, Where, Slice, Reshape).

Each is replaced as a torch function and as a Tensor method (torch.asinh(x) and x.asinh()); a
call with out= is left to torch.onnx. Where a formula rounds differently from PyTorch's own
kernel, it says so: expm1(x) = exp(x) - 1 loses the relative precision of tiny x (its gradient,
exp(x), does not), and atan2's gradient is not defined where x = y = 0 (nor is PyTorch's)."""
import math

import torch


def _asinh(x):  # sign(x) log(|x| + sqrt(x^2 + 1)): no cancellation for large negative x
    a = x.abs()
    return torch.sign(x) * torch.log(a + torch.sqrt(a * a + 1.0))


def _atan2(y, x):
    base = torch.atan(y / x)
    turn = torch.where(y >= 0, torch.full_like(base, math.pi), torch.full_like(base, -math.pi))
    return base + torch.where(x < 0, turn, torch.zeros_like(base))


def _trunc(x):
    return torch.sign(x) * torch.floor(x.abs())


def _logit(x, eps=None):
    if eps is not None:
        x = x.clamp(eps, 1.0 - eps)
    return torch.log(x / (1.0 - x))


def _logaddexp(a, b):
    top = torch.maximum(a, b)
    return top + torch.log(torch.exp(a - top) + torch.exp(b - top))


def _sinc(x):
    t = math.pi * x
    safe = torch.where(x == 0, torch.ones_like(t), t)
    return torch.where(x == 0, torch.ones_like(t), torch.sin(safe) / safe)


def _addcdiv(input, tensor1, tensor2, *, value=1):
    return input + value * tensor1 / tensor2


def _diff(input, n=1, dim=-1, prepend=None, append=None):
    parts = [t for t in (prepend, input, append) if t is not None]
    x = torch.cat(parts, dim) if len(parts) > 1 else input
    for _ in range(n):
        length = x.shape[dim]
        x = x.narrow(dim, 1, length - 1) - x.narrow(dim, 0, length - 1)
    return x


FORMULAS = {
    "asinh": _asinh,
    "acosh": lambda x: torch.log(x + torch.sqrt(x * x - 1.0)),
    "atanh": lambda x: 0.5 * torch.log((1.0 + x) / (1.0 - x)),
    "sinh": lambda x: 0.5 * (torch.exp(x) - torch.exp(-x)),
    "cosh": lambda x: 0.5 * (torch.exp(x) + torch.exp(-x)),
    "expm1": lambda x: torch.exp(x) - 1.0,
    "exp2": lambda x: torch.exp(x * math.log(2.0)),
    "deg2rad": lambda x: x * (math.pi / 180.0),
    "trunc": _trunc,
    "frac": lambda x: x - _trunc(x),
    "logit": _logit,
    "xlogy": lambda x, y: torch.where(x == 0, torch.zeros_like(x * y), x * torch.log(y)),
    "hypot": lambda a, b: torch.sqrt(a * a + b * b),
    "copysign": lambda a, b: torch.where(b < 0, -a.abs(), a.abs()),
    "logaddexp": _logaddexp,
    "sinc": _sinc,
    "atan2": _atan2,
    "addcdiv": _addcdiv,
    "diff": _diff,
}


def _replaced(formula):
    def wrap(original):
        def call(*args, out=None, **named):
            if out is not None:
                return original(*args, out=out, **named)
            return formula(*args, **named)

        return call

    return wrap


def _unflatten(original):
    """Tensor.unflatten (nn.Unflatten) as a Reshape: the batch axis stays as the trace sees it."""

    def unflatten(self, dim, sizes):
        d = dim if dim >= 0 else self.dim() + dim
        return self.reshape(tuple(self.shape[:d]) + tuple(sizes) + tuple(self.shape[d + 1:]))

    return unflatten


def _threshold(original):
    """F.threshold with a non-zero threshold (nn.Threshold): x where x > threshold, else value."""

    def threshold(input, threshold, value, inplace=False):
        return torch.where(input > threshold, input, torch.full_like(input, value))

    return threshold


def math_rewrites():
    """(owner, name, wrap) for each function export() replaces by wrap(original)."""
    rewrites = []
    for name, formula in FORMULAS.items():
        for owner in (torch, torch.Tensor):
            if hasattr(owner, name):
                rewrites.append((owner, name, _replaced(formula)))
    rewrites.append((torch.Tensor, "unflatten", _unflatten))
    rewrites.append((torch.nn.functional, "threshold", _threshold))
    return rewrites
