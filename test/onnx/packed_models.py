#!/usr/bin/python3
"""Packed sequences through training: MNIST's rows as a sequence whose trailing blank rows are
padding, the way a text model packs its padded sentences.

PackedRows (bench/more_networks.py) on MNIST [N, 1, 28, 28]: each image is 28 rows of 28 pixels; its length is 28 minus
its trailing rows that are all zero (computed in the graph: flip, cumsum, equal, sum), and
pack_padded_sequence(enforce_sorted=False) feeds a bidirectional LSTM whose last states h_n go to
a linear head. torch.onnx writes ONNX LSTM sequence_lens, with the batch sorted by length (TopK,
Gather) and unsorted (ScatterElements) around it.

  - `psrun model check` on a batch of real MNIST at opsets 14 and 17: outputs, loss and every
    gradient equal torch's (float64) within TOLERANCE; the same for two modules that read the
    last cell states c_n of packed sequences (PackedCellState: a bidirectional LSTM's h_n and c_n
    to the head; PackedSeq2Seq: an encoder's (h_n, c_n) as a decoder's initial states), which
    the importer lowers to a layer per step;
  - `psrun local --ps 1 --workers 2` trains it 400 steps: test accuracy >= ACCURACY;
  - `psrun export`: the exported file loads back into the torch module by name and predicts as
    `psrun predict --model-dir`.

Usage: packed_models.py PSRUN [--data MNIST_DIR]   (exit 77 without torch)
"""
import json
import os
import shutil
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError:
    print("torch is not installed: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import networks  # noqa: E402  (load_onnx_weights)
from more_networks import PackedRows, packed_rows  # noqa: E402
from psrun_cli import mnist_test_set, predict_model_dir, run, train_through_psd  # noqa: E402

from torch_compare import Checks, check_model, export, probabilities  # noqa: E402

TOLERANCE = 1e-4
ACCURACY = 0.85
STEPS = 400
check = Checks()


class PackedCellState(torch.nn.Module):
    """h_n and c_n of a packed bidirectional LSTM, both directions, to the head."""

    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(28, 12, batch_first=True, bidirectional=True)
        self.head = torch.nn.Linear(48, 10)

    def forward(self, x):
        _, (h, c) = self.rnn(packed_rows(x))
        return self.head(torch.cat([h[-2], h[-1], c[-2], c[-1]], 1))


class PackedSeq2Seq(torch.nn.Module):
    """An encoder over the packed rows hands its (h_n, c_n) to a decoder over the first columns."""

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.LSTM(28, 16, batch_first=True)
        self.decoder = torch.nn.LSTM(28, 16, batch_first=True)
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        _, state = self.encoder(packed_rows(x))
        columns = x.flatten(1, 2).transpose(1, 2)  # [N, 28, 28]
        y, _ = self.decoder(columns[:, :8], state)
        return self.head(y[:, -1])


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    psrun = os.path.abspath(args[0])
    test_x, _ = mnist_test_set(args, 1000)
    tmp = tempfile.mkdtemp(prefix="psrun-packed-")
    torch.set_num_threads(1)
    try:
        rows = test_x[:8].reshape(8, 28, 28)
        trailing = [int(np.argmax(np.abs(r).sum(1)[::-1] != 0)) for r in rows]
        check(f"the batch's lengths differ ({sorted(28 - t for t in trailing)})", len(set(trailing)) > 1)
        # Gradients against torch's on real digits (check_model draws its own batch: use MNIST's).
        check_model(check, psrun, "packed_rows", PackedRows, (1, 28, 28), ["lstm", "gather_nd"], tmp, batch=8,
                    seed=3, opsets=(14, 17), finite_differences=False, compare_predict=False, data=test_x[:8])
        for name, build in (("packed_cell_state", PackedCellState), ("packed_seq2seq", PackedSeq2Seq)):
            check_model(check, psrun, name, build, (1, 28, 28), ["lstm", "where"], tmp, batch=8, seed=3,
                        opsets=(14, 17), finite_differences=False, compare_predict=True, data=test_x[:8])
        torch.manual_seed(3)
        model = PackedRows()
        path = f"{tmp}/packed.onnx"
        export(model, torch.from_numpy(test_x[:2]), path, 17)
        run_dir, log = f"{tmp}/run", f"{tmp}/train.log"
        trained = train_through_psd(psrun, path, run_dir, STEPS, timeout=500)
        with open(log, "w") as out:
            out.write(trained.stdout)
        if not check(f"trains {STEPS} steps through psd, 1 ps + 2 workers (rc={trained.returncode})",
                     trained.returncode == 0, trained.stdout[-1500:]):
            return
        accuracy = json.load(open(f"{run_dir}/summary.json")).get("test_accuracy", -1)
        check(f"test accuracy {accuracy:.4f} >= {ACCURACY}", accuracy >= ACCURACY, always=True)
        exported = f"{tmp}/trained.onnx"
        rc = run([psrun, "export", "--model-dir", run_dir, "-o", exported])
        if not check("psrun export exits 0", rc.returncode == 0, rc.stdout):
            return
        probs = f"{tmp}/probs.npy"
        np.save(f"{tmp}/test-x.npy", test_x)
        rc = predict_model_dir(psrun, run_dir, f"{tmp}/test-x.npy", probs)
        if not check("psrun predict --model-dir exits 0", rc.returncode == 0, rc.stdout):
            return
        networks.load_onnx_weights(model, exported)
        theirs = probabilities(model, test_x)
        diff = float(np.abs(np.load(probs) - theirs).max())
        check(f"the export loaded into torch predicts as psrun (largest difference {diff:.1e})", diff <= 1e-4)
    finally:
        if "--keep" not in args:
            shutil.rmtree(tmp, ignore_errors=True)
    check.finish()


if __name__ == "__main__":
    main()
