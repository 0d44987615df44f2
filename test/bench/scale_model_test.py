#!/usr/bin/env python3
"""bench/scale.py's models agree with each other where they must: the straggler term with a Monte Carlo
of the order statistic, the simulation without jitter with the two-phase model, the queueing model for one
worker with that worker's own cycle. No measurements: numbers come from the models themselves."""
import os
import random
import statistics
import sys
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in bench/
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import scale  # noqa: E402


def config(**kw):
    cfg = {"mode": "sync", "placement": "spread", "workers": 4, "shards": 1, "rate_mbit": 100,
           "compute_ms": 100, "jitter_ms": 0, "backup_workers": 0, "model": "dls_mlp"}
    cfg.update(kw)
    return cfg


class StragglerTerm(unittest.TestCase):
    def test_matches_a_monte_carlo_of_the_order_statistic(self):
        rng = random.Random(3)
        jitter_ms, n = 50.0, 40000
        for w, b in ((2, 0), (4, 1), (8, 2), (8, 0)):
            draws = [sorted(rng.expovariate(1 / jitter_ms) for _ in range(w))[w - b - 1] for _ in range(n)]
            sd = statistics.stdev(draws)
            self.assertAlmostEqual(statistics.mean(draws) / 1000, scale.straggler_s(w, b, jitter_ms),
                                   delta=5 * sd / n ** 0.5 / 1000, msg=f"W={w} b={b}")

    def test_backups_shrink_it_and_no_jitter_has_none(self):
        self.assertEqual(scale.straggler_s(8, 0, 0), 0)
        terms = [scale.straggler_s(8, b, 50) for b in range(4)]
        self.assertEqual(terms, sorted(terms, reverse=True))


class SyncModels(unittest.TestCase):
    def test_simulation_without_jitter_is_the_two_phase_model(self):
        for w, k in ((2, 1), (4, 1), (8, 2)):
            cfg = config(workers=w, shards=k)
            self.assertAlmostEqual(scale.simulate_sync(cfg, steps=2000), scale.model_times(cfg), places=6)

    def test_pipelined_is_never_slower_than_two_phase(self):
        for w in (1, 2, 4, 8):
            cfg = config(workers=w, jitter_ms=20)
            self.assertGreaterEqual(scale.model_times(cfg, pipelined=True), scale.model_times(cfg))


class AsyncModels(unittest.TestCase):
    def test_queueing_model_of_one_worker_is_its_own_cycle(self):
        cfg = config(mode="async", workers=1, jitter_ms=20)
        self.assertAlmostEqual(scale.queueing_async(cfg), scale.model_times(cfg), places=9)

    def test_queueing_model_stays_below_the_max_bound(self):
        for w in (2, 4, 8, 16):
            cfg = config(mode="async", workers=w, jitter_ms=20)
            self.assertLess(scale.queueing_async(cfg), scale.model_times(cfg))
        self.assertIsNone(scale.queueing_async(config(mode="async", shards=2)))


if __name__ == "__main__":
    unittest.main()
