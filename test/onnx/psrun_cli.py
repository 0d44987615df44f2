"""The psrun commands the Python ONNX tests run (eltwise_models.py, norm_models_v2.py,
einsum_models.py, frozen_models.py): a command with its output captured, training through psd,
and `psrun predict` on a NumPy batch."""
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import networks  # noqa: E402  (read_idx, idx_file)


def mnist_dir(args):
    """`--data DIR` among a test's arguments, else psrun's MNIST cache (where `psrun data fetch`
    puts it)."""
    if "--data" in args:
        return args[args.index("--data") + 1]
    cache = os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache"))
    return os.path.join(cache, "psrun", "data", "mnist")


def mnist_test_set(args, count):
    """MNIST's first `count` test images, float32 [count, 1, 28, 28] in [0, 1], and their labels
    (int64 [count]), from mnist_dir(args)."""
    data = mnist_dir(args)
    images = networks.read_idx(networks.idx_file(data, "t10k-images-idx3-ubyte"))[:count]
    labels = networks.read_idx(networks.idx_file(data, "t10k-labels-idx1-ubyte"))[:count]
    return (images.astype(np.float32) / 255.0).reshape(len(images), 1, 28, 28), labels.astype(np.int64)


# Tests run two at a time on two cores (test/run.sh), and libgomp's default spins at every
# OpenMP barrier: a psrun thread whose partner was preempted burns its core. onnx_token_models
# took 218 s beside onnx_torchvision instead of 5 s alone (2026-12-05); with threads that sleep,
# 9.7 s. These commands compute one batch and time nothing, so they run with sleeping threads
# (the variable as the caller set it wins). Only here: a CI run with it set for every test saw
# the sparse-table tests (psd clusters) pass their 300 s timeouts.
PASSIVE = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"))


def run(cmd, timeout=120):
    """Runs cmd (a list), stdout and stderr together as text; raises on a timeout."""
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                          env=PASSIVE)


def predict(psrun, onnx_path, x, work, tag):
    """`psrun predict --onnx` on the float batch x: (probabilities, "") or (None, the log's tail)."""
    inp, out = os.path.join(work, f"{tag}.x.npy"), os.path.join(work, f"{tag}.p.npy")
    np.save(inp, x.astype(np.float32))
    r = run([psrun, "predict", "--onnx", onnx_path, "--images", inp, "--output", out])
    if r.returncode != 0:
        return None, r.stdout[-2000:]
    return np.load(out), ""


def train_through_psd(psrun, model, run_dir, steps, extra=(), timeout=600):
    """`psrun local --ps 1 --workers 2` training the ONNX file `model` into run_dir for `steps`
    steps (batch 64, Adam 2e-3, f32, one thread per worker) with `extra` training options; the
    completed process (stdout and stderr together). Threads wait as the caller's environment says
    (this times nothing, but a run of many steps is where passive waits would cost most)."""
    args = [psrun, "local", "--ps", "1", "--workers", "2", "--grace", "30", "--", "--model", model, "--model-dir",
            run_dir, "--steps", str(steps), "--batch-size", "64", "--optimizer", "adam", "--learning-rate", "2e-3",
            "--precision", "f32", "--threads", "1", "--log-every", "100", *extra]
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


def predict_model_dir(psrun, run_dir, images, output):
    """`psrun predict --model-dir` on the .npy batch `images` into `output`: the completed process."""
    return run([psrun, "predict", "--model-dir", run_dir, "--images", images, "--output", output])
