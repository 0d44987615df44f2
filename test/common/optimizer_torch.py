#!/usr/bin/python3
"""psrun's optimizers against torch.optim on the same gradients (issue 35), and lamb against a numpy LAMB.

Three tensors, a rank-2 weight [6, 5], a rank-1 bias [5] and a rank-4 conv weight [2, 3, 2, 2], start
from fixed pseudo-random values and take 20 updates of fixed pseudo-random gradients (numpy
RandomState, float32) in torch.optim (SGD with momentum, SGD with nesterov=True, Adam, AdamW;
weight decay in param groups: only the rank >= 2 tensors, or every tensor for "all"; default and
non-default momentum, betas and epsilon) and in psrun's Optimizer through the optimizer_replay tool. Every final value must agree within
|psrun - torch| <= 2e-5 * max(1, |torch|); prints the worst difference per case and exits 1 on a
mismatch. torch.optim has no LAMB: --optimizer lamb is checked against lamb_reference() below, a
numpy LAMB in float64 written from the formula (You et al. 2019, Algorithm 2, bias-corrected, trust
ratio ||p|| / ||r|| per tensor, 1 where a norm is 0: common/lamb.h), with the same tolerance.
Without torch the torch cases are skipped (said so) and the lamb cases still run; 77 (skipped)
without numpy.

Usage: optimizer_torch.py OPTIMIZER_REPLAY
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy missing: skipped")
    sys.exit(77)
try:
    import torch
except ImportError:
    torch = None

SHAPES = [(6, 5), (5,), (2, 3, 2, 2)]
STEPS = 20
TOLERANCE = 2e-5

# (psrun kind, learning rate, momentum, weight decay, weight_decay_on, torch optimizer factory, beta1, beta2, epsilon).
# The hyperparameters after the factory are torch's defaults unless a case gives them.
DEFAULT_BETAS = (0.9, 0.999, 1e-8)
CASES = [
    ("sgd", 0.05, 0.0, 0.01, "matrices", lambda groups, lr: torch.optim.SGD(groups, lr=lr)),
    ("momentum", 0.05, 0.9, 5e-4, "matrices", lambda groups, lr: torch.optim.SGD(groups, lr=lr, momentum=0.9)),
    ("nesterov", 0.05, 0.9, 5e-4, "matrices",
     lambda groups, lr: torch.optim.SGD(groups, lr=lr, momentum=0.9, nesterov=True)),
    ("nesterov", 0.05, 0.9, 0.01, "all", lambda groups, lr: torch.optim.SGD(groups, lr=lr, momentum=0.9, nesterov=True)),
    ("adam_torch", 0.01, 0.0, 0.0, "matrices", lambda groups, lr: torch.optim.Adam(groups, lr=lr)),
    ("adam_torch", 0.01, 0.0, 0.05, "matrices", lambda groups, lr: torch.optim.Adam(groups, lr=lr)),
    ("adamw", 0.01, 0.0, 0.1, "matrices", lambda groups, lr: torch.optim.AdamW(groups, lr=lr)),
    ("adamw", 0.01, 0.0, 0.1, "all", lambda groups, lr: torch.optim.AdamW(groups, lr=lr)),
    # --momentum, --beta1, --beta2, --epsilon (issue 35): values other than the defaults.
    ("momentum", 0.05, 0.8, 0.0, "matrices", lambda groups, lr: torch.optim.SGD(groups, lr=lr, momentum=0.8)),
    ("nesterov", 0.05, 0.5, 5e-4, "matrices",
     lambda groups, lr: torch.optim.SGD(groups, lr=lr, momentum=0.5, nesterov=True)),
    ("adamw", 0.05, 0.0, 0.1, "matrices",
     lambda groups, lr: torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-6), 0.9, 0.95, 1e-6),
    ("adam_torch", 0.01, 0.0, 0.0, "matrices",
     lambda groups, lr: torch.optim.Adam(groups, lr=lr, betas=(0.8, 0.9), eps=1e-3), 0.8, 0.9, 1e-3),
]


def data(seed):
    rng = np.random.RandomState(seed)
    init = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [[(rng.standard_normal(s) * 0.5).astype(np.float32) for s in SHAPES] for _ in range(STEPS)]
    return init, grads


# --param-group (issue 35): (kind, learning rate, momentum, weight decay, weight_decay_on, groups, torch
# factory, per tensor t0 [6,5], t1 [5], t2 [2,3,2,2]: (learning rate, weight decay) as torch's groups get them).
GROUP_CASES = [
    ("adamw", 0.01, 0.0, 0.1, "matrices", ["t1:lr_mult=0.5", "t2:lr_mult=2,weight_decay=0"],
     lambda groups, lr: torch.optim.AdamW(groups, lr=lr), [(0.01, 0.1), (0.005, 0.0), (0.02, 0.0)]),
    ("nesterov", 0.05, 0.9, 5e-4, "matrices", ["t1:weight_decay=0.01", "t*:lr_mult=0.1"],
     lambda groups, lr: torch.optim.SGD(groups, lr=lr, momentum=0.9, nesterov=True),
     [(0.005, 5e-4), (0.05, 0.01), (0.005, 5e-4)]),
    ("adam_torch", 0.01, 0.0, 0.0, "matrices", ["t0:lr_mult=0"],  # a frozen tensor
     lambda groups, lr: torch.optim.Adam(groups, lr=lr), [(0.0, 0.0), (0.01, 0.0), (0.01, 0.0)]),
]


# lamb against the numpy reference: (learning rate, weight decay, weight_decay_on, (beta1, beta2, epsilon),
# --param-group values, per tensor (learning rate, weight decay) or None: from the decay and its rank).
LAMB_CASES = [
    (0.01, 0.0, "matrices", DEFAULT_BETAS, [], None),
    (0.01, 0.01, "matrices", DEFAULT_BETAS, [], None),
    (0.02, 0.1, "all", DEFAULT_BETAS, [], None),
    (0.01, 0.01, "matrices", (0.9, 0.95, 1e-6), [], None),
    (0.01, 0.01, "matrices", DEFAULT_BETAS, ["t1:lr_mult=0.5", "t2:lr_mult=2,weight_decay=0"],
     [(0.01, 0.01), (0.005, 0.0), (0.02, 0.0)]),
]


def lamb_reference(init, grads, per_tensor, betas, whole=False):
    """LAMB in float64: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; r = m_hat / (sqrt(v_hat) + eps) + wd p;
    p -= lr * (||p|| / ||r|| if both > 0 else 1) * r, per tensor (whole: the tensors as one)."""
    beta1, beta2, eps = betas
    params = [v.astype(np.float64).ravel() for v in init]
    steps = [[g.astype(np.float64).ravel() for g in step] for step in grads]
    if whole:
        params, steps, per_tensor = [np.concatenate(params)], [[np.concatenate(s)] for s in steps], per_tensor[:1]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, step in enumerate(steps, 1):
        for i, (p, g) in enumerate(zip(params, step)):
            lr, wd = per_tensor[i]
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            r = (m[i] / (1 - beta1 ** t)) / (np.sqrt(v[i]) / np.sqrt(1 - beta2 ** t) + eps) + wd * p
            p_norm, r_norm = np.linalg.norm(p), np.linalg.norm(r)
            trust = p_norm / r_norm if p_norm > 0 and r_norm > 0 else 1.0
            params[i] = p - lr * trust * r
    return np.concatenate(params)


def run_lamb_cases(tool, tmp):
    failed = 0
    for i, (lr, wd, on, betas, groups, per_tensor) in enumerate(LAMB_CASES):
        init, grads = data(300 + i)
        if per_tensor is None:
            per_tensor = [(lr, wd if (on == "all" or len(s) >= 2) else 0.0) for s in SHAPES]
        want = lamb_reference(init, grads, per_tensor, betas)
        got = run_psrun(tool, "lamb", lr, 0.0, betas, wd, on, init, grads, tmp, groups)
        start = np.concatenate([v.ravel() for v in init]).astype(np.float64)
        err = np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want))) if got.shape == want.shape else np.inf
        moved = np.max(np.abs(want - start))
        # Each knob must matter, or the case would not test it: the decay, the betas, the groups, and
        # the trust ratio being per tensor (one ratio over all three tensors lands elsewhere).
        effects = {"one ratio for all tensors": np.max(np.abs(
            lamb_reference(init, grads, [(lr, wd if on == "all" else 0.0)], betas, whole=True) - want))}
        if wd > 0:
            effects["no decay"] = np.max(np.abs(lamb_reference(init, grads, [(l, 0.0) for l, _ in per_tensor], betas) - want))
        if betas != DEFAULT_BETAS:
            effects["default betas"] = np.max(np.abs(lamb_reference(init, grads, per_tensor, DEFAULT_BETAS) - want))
        if groups:
            plain = [(lr, wd if (on == "all" or len(s) >= 2) else 0.0) for s in SHAPES]
            effects["no groups"] = np.max(np.abs(lamb_reference(init, grads, plain, betas) - want))
        ok = err <= TOLERANCE and moved > 1e-3 and all(e > 100 * TOLERANCE for e in effects.values())
        failed += not ok
        hyper = f" betas={betas[0]},{betas[1]} eps={betas[2]}" if betas != DEFAULT_BETAS else ""
        hyper += f" groups {' '.join(groups)}" if groups else ""
        print(f"{'ok  ' if ok else 'FAIL'} {'lamb':10s} lr={lr} wd={wd} on={on}{hyper}: worst relative difference "
              f"{err:.2e} against numpy (parameters moved up to {moved:.3f}; " +
              ", ".join(f"{k} off by {e:.2e}" for k, e in effects.items()) + ")")
    return failed


def run_torch_groups(factory, per_tensor, init, grads):
    params = [torch.nn.Parameter(torch.from_numpy(v.copy())) for v in init]
    opt = factory([{"params": [p], "lr": lr, "weight_decay": wd} for p, (lr, wd) in zip(params, per_tensor)], 1.0)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = torch.from_numpy(g.copy())
        opt.step()
    return np.concatenate([p.detach().numpy().ravel() for p in params])


def run_torch(factory, lr, wd, on, init, grads):
    params = [torch.nn.Parameter(torch.from_numpy(v.copy())) for v in init]
    groups = [{"params": [p], "weight_decay": wd if (on == "all" or p.dim() >= 2) else 0.0} for p in params]
    opt = factory(groups, lr)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = torch.from_numpy(g.copy())
        opt.step()
    return np.concatenate([p.detach().numpy().ravel() for p in params])


def run_psrun(tool, kind, lr, momentum, betas, wd, on, init, grads, tmp, groups=()):
    path = os.path.join(tmp, "replay.txt")
    beta1, beta2, eps = betas
    with open(path, "w") as f:
        f.write(f"{kind} {lr!r} {momentum!r} {beta1!r} {beta2!r} {eps!r} {wd!r} {on} {STEPS} {len(SHAPES)}\n")
        for s in SHAPES:
            f.write(f"{len(s)} {' '.join(map(str, s))}\n")
        for v in init:
            f.write(" ".join(repr(float(x)) for x in v.ravel()) + "\n")
        for step in grads:
            for g in step:
                f.write(" ".join(repr(float(x)) for x in g.ravel()) + "\n")
    out = subprocess.run([tool, path, *groups], check=True, capture_output=True, text=True, timeout=60).stdout
    return np.array([float(x) for x in out.split()], dtype=np.float64)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        failed += run_lamb_cases(tool, tmp)
        if torch is None:
            print("torch missing: the torch.optim cases are skipped")
            return 1 if failed else 0
        for i, (kind, lr, momentum, wd, on, factory, *betas) in enumerate(CASES):
            betas = tuple(betas) or DEFAULT_BETAS
            init, grads = data(100 + i)
            want = run_torch(factory, lr, wd, on, init, grads).astype(np.float64)
            got = run_psrun(tool, kind, lr, momentum, betas, wd, on, init, grads, tmp)
            start = np.concatenate([v.ravel() for v in init]).astype(np.float64)
            if got.shape != want.shape:
                print(f"FAIL {kind} wd={wd} on={on}: {got.size} values, torch has {want.size}")
                failed += 1
                continue
            err = np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))
            moved = np.max(np.abs(want - start))
            # The decay must matter, or the case would not test it.
            decay_effect = np.max(np.abs(want - run_torch(factory, lr, 0.0, on, init, grads))) if wd > 0 else 1.0
            # Likewise non-default hyperparameters: psrun with the defaults must land elsewhere.
            tuned = (momentum not in (0.0, 0.9)) or betas != DEFAULT_BETAS
            hyper_effect = 1.0
            if tuned:
                plain = run_psrun(tool, kind, lr, 0.9 if momentum else 0.0, DEFAULT_BETAS, wd, on, init, grads, tmp)
                hyper_effect = np.max(np.abs(plain - want))
            ok = (err <= TOLERANCE and moved > 1e-3 and decay_effect > 100 * TOLERANCE and
                  hyper_effect > 100 * TOLERANCE)
            failed += not ok
            hyper = f" momentum={momentum}" if momentum not in (0.0, 0.9) else ""
            hyper += f" betas={betas[0]},{betas[1]} eps={betas[2]}" if betas != DEFAULT_BETAS else ""
            print(f"{'ok  ' if ok else 'FAIL'} {kind:10s} lr={lr} wd={wd} on={on}{hyper}: worst relative difference "
                  f"{err:.2e} (parameters moved up to {moved:.3f}" +
                  (f", the decay changed them up to {decay_effect:.2e}" if wd > 0 else "") +
                  (f", the defaults would be off by {hyper_effect:.2e}" if tuned else "") + ")")
        for i, (kind, lr, momentum, wd, on, groups, factory, per_tensor) in enumerate(GROUP_CASES):
            init, grads = data(200 + i)
            want = run_torch_groups(factory, per_tensor, init, grads).astype(np.float64)
            got = run_psrun(tool, kind, lr, momentum, DEFAULT_BETAS, wd, on, init, grads, tmp, groups)
            err = np.max(np.abs(got - want) / np.maximum(1.0, np.abs(want)))
            # Without the groups psrun must land elsewhere, or the case would not test them.
            plain = run_psrun(tool, kind, lr, momentum, DEFAULT_BETAS, wd, on, init, grads, tmp)
            group_effect = np.max(np.abs(plain - want))
            ok = got.shape == want.shape and err <= TOLERANCE and group_effect > 100 * TOLERANCE
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {kind:10s} lr={lr} wd={wd} on={on} groups {' '.join(groups)}: worst "
                  f"relative difference {err:.2e} (without the groups off by {group_effect:.2e})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
