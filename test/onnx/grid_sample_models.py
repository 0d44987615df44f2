#!/usr/bin/python3
"""F.grid_sample as a flow-warping network writes it (a base grid buffer plus a learned offset
field, GridSample at opsets 16 and 17), in every mode psrun has (bilinear, nearest) x padding
(zeros, border, reflection) x align_corners, end to end through the psrun CLI with
test/onnx/torch_compare.py: psrun model check's outputs, loss and every parameter gradient
(through the image and through the grid) against torch in float64, and psrun predict against
torch's softmax. The base grid spans [-1.2, 1.2], so points fall outside the image.

Prints one line per check; exits 1 when one fails, 77 when torch or onnx cannot be imported.
Usage: grid_sample_models.py PSRUN [WORK_DIR]
"""
import os
import sys
import tempfile

try:
    import torch
    from torch import nn
    from torch.nn import functional as F
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_compare import Checks, check_model  # noqa: E402


class Warp(nn.Module):
    """x [N, 3, 6, 6]: features (conv 3 -> 4) sampled at base + 0.5 tanh(conv 3 -> 2), a linear head."""

    def __init__(self, mode, padding, align):
        super().__init__()
        self.mode, self.padding, self.align = mode, padding, align
        self.feat, self.flow = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(3, 2, 3, padding=1)
        self.head = nn.Linear(4 * 36, 10)
        ys, xs = torch.meshgrid(torch.linspace(-1.2, 1.2, 6), torch.linspace(-1.2, 1.2, 6), indexing="ij")
        self.register_buffer("base", torch.stack([xs, ys], -1)[None])

    def forward(self, x):
        grid = self.base + 0.5 * torch.tanh(self.flow(x)).permute(0, 2, 3, 1)
        sampled = F.grid_sample(self.feat(x), grid, mode=self.mode, padding_mode=self.padding,
                                align_corners=self.align)
        return self.head(sampled.flatten(1))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    check = Checks()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = sys.argv[2] if len(sys.argv) == 3 else tmp
        os.makedirs(work, exist_ok=True)
        for mode in ("bilinear", "nearest"):
            for padding in ("zeros", "border", "reflection"):
                for align in (False, True):
                    # psrun model check's own central differences cross pixel edges: a coarse bound.
                    check_model(check, psrun, f"grid_sample_{mode}_{padding}_{int(align)}",
                                lambda: Warp(mode, padding, align), (3, 6, 6), ["grid_sample"], work, batch=6,
                                seed=5, opsets=(16, 17), check_tolerance=0.2)
    check.finish()


if __name__ == "__main__":
    main()
