"""ROC AUC of scores against 0/1 labels (the rank-sum form; ties ranked in input order), shared by
the click benchmarks: bench/click_data.py, bench/criteo_data.py, bench/torch_dlrm.py."""
import numpy as np


def auc(scores, labels):
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels > 0.5
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
