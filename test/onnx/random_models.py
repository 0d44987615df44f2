#!/usr/bin/python3
"""Noise drawn inside the network (workerd/nn/ops/random.cpp), as torch.onnx writes it: a VAE's
reparameterisation z = mu + exp(logvar / 2) * torch.randn_like(mu) (RandomNormalLike), noise
injection and a Bernoulli mask torch.rand_like(h) < p (RandomUniformLike, Less, Cast),
exported in training mode at opsets 13, 14 and 17, batch axis dynamic, through the psrun CLI:
  - with the noise multiplied by 0 the files compute torch's function: `psrun model check`
    gives torch's outputs, loss and every parameter's gradient in float64 within TOLERANCE, and
    psrun predict torch's softmax (torch_compare.check_model);
  - with the noise in: `psrun model check` passes its own central differences (one step's noise
    is the same in every evaluation the check makes), so the gradient through mu and logvar is
    right, and its gradients differ from the noiseless file's (the noise is drawn).

Prints one line per check; exits 1 when one fails, 77 when torch or onnx cannot be imported.
Usage: random_models.py PSRUN [WORK_DIR]
"""
import json
import os
import sys

try:
    import numpy as np
    import torch
    from torch import nn
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from psrun_cli import run  # noqa: E402
from torch_compare import Checks, check_model, export, run_main  # noqa: E402

TOLERANCE = 1e-4
BATCH = 8
check = Checks()


class Vae(nn.Module):
    """x [N, 16] -> mu, logvar [N, 6] -> z = mu + sigma * eps -> 10 classes; noise scales eps."""

    def __init__(self, noise):
        super().__init__()
        self.noise = noise
        self.enc = nn.Linear(16, 12)
        self.dec = nn.Linear(6, 10)

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(mu) * self.noise
        return self.dec(torch.tanh(z))


class NoisyMask(nn.Module):
    """x [N, 16]: a hidden layer with uniform noise injected, then a Bernoulli-style mask
    rand_like(h) < keep (keep 2: always 1, so torch's function is known)."""

    def __init__(self, noise, keep):
        super().__init__()
        self.noise, self.keep = noise, keep
        self.a = nn.Linear(16, 12)
        self.b = nn.Linear(12, 10)

    def forward(self, x):
        h = torch.relu(self.a(x))
        h = h + (torch.rand_like(h) - 0.5) * self.noise
        return self.b(h * (torch.rand_like(h) < self.keep).float())


MODELS = {
    "vae": (lambda noise: Vae(noise), ["random", "exp"]),
    "noisy_mask": (lambda noise: NoisyMask(noise, 2.0 if noise == 0.0 else 0.7), ["random", "less", "cast"]),
}


def with_noise(psrun, name, build, work):
    """The same module with its noise in: psrun's own gradient check, and gradients unlike the
    noiseless file's."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((BATCH, 16)).astype(np.float32)
    y = rng.integers(0, 10, size=BATCH).astype(np.int64)
    xf, yf = os.path.join(work, f"{name}_noisy.x.npy"), os.path.join(work, f"{name}_noisy.y.npy")
    np.save(xf, x)
    np.save(yf, y)
    for opset in (13, 17):
        grads = {}
        for noise in (0.0, 1.0):
            tag = f"{name}_noise{noise:g}_{opset}"
            torch.manual_seed(1)
            path = os.path.join(work, tag + ".onnx")
            export(build(noise).train(), torch.from_numpy(x), path, opset)
            out = os.path.join(work, tag + ".grads.json")
            r = run([psrun, "model", "check", path, "--input", xf, "--labels", yf, "--gradients", out, "--json"], 300)
            if noise == 1.0:
                check(f"{tag}: psrun model check passes its central differences with the noise drawn",
                      r.returncode == 0, r.stdout[-1500:])
            if r.returncode == 0 and os.path.exists(out):
                grads[noise] = json.load(open(out))
        if len(grads) == 2:
            def flat(g):
                return np.concatenate([np.ravel(np.asarray(g["tensors"][k]["gradient"], dtype=np.float64))
                                       for k in sorted(g["tensors"])])
            a, b = flat(grads[0.0]), flat(grads[1.0])
            distance = float(np.linalg.norm(a - b) / max(np.linalg.norm(a), 1e-30)) if a.shape == b.shape else 1.0
            check(f"{name}_{opset}: the noise changes the gradients", distance > 1e-3, f"relative distance {distance:.2e}",
                  True)


def main():
    def body(psrun, work):
        for name, (build, kinds) in MODELS.items():
            check_model(check, psrun, name, lambda: build(0.0), (16,), kinds, work, batch=BATCH, seed=5)
            with_noise(psrun, name, build, work)
    run_main(__doc__, body)
    check.finish()


if __name__ == "__main__":
    main()
