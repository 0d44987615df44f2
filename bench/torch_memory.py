#!/usr/bin/python3
"""PyTorch's peak training memory for a module: one of bench/networks.py's or
bench/more_networks.py's, or mnist_deep (bench/pytorch_mnist_deep.py's MnistDeep), to set beside `psrun model show`'s training memory
(docs/benchmarks.md "Training memory").

    torch_memory.py NAME [--batch 128] [--threads 2] [--rounds 3]

What it measures: the rise of the process's peak resident set (VmHWM, reset through
/proc/self/clear_refs) over one training step's forward and backward (softmax cross-entropy on
random images or token ids and labels), above the resident set before it. The parameters, their gradients
(allocated by two warm-up steps and zeroed in place) and the batch exist before, so the rise is
the activations, their gradients, temporaries and the libraries' scratch. glibc's malloc keeps
freed blocks for reuse unless told otherwise, which would hide a step's allocations: the script
runs itself again with MALLOC_MMAP_THRESHOLD_=65536 so that every block of 64 KiB or more comes
from, and goes back to, the system. One JSON line: the median and largest rise over the rounds,
per step and per example.
"""
import argparse
import gc
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(field + " not in /proc/self/status")


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def build(name, batch):
    """The module and one batch of its input."""
    sys.path.insert(0, HERE)
    import torch
    torch.manual_seed(0)
    images = torch.rand(batch, 1, 28, 28)
    if name == "mnist_deep":
        from pytorch_mnist_deep import MnistDeep
        return MnistDeep(), images
    import networks
    if name in networks.NETWORKS and name != "embedding_bag":
        return networks.build(name), images
    import more_networks
    if name in more_networks.NETWORKS:
        shape = (batch,) + tuple(more_networks.example_input(name).shape[1:])
        tokens = more_networks.NETWORKS[name][1] == "mnist-tokens"
        x = torch.randint(1, 784, shape, dtype=torch.int64) if tokens else torch.rand(shape)
        return more_networks.build(name), x
    raise SystemExit("torch_memory.py: unknown network " + name +
                     " (mnist_deep, an image network of networks.py or one of more_networks.py)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if a.batch < 1 or a.threads < 1 or a.rounds < 1:
        print("torch_memory.py: --batch, --threads and --rounds must be >= 1", file=sys.stderr)
        sys.exit(2)
    if os.environ.get("MALLOC_MMAP_THRESHOLD_") != "65536":
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    import torch
    torch.set_num_threads(a.threads)
    model, x = build(a.name, a.batch)
    model.train()
    y = torch.randint(0, 10, (a.batch,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        loss = loss_fn(model(x), y)
        loss.backward()

    for _ in range(2):
        step()
    rises = []
    for _ in range(a.rounds):
        for p in model.parameters():
            p.grad.zero_()
        gc.collect()
        before = status_kib("VmRSS")
        reset_peak()
        step()
        rises.append((status_kib("VmHWM") - before) * 1024)
    median = statistics.median(rises)
    print(json.dumps({"network": a.name, "batch": a.batch, "threads": a.threads, "torch": torch.__version__,
                      "method": "VmHWM rise over one forward+backward, MALLOC_MMAP_THRESHOLD_=65536",
                      "peak_rise_bytes_median": median, "peak_rise_bytes_max": max(rises),
                      "bytes_per_example_median": median / a.batch}))


if __name__ == "__main__":
    main()
