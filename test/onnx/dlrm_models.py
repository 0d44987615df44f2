#!/usr/bin/python3
"""DLRM, DCN-v2 and wide & deep (issue 36) from PyTorch and from psrun's JSON, checked against PyTorch, trained through psd.

  1. A torch DLRM that ends in its loss, forward(dense, c0, ..., c25, clicks) -> mean
     binary_cross_entropy_with_logits: a bottom MLP on log1p of 13 dense counts, one nn.Embedding per
     categorical field, the dot interaction of the 27 vectors (bmm, flattened, its strictly lower
     triangle by index_select), a top MLP to one logit. Exported by torch.onnx in training mode at
     opsets 14 and 17: `psrun model check --gradients` gives torch's loss and every parameter's
     gradient, tables included, tensor by tensor in float64 within TOLERANCE.
  2. The same exported DLRM trained through psd with all 26 tables sparse (`--init description`:
     a sparse table starts from its initializer on psd, not the file's values; `psrun local --ps 2
     --workers 1 -- --sparse-embedding ...`) on Criteo-shaped data from bench/criteo_data.py:
     exit 0 and test AUC well above chance. The JSON DLRM also from the Criteo text form (CSV of
     counts and hex strings, 5% of the cells empty) through --input-columns (values hashed by
     the worker into each table's rows).
  3. bench/criteo_data.py's JSON DLRM, DCN-v2 and wide & deep trained the same way, and each one's
     PyTorch twin in bench/torch_dlrm.py trained on the same data with the same recipe (Adam,
     SparseAdam for the tables, lr, batch, steps): psrun's test AUC within SIDE_BY_SIDE of PyTorch's
     (data order and initial values differ: a bound, not an equality).

Usage: dlrm_models.py PSRUN   (exit 77 without torch)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx  # noqa: F401  (torch.onnx.export needs it)
    import torch
    from torch import nn
    import torch.nn.functional as F
except ImportError:
    sys.exit(77)

from torch_compare import worst_gradient  # noqa: E402  (beside this script)

TOLERANCE = 1e-4
SIDE_BY_SIDE = 0.015
FIELDS = 26
HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")


class Dlrm(nn.Module):
    def __init__(self, rows, dim=8):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, dim), nn.ReLU())
        self.tables = nn.ModuleList([nn.Embedding(v, dim) for v in rows])
        n = FIELDS + 1
        self.register_buffer("tri", torch.tensor([i * n + j for i in range(n) for j in range(i)]), persistent=False)
        self.top = nn.Sequential(nn.Linear(dim + len(self.tri), 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, dense, *rest):
        ids, clicks = rest[:-1], rest[-1]
        x = self.bottom(torch.log1p(dense))
        t = torch.cat([x.unsqueeze(1)] + [table(i) for table, i in zip(self.tables, ids)], dim=1)  # [N, 27, D]
        z = torch.bmm(t, t.transpose(1, 2)).flatten(1)
        logit = self.top(torch.cat([x, z.index_select(1, self.tri)], dim=1))
        return F.binary_cross_entropy_with_logits(logit, clicks)


def run(args, log, timeout=900):
    with open(log, "w") as f:
        return subprocess.run(args, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode


def inputs_of(d, split, rows=None):
    out = {"dense": np.load(f"{d}/{split}_dense.npy")}
    for f in range(FIELDS):
        out[f"c{f}"] = np.load(f"{d}/{split}_c{f}.npy")
    out["clicks"] = np.load(f"{d}/{split}_y.npy")
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    psrun = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="dlrm_")
    failed = []

    def check(what, cond, log=None):
        print(f"{'ok' if cond else 'FAILED'}: {what}", flush=True)
        if not cond:
            failed.append(what)
            if log and os.path.exists(log):
                print("    " + open(log).read()[-2000:].replace("\n", "\n    "))
        return cond

    data = f"{tmp}/data"
    gen = subprocess.run(["/usr/bin/python3", f"{BENCH}/criteo_data.py", data, "--train", "40000", "--test", "8000",
                          "--card-scale", "0.0005", "--max-rows", "2000", "--zipf", "1.3", "--dim", "8",
                          "--bottom", "64", "--top", "64,32", "--csv", "--missing", "0.05"],
                         capture_output=True, text=True, timeout=300)
    if not check("bench/criteo_data.py writes the data", gen.returncode == 0):
        print(gen.stderr)
        sys.exit(1)
    planted = json.load(open(f"{data}/planted.json"))
    rows = planted["rows"]
    print(f"data: planted test AUC {planted['auc']:.4f}, click rate {planted['ctr']:.3f}, rows {sum(rows)}")

    # 1. The exported torch DLRM against torch, whole.
    torch.manual_seed(0)
    model = Dlrm(rows)
    batch = {k: v[:16] for k, v in inputs_of(data, "train").items()}
    for opset in (14, 17):
        path = f"{tmp}/dlrm.{opset}.onnx"
        names = list(batch)
        torch.onnx.export(model, tuple(torch.from_numpy(v) for v in batch.values()), path, opset_version=opset,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, input_names=names,
                          output_names=["loss"], dynamic_axes={n: {0: "N"} for n in names})
        grads_path = f"{tmp}/dlrm.{opset}.grads.json"
        cmd = [psrun, "model", "check", path, "--json", "--no-finite-differences", "--no-bf16", "--gradients",
               grads_path]
        for k, (name, v) in enumerate(batch.items()):
            np.save(f"{tmp}/batch.{name}.npy", v)
            cmd += ["--input", (f"{name}=" if k else "") + f"{tmp}/batch.{name}.npy"]
        log = f"{tmp}/check.{opset}.log"
        rc = run(cmd, log)
        if not check(f"opset {opset}: psrun model check exits 0 (rc={rc})", rc == 0 and os.path.exists(grads_path), log):
            continue
        mine = json.load(open(grads_path))
        model.double().zero_grad()
        loss = model(*(torch.from_numpy(v.astype(np.float64) if v.dtype.kind == "f" else v) for v in batch.values()))
        loss.backward()
        theirs = {n: p.grad.numpy() for n, p in model.named_parameters() if p.grad is not None}
        model.float()
        worst, worst_name, missing = worst_gradient(mine["tensors"], theirs)
        loss_error = abs(mine["loss"] - float(loss)) / max(abs(float(loss)), 1e-8)
        check(f"opset {opset}: loss {mine['loss']:.6f} vs torch {float(loss):.6f}, {len(theirs)} gradients "
              f"(26 tables), worst {worst_name} {worst:.2e}" + (f", missing {missing}" if missing else ""),
              not missing and len(theirs) == 2 * 4 + FIELDS and worst <= TOLERANCE and loss_error <= TOLERANCE)

    # 2. and 3.: training through psd with 26 sparse tables, against PyTorch on the same data.
    steps, batch_size, lr = 300, 256, 0.002
    def data_args(labels, clicks_input):
        args = []
        for split in ("train", "test"):
            args += [f"--{split}-images", f"{data}/{split}_dense.npy", f"--{split}-labels", f"{data}/{split}_{labels}.npy"]
            args += [a for f in range(FIELDS) for a in (f"--{split}-input", f"c{f}={data}/{split}_c{f}.npy")]
            if clicks_input:
                args += [f"--{split}-input", f"clicks={data}/{split}_y.npy"]
        return args

    recipe = ["--optimizer", "adam", "--learning-rate", str(lr), "--batch-size", str(batch_size), "--steps", str(steps),
              "--log-every", "200", "--seed", "1"]
    results = {}
    for split in ("train", "test"):  # the exported module reads the clicks as an input; labels count the examples
        np.save(f"{data}/{split}_labels.npy", np.load(f"{data}/{split}_y.npy").astype(np.int64))
    runs = [(name, f"{data}/{name}.json", [f"emb{f}" for f in range(FIELDS)], data_args("y", False), [])
            for name in ("dlrm", "dcn", "wdl")]
    csv_columns = ["--input-columns", "dense=" + ",".join(f"I{i + 1}" for i in range(13))]
    csv_columns += [a for f in range(FIELDS) for a in ("--input-columns", f"c{f}=C{f + 1}")]
    runs.append(("dlrm_csv", f"{data}/dlrm.json", [f"emb{f}" for f in range(FIELDS)],
                 ["--train-data", f"{data}/train.csv", "--test-data", f"{data}/test.csv", *csv_columns], []))
    runs.append(("onnx", f"{tmp}/dlrm.17.onnx", [f"tables.{f}.weight" for f in range(FIELDS)], data_args("labels", True),
                 ["--init", "description"]))
    for name, model_path, tables, data_files, extra in runs:
        run_dir = f"{tmp}/run.{name}"
        log = f"{tmp}/train.{name}.log"
        rc = run([psrun, "local", "--ps", "2", "--workers", "1", "--no-auth", "--grace", "60", "--", "--model", model_path,
                  *extra, *data_files, *recipe, "--sparse-embedding", ",".join(tables), "--model-dir", run_dir], log)
        summary = json.load(open(f"{run_dir}/summary.json")) if rc == 0 and os.path.exists(f"{run_dir}/summary.json") else {}
        results[name] = summary.get("test_auc", next((v for k, v in summary.items() if k.startswith("test_mean_auc")), None))
        check(f"{name} through psd, 26 sparse tables: exit {rc}, test AUC {results[name]}",
              rc == 0 and results[name] is not None and results[name] > 0.65, log)
        if name in ("onnx", "dlrm_csv") or results[name] is None:
            continue
        ref = subprocess.run(["/usr/bin/python3", f"{BENCH}/torch_dlrm.py", data, "--model", name, "--steps", str(steps),
                              "--batch-size", str(batch_size), "--learning-rate", str(lr), "--variant", "sparse",
                              "--seed", "1"], capture_output=True, text=True, timeout=900)
        theirs = json.loads(ref.stdout.strip().splitlines()[-1])["test_auc"] if ref.returncode == 0 else None
        check(f"{name}: psrun's test AUC {results[name]:.4f} within {SIDE_BY_SIDE} of PyTorch's {theirs} (SparseAdam, "
              f"same data and recipe; planted {planted['auc']:.4f})",
              theirs is not None and abs(results[name] - theirs) <= SIDE_BY_SIDE)
    print(f"{len(failed)} failed" if failed else "all passed")
    if not failed:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
