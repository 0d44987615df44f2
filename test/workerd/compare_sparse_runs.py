#!/usr/bin/python3
"""A dense run and a sparse-table run of the same model (test/workerd/sparse_*_test.sh): the same
logged steps (6), equal losses at each (1e-4 relative), a falling loss, and equal test AUC
(within 1e-3) above MIN_AUC. Prints both curves and the AUCs; exits 1 (an AssertionError) when
one does not hold.

Usage: compare_sparse_runs.py DENSE_DIR SPARSE_DIR MIN_AUC
"""
import json
import sys


def curve(d):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(d + "/metrics.jsonl")) if "loss" in r]


dense_dir, sparse_dir, min_auc = sys.argv[1], sys.argv[2], float(sys.argv[3])
dense, sparse = curve(dense_dir), curve(sparse_dir)
print("dense ", dense)
print("sparse", sparse)
assert len(dense) == 6 and [s for s, _ in dense] == [s for s, _ in sparse], "not the same steps"
for (s, a), (_, b) in zip(dense, sparse):
    assert abs(a - b) <= 1e-4 * max(1.0, abs(a)), f"step {s}: dense loss {a}, sparse {b}"
assert dense[-1][1] < dense[0][1], "the loss did not fall"
auc = [json.load(open(d + "/summary.json"))["test_auc"] for d in (dense_dir, sparse_dir)]
print("test AUC", auc)
assert abs(auc[0] - auc[1]) <= 1e-3 and auc[0] > min_auc, auc
