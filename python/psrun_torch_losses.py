"""The losses torch 1.13's exporter refuses, written while psrun_torch.export() traces a module as
the same function of operators it can write (element-wise nodes, Where, Gather, reductions).

torch.onnx has no symbolic for aten::mse_loss, l1_loss, smooth_l1_loss, huber_loss,
binary_cross_entropy, cosine_embedding_loss, soft_margin_loss, margin_ranking_loss,
hinge_embedding_loss, multi_margin_loss, triplet_margin_loss or poisson_nll_loss, and refuses
cross_entropy with label_smoothing ("ONNX does not support label_smoothing"), so a module whose
forward ends in nn.MSELoss() (a regression's loss in the graph) cannot be exported at all. Each
replacement below follows PyTorch's own definition (aten/src/ATen/native/Loss.cpp, LossNLL.cpp) for
the value and hence the gradient, with the module's reduction ("none", "sum", "mean", or the
deprecated size_average/reduce pair). What a replacement does not cover (a multi-margin loss over
other than N x C scores, p other than 1 or 2) is left to torch.onnx, which refuses it as before.

The nn.*Loss modules call these through torch.nn.functional, as does code that writes
`F.mse_loss(...)`; a function imported by name before the export (`from torch.nn.functional import
mse_loss`) is the original and is not replaced."""
import math

import torch
import torch.nn.functional as F
from torch.nn import _reduction


def _reduction_of(size_average, reduce, reduction):
    if size_average is not None or reduce is not None:
        return _reduction.legacy_get_string(size_average, reduce)
    return reduction


def _reduced(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _pointwise(per_element):
    """A loss of (input, target, size_average, reduce, reduction, *settings): per_element(input,
    target, *settings) reduced."""

    def wrap(original):
        def loss(input, target, size_average=None, reduce=None, reduction="mean", *settings, **named):
            return _reduced(per_element(input, target, *settings, **named), _reduction_of(size_average, reduce, reduction))

        return loss

    return wrap


def _label_weights(one_hot, weight, axis=-1):
    """weight[target] from the target's one-hot rows: psrun gathers a constant by data ids only
    as an embedding's rows, so the weights are picked by a product and a sum instead."""
    shape = [1] * one_hot.dim()
    shape[axis] = weight.shape[0]
    return (one_hot * weight.view(shape)).sum(axis)


def _smooth_l1(input, target, beta=1.0):
    z = (input - target).abs()
    return z if beta == 0.0 else torch.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta)


def _huber(original):
    def huber_loss(input, target, reduction="mean", delta=1.0):
        z = (input - target).abs()
        return _reduced(torch.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta)), reduction)

    return huber_loss


def _binary_cross_entropy(original):
    def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
        # PyTorch clamps each log at -100, so that x = 0 or 1 gives a finite loss.
        loss = -(target * torch.clamp(torch.log(input), min=-100.0) +
                 (1.0 - target) * torch.clamp(torch.log(1.0 - input), min=-100.0))
        if weight is not None:
            loss = loss * weight
        return _reduced(loss, _reduction_of(size_average, reduce, reduction))

    return binary_cross_entropy


def _cosine_embedding(original):
    def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        axis = target.dim()  # the vectors' axis: 1 for a batch, 0 for one pair
        eps = 1e-12
        products = (input1 * input2).sum(axis)
        norms = ((input1 * input1).sum(axis) + eps) * ((input2 * input2).sum(axis) + eps)
        cos = products / torch.sqrt(norms)
        zeros = torch.zeros_like(cos)
        loss = torch.where(target == 1, 1.0 - cos, zeros) + torch.where(target == -1, (cos - margin).clamp_min(0.0), zeros)
        return _reduced(loss, _reduction_of(size_average, reduce, reduction))

    return cosine_embedding_loss


def _margin_ranking(original):
    def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        loss = (-target * (input1 - input2) + margin).clamp_min(0.0)
        return _reduced(loss, _reduction_of(size_average, reduce, reduction))

    return margin_ranking_loss


def _hinge_embedding(original):
    def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        zeros = torch.zeros_like(input)
        loss = torch.where(target != 1, (margin - input).clamp_min(0.0), zeros) + torch.where(target != -1, input, zeros)
        return _reduced(loss, _reduction_of(size_average, reduce, reduction))

    return hinge_embedding_loss


def _multi_margin(original):
    def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                          reduction="mean"):
        if input.dim() != 2 or p not in (1, 2):
            return original(input, target, p, margin, weight, size_average, reduce, reduction)
        classes = input.shape[1]
        z = (margin - input.gather(1, target.unsqueeze(1)) + input).clamp_min(0.0)
        if p == 2:
            z = z * z
        own = F.one_hot(target, classes).to(input.dtype)
        if weight is not None:
            z = z * _label_weights(own, weight).unsqueeze(1)
        others = 1.0 - own  # the label's own entry counts nothing
        return _reduced((z * others).sum(1) / classes, _reduction_of(size_average, reduce, reduction))

    return multi_margin_loss


def _triplet_margin(original):
    def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                            reduce=None, reduction="mean"):
        to_positive = F.pairwise_distance(anchor, positive, p, eps)
        to_negative = F.pairwise_distance(anchor, negative, p, eps)
        if swap:
            to_negative = torch.minimum(to_negative, F.pairwise_distance(positive, negative, p, eps))
        loss = (margin + to_positive - to_negative).clamp_min(0.0)
        return _reduced(loss, _reduction_of(size_average, reduce, reduction))

    return triplet_margin_loss


def _poisson_nll(original):
    def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                         reduction="mean"):
        loss = torch.exp(input) - target * input if log_input else input - target * torch.log(input + eps)
        if full:  # Stirling's term, where the target is above 1
            t = target.clamp_min(1.0)
            stirling = t * torch.log(t) - t + 0.5 * torch.log(2.0 * math.pi * t)
            loss = loss + torch.where(target > 1.0, stirling, torch.zeros_like(stirling))
        return _reduced(loss, _reduction_of(size_average, reduce, reduction))

    return poisson_nll_loss


def _cross_entropy(original):
    def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                      reduction="mean", label_smoothing=0.0):
        if label_smoothing == 0.0:
            return original(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
        reduction = _reduction_of(size_average, reduce, reduction)
        axis = 1 if input.dim() > 1 else 0
        classes = input.shape[axis]
        if target.is_floating_point():  # probabilities: smoothed towards the uniform distribution
            smoothed = target * (1.0 - label_smoothing) + label_smoothing / classes
            return original(input, smoothed, weight, None, ignore_index, None, reduction, 0.0)
        log_p = F.log_softmax(input, axis)
        nll = F.nll_loss(log_p, target, weight, None, ignore_index, None, reduction)
        ignored = target == ignore_index
        if weight is not None:
            shape = [1] * input.dim()
            shape[axis] = classes
            smooth = -(log_p * weight.view(shape)).sum(axis)
        else:
            smooth = -log_p.sum(axis)
        smooth = smooth.masked_fill(ignored, 0.0)
        if reduction == "mean":
            if weight is not None:  # divided by the labels' summed weights, as nll_loss is
                own = F.one_hot(target.masked_fill(ignored, 0), classes).to(input.dtype)
                if axis == 1 and input.dim() > 2:  # N x d1 ... x C to N x C x d1 ...
                    own = own.movedim(-1, 1)
                counted = _label_weights(own, weight, axis).masked_fill(ignored, 0.0).sum()
            else:
                counted = (~ignored).to(input.dtype).sum()
            smooth = smooth.sum() / counted
        else:
            smooth = _reduced(smooth, reduction)
        return (1.0 - label_smoothing) * nll + smooth * (label_smoothing / classes)

    return cross_entropy


def loss_rewrites():
    """(torch.nn.functional, name, wrap) for each loss export() replaces by wrap(original)."""
    pointwise = {"mse_loss": lambda x, t: (x - t) * (x - t), "l1_loss": lambda x, t: (x - t).abs(),
                 "soft_margin_loss": lambda x, t: F.softplus(-t * x)}
    rewrites = [(F, name, _pointwise(f)) for name, f in pointwise.items()]
    rewrites.append((F, "smooth_l1_loss", _pointwise(_smooth_l1)))
    rewrites += [(F, "huber_loss", _huber), (F, "binary_cross_entropy", _binary_cross_entropy),
                 (F, "cosine_embedding_loss", _cosine_embedding), (F, "margin_ranking_loss", _margin_ranking),
                 (F, "hinge_embedding_loss", _hinge_embedding), (F, "multi_margin_loss", _multi_margin),
                 (F, "triplet_margin_loss", _triplet_margin), (F, "poisson_nll_loss", _poisson_nll),
                 (F, "cross_entropy", _cross_entropy)]
    return rewrites
