#!/usr/bin/env python3
"""Reference for the zoo's dls_mlp (docs/models.md "The zoo's accuracy"): the Deep Learning Studio multinode
example's MLP and recipe in PyTorch (784 -> 100 ReLU -> 10, truncated normal 1/28 and 1/sqrt(100) within 2
stddev, zero biases, softmax cross-entropy summed over the batch, Adagrad 0.01 with accumulators from 0.1, batch
100, 10,000 steps), single process; prints the seed and the test accuracy.

    /usr/bin/python3 bench/pytorch_dls_mlp.py SEED
"""
import os
import sys

import torch
import torch.nn.functional as F

from pytorch_time_to_accuracy import load
torch.set_num_threads(2)
seed = int(sys.argv[1]); torch.manual_seed(seed)
data = os.path.expanduser('~/.cache/psrun/data/mnist')
tx, ty = load(data, 'train'); vx, vy = load(data, 't10k')
tx = tx.reshape(-1, 784); vx = vx.reshape(-1, 784)
def tn(shape, std):
    w = torch.empty(shape); torch.nn.init.trunc_normal_(w, std=std, a=-2*std, b=2*std); return w.requires_grad_()
w1 = tn((784, 100), 1/28); b1 = torch.zeros(100, requires_grad=True)
w2 = tn((100, 10), 0.1); b2 = torch.zeros(10, requires_grad=True)
opt = torch.optim.Adagrad([w1, b1, w2, b2], lr=0.01, initial_accumulator_value=0.1)
g = torch.Generator().manual_seed(seed); order = torch.randperm(60000, generator=g); pos = 0
for step in range(10000):
    if pos + 100 > 60000: order = torch.randperm(60000, generator=g); pos = 0
    idx = order[pos:pos+100]; pos += 100
    logits = F.relu(tx[idx] @ w1 + b1) @ w2 + b2
    loss = F.cross_entropy(logits, ty[idx], reduction='sum')
    opt.zero_grad(); loss.backward(); opt.step()
with torch.no_grad():
    acc = ((F.relu(vx @ w1 + b1) @ w2 + b2).argmax(1) == vy).float().mean().item()
print(seed, acc)
