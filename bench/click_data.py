#!/usr/bin/python3
"""Generated click logs for sparse-table runs (docs/sparse.md).

Each example has F categorical fields; field f's value is a Zipf-distributed rank hashed into one
shared id space of V rows (id = (f * 2654435761 + rank * 40503) mod V, so the fields share the
table as click models' hashed features do). The click is drawn from a planted logistic model:
p = sigmoid(bias + sum_f w[id_f]) with w[id] ~ N(0, scale^2) drawn per id from a seeded hash, so
the best reachable AUC on the test set is that of p itself, which this script prints.

Writes DIR/{train,test}_{x,y}.npy: x int64 (N, F) ids, y float32 (N, 1) clicks, and
DIR/planted.json {"auc": best test AUC, "ctr": click rate, "distinct": ids seen in training}, and
DIR/click.json, the model psrun trains on them: one shared embedding table "emb" [V, dim] looked
up by all F fields, flattened, a dense ReLU layer of --hidden units, one logit, binary
cross-entropy (sigmoid_cross_entropy).

Usage: click_data.py DIR --rows V [--fields 26] [--train 100000] [--test 20000]
                     [--zipf 1.1] [--scale 0.6] [--seed 1] [--dim 16] [--hidden 64]
"""
import argparse
import json
import os

import numpy as np

from roc_auc import auc  # bench/roc_auc.py, beside this script


def weights(ids, scale, seed):
    """w[id] ~ N(0, scale^2), a pure function of (seed, id): no V-sized array."""
    x = (ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x ^= x >> np.uint64(31)
    x = (x * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    x ^= x >> np.uint64(29)
    u1 = ((x >> np.uint64(40)).astype(np.float64) + 0.5) / 2.0**24
    u2 = (((x >> np.uint64(16)) & np.uint64(0xFFFFFF)).astype(np.float64) + 0.5) / 2.0**24
    return scale * np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)


def draw(rng, n, fields, rows, zipf, scale, seed, bias):
    ranks = rng.zipf(zipf, size=(n, fields)).astype(np.uint64)
    f = np.arange(fields, dtype=np.uint64)[None, :]
    ids = ((f * np.uint64(2654435761) + ranks * np.uint64(40503)) % np.uint64(rows)).astype(np.int64)
    logit = bias + weights(ids, scale, seed).sum(axis=1)
    p = 1 / (1 + np.exp(-logit))
    y = (rng.random(n) < p).astype(np.float32)
    return ids, y.reshape(n, 1), p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--fields", type=int, default=26)
    ap.add_argument("--train", type=int, default=100000)
    ap.add_argument("--test", type=int, default=20000)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--scale", type=float, default=0.6)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=64)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    bias = -1.0
    x, y, _ = draw(rng, a.train, a.fields, a.rows, a.zipf, a.scale, a.seed, bias)
    tx, ty, tp = draw(rng, a.test, a.fields, a.rows, a.zipf, a.scale, a.seed, bias)
    np.save(os.path.join(a.dir, "train_x.npy"), x)
    np.save(os.path.join(a.dir, "train_y.npy"), y)
    np.save(os.path.join(a.dir, "test_x.npy"), tx)
    np.save(os.path.join(a.dir, "test_y.npy"), ty)
    info = {"auc": auc(tp, ty[:, 0]), "ctr": float(y.mean()), "distinct": int(len(np.unique(x)))}
    with open(os.path.join(a.dir, "planted.json"), "w") as out:
        json.dump(info, out)
    model = {
        "name": "click",
        "description": f"click prediction: {a.fields} hashed fields, one shared [{a.rows}, {a.dim}] table",
        "input": {"shape": [a.fields], "type": "int"},
        "targets": 1,
        "layers": [
            {"kind": "embedding", "name": "emb", "vocabulary": a.rows, "dim": a.dim,
             "init": {"kind": "normal", "stddev": 0.05}},
            {"kind": "flatten", "axis": 1},
            {"kind": "dense", "name": "fc1", "units": a.hidden},
            {"kind": "relu"},
            {"kind": "dense", "name": "out", "units": 1},
        ],
        "loss": {"kind": "sigmoid_cross_entropy", "reduction": "mean"},
    }
    with open(os.path.join(a.dir, "click.json"), "w") as out:
        json.dump(model, out, indent=1)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
