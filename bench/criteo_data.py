#!/usr/bin/python3
"""Criteo-shaped click data with a planted model, and the DLRM psrun trains on it (docs/sparse.md "DLRM").

Each example has 13 dense features and 26 categorical fields, as the Criteo display-ads logs do:
  - dense: heavy-tailed counts (floor of a log-normal, a third of them 0), written as they are (as
    Criteo's I1..I13); the models take log(1 + count) in their graph, the transform DLRM's Criteo
    pipeline applies, so the CSV form trains unchanged;
  - categorical: field f has a cardinality C_f taken from the Criteo Kaggle set's (1460, 583,
    10,131,227, ..., scaled by --card-scale, at least 3); a value is a Zipf(--zipf) rank r < C_f,
    and its raw id is a 64-bit number, splitmix64(f, r), so ids arrive without a vocabulary.
  - the click: p = sigmoid(bias + w . dense + sum_f a_f[id_f] + sum_{(f,g) in P} <u_f[id_f], u_g[id_g]>),
    with per-id weights a and 4-dim factors u drawn from a seeded hash of (seed, field, rank) (no
    C_f-sized arrays), P a fixed set of 20 field pairs: a wide part and a factorised interaction a
    DLRM can learn. The best reachable test AUC is that of p itself (planted.json "auc").

A model table of V_f rows per field (V_f = min(C_f, --max-rows)) gets id_f mod V_f: hash buckets, as
TF's categorical_column_with_hash_bucket gives, the form psrun's tables take today.

Writes to DIR:
  {train,test}_dense.npy  float32 [N, 13]   the counts; the model's primary input
  {train,test}_c<f>.npy   int64 [N, 1]      field f's id mod V_f, f = 0..25; the inputs c0..c25
  {train,test}_y.npy      float32 [N, 1]    clicks
  {train,test}_raw.npy    uint64 [N, 26]    the raw 64-bit ids
  planted.json            {"auc", "ctr", "rows": [V_f], "cardinality": [C_f], "distinct": [train ids per field]}
  dlrm.json               the DLRM (bottom MLP 13-512-256-D, per-field embeddings [V_f, D], dot
                          interaction of the 27 vectors' 351 pairs, top MLP 512-256-1, sigmoid BCE;
                          --bottom and --top set the MLPs' hidden widths)
  dcn.json                DCN-v2: x0 = [dense, the 26 embeddings], 3 cross layers, the top MLP
  wdl.json                wide & deep: per-field tables of D + 1 columns (the last one the wide
                          weight), wide sum + linear dense + the top MLP over [dense, embeddings]
  with --csv also {train,test}.csv: label, I1..I13 (the counts), C1..C26 (Criteo's 8-hex-digit
  form of each raw id's low 32 bits; empty for a missing value, --missing of them).

Usage: criteo_data.py DIR [--train 100000] [--test 20000] [--card-scale 1.0] [--max-rows 1000000]
                      [--zipf 1.2] [--dim 16] [--seed 1] [--csv] [--missing 0.0]
                      [--bottom 512,256] [--top 512,256]
"""
import argparse
import json
import os

import numpy as np

from roc_auc import auc  # bench/roc_auc.py, beside this script

# Cardinalities of the 26 categorical fields of Criteo's Kaggle display-ads set.
CRITEO_CARDINALITY = [1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194, 27,
                      14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572]
DENSE = 13
FIELDS = 26
FACTOR = 4
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix(x):
    """splitmix64's finaliser, elementwise over uint64."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def raw_ids(field, ranks):
    with np.errstate(over="ignore"):
        return mix(ranks.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(field + 1) * np.uint64(0xD1B54A32D192ED03))


def normals(keys, salt):
    """N(0, 1) per key, a pure function of (key, salt)."""
    with np.errstate(over="ignore"):
        x = mix(keys ^ mix(np.full_like(keys, salt, dtype=np.uint64)))
    u1 = ((x >> np.uint64(40)).astype(np.float64) + 0.5) / 2.0**24
    u2 = (((x >> np.uint64(16)) & np.uint64(0xFFFFFF)).astype(np.float64) + 0.5) / 2.0**24
    return np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)


class Planted:
    def __init__(self, seed, cards, zipf):
        rng = np.random.default_rng(seed + 1000)
        self.seed, self.cards, self.zipf = seed, cards, zipf
        self.w_dense = rng.normal(0, 0.25, DENSE)
        self.pairs = []
        while len(self.pairs) < 20:
            f, g = sorted(rng.choice(FIELDS, 2, replace=False).tolist())
            if (f, g) not in self.pairs:
                self.pairs.append((f, g))
        self.bias = -1.6

    def draw(self, rng, n):
        counts = np.floor(rng.lognormal(1.0, 1.6, size=(n, DENSE)))
        counts[rng.random((n, DENSE)) < 0.33] = 0
        dense = np.log1p(counts)
        ranks = np.empty((n, FIELDS), dtype=np.int64)
        for f, c in enumerate(self.cards):
            r = rng.zipf(self.zipf, size=n) - 1
            bad = r >= c
            while bad.any():  # truncated Zipf: redraw ranks beyond the field's cardinality
                r[bad] = rng.zipf(self.zipf, size=int(bad.sum())) - 1
                bad = r >= c
            ranks[:, f] = r
        raw = np.stack([raw_ids(f, ranks[:, f]) for f in range(FIELDS)], axis=1)
        logit = self.bias + (dense - dense.mean()) @ self.w_dense * 0.5
        for f in range(FIELDS):
            logit += 0.35 * normals(raw[:, f], self.seed * 7 + 1)
        for f, g in self.pairs:
            uf = np.stack([normals(raw[:, f], self.seed * 7 + 2 + k) for k in range(FACTOR)], axis=1)
            ug = np.stack([normals(raw[:, g], self.seed * 7 + 2 + k) for k in range(FACTOR)], axis=1)
            logit += 0.12 * (uf * ug).sum(axis=1)
        p = 1 / (1 + np.exp(-logit))
        y = (rng.random(n) < p).astype(np.float32)
        return counts, dense, raw, y.reshape(n, 1), p


def dlrm_model(rows, dim, bottom, top):
    inputs = [{"name": "dense", "dims": [DENSE], "type": "float"}]
    inputs += [{"name": f"c{f}", "dims": [1], "type": "int"} for f in range(FIELDS)]
    layers = log_counts()
    for i, units in enumerate(bottom + [dim]):
        layers.append({"kind": "dense", "name": f"bot{i + 1}", "units": units} | ({"inputs": ["dense_log"]} if i == 0 else {}))
        layers.append({"kind": "relu", "name": "bot_out" if i == len(bottom) else f"bot{i + 1}_relu"})
    layers.append({"kind": "unsqueeze", "name": "bot_vec", "inputs": ["bot_out"], "axes": [1]})
    for f in range(FIELDS):
        layers.append({"kind": "embedding", "name": f"emb{f}", "inputs": [f"c{f}"], "vocabulary": rows[f], "dim": dim,
                       "init": {"kind": "uniform", "limit": (1 / rows[f]) ** 0.5}})
    vectors = 1 + FIELDS
    tri = [i * vectors + j for i in range(vectors) for j in range(i)]
    layers += [
        {"kind": "concat", "name": "vecs", "inputs": ["bot_vec"] + [f"emb{f}" for f in range(FIELDS)], "axis": 1},
        {"kind": "transpose", "name": "vecs_t", "inputs": ["vecs"], "perm": [0, 2, 1]},
        {"kind": "matmul", "name": "dots", "inputs": ["vecs", "vecs_t"]},
        {"kind": "flatten", "name": "dots_flat", "axis": 1},
        {"kind": "gather", "name": "pairs", "axis": 1, "indices": tri},
        {"kind": "concat", "name": "top_in", "inputs": ["bot_out", "pairs"], "axis": 1},
    ]
    for i, units in enumerate(top):
        layers += [{"kind": "dense", "name": f"top{i + 1}", "units": units}, {"kind": "relu", "name": f"top{i + 1}_relu"}]
    layers.append({"kind": "dense", "name": "out", "units": 1})
    return {
        "name": "dlrm",
        "description": f"DLRM: 13 dense features, {FIELDS} per-field tables of {dim}, dot interaction",
        "inputs": inputs,
        "targets": 1,
        "layers": layers,
        "loss": {"kind": "sigmoid_cross_entropy", "reduction": "mean"},
    }


def field_tables(rows, dim, name="emb"):
    return [{"kind": "embedding", "name": f"{name}{f}", "inputs": [f"c{f}"], "vocabulary": rows[f], "dim": dim,
             "init": {"kind": "uniform", "limit": (1 / rows[f]) ** 0.5}} for f in range(FIELDS)]


def mlp(prefix, widths):
    layers = []
    for i, units in enumerate(widths):
        layers += [{"kind": "dense", "name": f"{prefix}{i + 1}", "units": units},
                   {"kind": "relu", "name": f"{prefix}{i + 1}_relu"}]
    return layers


def log_counts():
    """log(1 + count) of the dense input, as the value "dense_log" (the graph's own transform)."""
    return [{"kind": "constant", "name": "one", "shape": [], "values": [1.0]},
            {"kind": "add", "name": "dense_p1", "inputs": ["dense", "one"]},
            {"kind": "log", "name": "dense_log"}]


def inputs_list():
    return [{"name": "dense", "dims": [DENSE], "type": "float"}] + [{"name": f"c{f}", "dims": [1], "type": "int"}
                                                                    for f in range(FIELDS)]


def dcn_model(rows, dim, top, cross=3):
    """DCN-v2 (Wang et al. 2021), stacked: x0 = [dense, the 26 embeddings], cross layers
    x_{l+1} = x0 * (W_l x_l + b_l) + x_l, then the MLP to one logit."""
    layers = log_counts() + field_tables(rows, dim) + [
        {"kind": "concat", "name": "embs", "inputs": [f"emb{f}" for f in range(FIELDS)], "axis": 1},
        {"kind": "flatten", "name": "embs_flat", "axis": 1},
        {"kind": "concat", "name": "x0", "inputs": ["dense_log", "embs_flat"], "axis": 1},
    ]
    width, prev = DENSE + FIELDS * dim, "x0"
    for i in range(cross):
        layers += [{"kind": "dense", "name": f"cross{i + 1}", "inputs": [prev], "units": width},
                   {"kind": "mul", "name": f"cross{i + 1}_gate", "inputs": ["x0", f"cross{i + 1}"]},
                   {"kind": "add", "name": f"x{i + 1}", "inputs": [f"cross{i + 1}_gate", prev]}]
        prev = f"x{i + 1}"
    layers += mlp("top", top) + [{"kind": "dense", "name": "out", "units": 1}]
    return {"name": "dcn_v2", "description": f"DCN-v2: {cross} cross layers over 13 dense + {FIELDS} tables of {dim}",
            "inputs": inputs_list(), "targets": 1, "layers": layers,
            "loss": {"kind": "sigmoid_cross_entropy", "reduction": "mean"}}


def wdl_model(rows, dim, top):
    """Wide & deep (Cheng et al. 2016): each field's table has dim + 1 columns, the last its wide
    (linear) weight, the rest its deep embedding (one table per field, as psd's sparse tables want
    one reader per id input); logit = sum of the wide weights + a linear term of the dense features
    + the deep MLP over [dense, embeddings]."""
    layers = log_counts() + field_tables(rows, dim + 1) + [
        {"kind": "concat", "name": "embs", "inputs": [f"emb{f}" for f in range(FIELDS)], "axis": 1},
        {"kind": "slice", "name": "wide_w", "inputs": ["embs"], "axes": [2], "starts": [dim], "ends": [dim + 1]},
        {"kind": "flatten", "name": "wide_flat", "axis": 1},
        {"kind": "reduce_sum", "name": "wide_sparse", "axes": [1], "keepdims": True},
        {"kind": "dense", "name": "wide_dense", "inputs": ["dense_log"], "units": 1},
        {"kind": "slice", "name": "deep_e", "inputs": ["embs"], "axes": [2], "starts": [0], "ends": [dim]},
        {"kind": "flatten", "name": "deep_flat", "axis": 1},
        {"kind": "concat", "name": "deep_in", "inputs": ["dense_log", "deep_flat"], "axis": 1},
    ] + mlp("top", top) + [
        {"kind": "dense", "name": "deep_out", "units": 1},
        {"kind": "add", "name": "wide", "inputs": ["wide_sparse", "wide_dense"]},
        {"kind": "add", "name": "out", "inputs": ["wide", "deep_out"]},
    ]
    return {"name": "wide_deep", "description": f"wide & deep: {FIELDS} tables of {dim} + 1 wide column",
            "inputs": inputs_list(), "targets": 1, "layers": layers,
            "loss": {"kind": "sigmoid_cross_entropy", "reduction": "mean"}}


def write_csv(path, counts, raw, y, missing, rng):
    hexes = np.vectorize(lambda v: format(int(v) & 0xFFFFFFFF, "08x"), otypes=[object])(raw)
    if missing > 0:
        hexes[rng.random(hexes.shape) < missing] = ""
    with open(path, "w") as out:
        out.write(",".join(["label"] + [f"I{i + 1}" for i in range(DENSE)] + [f"C{f + 1}" for f in range(FIELDS)]) + "\n")
        for i in range(len(y)):
            out.write(",".join([str(int(y[i, 0]))] + [str(int(v)) for v in counts[i]] + list(hexes[i])) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--train", type=int, default=100000)
    ap.add_argument("--test", type=int, default=20000)
    ap.add_argument("--card-scale", type=float, default=1.0)
    ap.add_argument("--max-rows", type=int, default=1000000)
    ap.add_argument("--zipf", type=float, default=1.2)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--csv", action="store_true")
    ap.add_argument("--missing", type=float, default=0.0)
    ap.add_argument("--bottom", default="512,256", help="the bottom MLP's hidden widths (then --dim)")
    ap.add_argument("--top", default="512,256", help="the top MLP's hidden widths (then one logit)")
    a = ap.parse_args()
    for name, value, low in (("--train", a.train, 1), ("--test", a.test, 1), ("--max-rows", a.max_rows, 3),
                             ("--dim", a.dim, 1)):
        if value < low:
            ap.error(f"{name} must be at least {low}, got {value}")
    if not 0 < a.card_scale <= 1000 or not a.zipf > 1 or not 0 <= a.missing < 1:
        ap.error("--card-scale in (0, 1000], --zipf > 1 and --missing in [0, 1)")
    try:
        bottom, top = ([int(u) for u in v.split(",") if u] for v in (a.bottom, a.top))
    except ValueError:
        ap.error("--bottom and --top are comma-separated layer widths, e.g. 512,256")
    if any(u < 1 or u > 65536 for u in bottom + top):
        ap.error("--bottom and --top widths must be in 1..65536")
    os.makedirs(a.dir, exist_ok=True)
    cards = [max(3, int(c * a.card_scale)) for c in CRITEO_CARDINALITY]
    rows = [min(c, a.max_rows) for c in cards]
    planted = Planted(a.seed, cards, a.zipf)
    rng = np.random.default_rng(a.seed)
    info = {"rows": rows, "cardinality": cards}
    for split, n in (("train", a.train), ("test", a.test)):
        counts, dense, raw, y, p = planted.draw(rng, n)
        np.save(os.path.join(a.dir, f"{split}_dense.npy"), counts.astype(np.float32))
        np.save(os.path.join(a.dir, f"{split}_y.npy"), y)
        np.save(os.path.join(a.dir, f"{split}_raw.npy"), raw)
        for f in range(FIELDS):
            ids = (raw[:, f] % np.uint64(rows[f])).astype(np.int64).reshape(n, 1)
            np.save(os.path.join(a.dir, f"{split}_c{f}.npy"), ids)
        if a.csv:
            write_csv(os.path.join(a.dir, f"{split}.csv"), counts, raw, y, a.missing, rng)
        if split == "train":
            info["ctr"] = float(y.mean())
            info["distinct"] = [int(len(np.unique(raw[:, f]))) for f in range(FIELDS)]
        else:
            info["auc"] = auc(p, y[:, 0])
    with open(os.path.join(a.dir, "planted.json"), "w") as out:
        json.dump(info, out)
    for name, model in (("dlrm", dlrm_model(rows, a.dim, bottom, top)), ("dcn", dcn_model(rows, a.dim, top)),
                        ("wdl", wdl_model(rows, a.dim, top))):
        with open(os.path.join(a.dir, f"{name}.json"), "w") as out:
            json.dump(model, out, indent=1)
    print(json.dumps({k: info[k] for k in ("auc", "ctr")} | {"rows": sum(rows), "distinct": sum(info["distinct"])}))


if __name__ == "__main__":
    main()
