"""Exporting a torch.nn module for psrun in one call (docs/models.md "Importing from PyTorch").

    import sys; sys.path.insert(0, "<psrun checkout>/python")
    import psrun_torch
    psrun_torch.export(model, example_batch, "model.onnx")                    # one input
    psrun_torch.export(model, (image, meta), "model.onnx", input_names=["image", "meta"])

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
    `with torch.no_grad():` is not seen: write x.detach() (or stop_gradient(x)) there.
"""
import json

import onnx
import onnx.numpy_helper
import torch

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


def stop_gradient(x):
    """x.detach() that export() writes as psrun::StopGradient (what every x.detach() becomes
    during export() anyway)."""
    return x.detach()


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
    example batch (a tensor or a tuple)."""
    inputs = args if isinstance(args, tuple) else (args,)
    input_names = input_names or (["x"] if len(inputs) == 1 else [f"x{i}" for i in range(len(inputs))])
    output_names = output_names or ["logits"]
    was_training = model.training
    saved = {name: b.detach().clone() for name, b in model.named_buffers()}
    model.train()
    detach = torch.Tensor.detach
    torch.Tensor.detach = lambda self: _StopGradient.apply(self)
    try:
        torch.onnx.export(model, args, path, opset_version=opset, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, input_names=input_names, output_names=output_names,
                          dynamic_axes={name: {0: "N"} for name in input_names + output_names},
                          custom_opsets={"psrun": 1})
    finally:
        torch.Tensor.detach = detach
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
