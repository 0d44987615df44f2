#!/usr/bin/env python3
"""psrun-bench-gemm (bench/gemm): every line is JSON naming its precision, layer, pass and backend; where
oneDNN and libxsmm both run a GEMM their products agree (f32 sums in another order: within 1e-5 of the
largest output), in bf16 and in f32; a backend that cannot run on this CPU (oneDNN 2.6 has no bf16 matmul
below AVX-512, libxsmm no bf16 kernel for AVX2) says why instead of failing, also under an AVX2 cap,
where f32 runs in both; bad options exit 2.
Usage: gemm_test.py BENCH_EXE"""
import json
import os
import subprocess
import sys
import unittest

EXE = sys.argv.pop(1)


def run(*args, env=None):
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


class GemmBench(unittest.TestCase):
    def lines(self, env=None, precision="bf16"):
        r = run("--rounds", "1", "--reps", "1", "--precision", precision, "--layer", "64:128:192", "--layer", "128:64:64",
                env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = [json.loads(line) for line in r.stdout.splitlines()]
        want = {(layer, p, b) for layer in ("64x128x192", "128x64x64")
                for p in ("forward", "data_gradient", "weight_gradient")
                for b in ("onednn", "libxsmm", "libxsmm_prepacked")}
        self.assertEqual({(x["layer"], x["pass"], x["backend"]) for x in rows}, want)
        self.assertEqual({x["precision"] for x in rows}, {precision})
        return rows

    def check_products(self, rows):
        for x in rows:
            if "skipped" in x:
                self.assertTrue(x["skipped"], x)
                continue
            self.assertGreater(x["gflops"], 0, x)
            self.assertGreater(x["ms_median"], 0, x)
            self.assertGreater(x["max_abs_output"], 1.0, x)  # sums of 64+ products of N(0, 1) draws
            if x["max_diff_vs_onednn_relative"] is not None:
                self.assertLessEqual(x["max_diff_vs_onednn_relative"], 1e-5, x)
        ran = {(x["layer"], x["pass"]) for x in rows if "skipped" not in x and x["backend"] == "onednn"}
        return [x for x in rows if "skipped" not in x and x["backend"] != "onednn" and (x["layer"], x["pass"]) in ran]

    def test_bf16_products_agree_or_say_why_not(self):
        rows = self.lines()
        both = self.check_products(rows)
        if "avx512_bf16" in open("/proc/cpuinfo").read():  # both libraries have bf16 kernels here
            self.assertEqual(len(both), 12, rows)
        # shapes: forward of 64x128x192 is [64 x 192] = [64 x 128] [128 x 192]
        fwd = next(x for x in rows if x["layer"] == "64x128x192" and x["pass"] == "forward")
        self.assertEqual((fwd["m"], fwd["n"], fwd["k"]), (64, 192, 128))

    def test_f32_products_agree_also_on_avx2(self):
        for env in (None, {"ONEDNN_MAX_CPU_ISA": "AVX2", "LIBXSMM_TARGET": "hsw"}):
            rows = self.lines(env, "f32")
            self.assertEqual(len(self.check_products(rows)), 12, rows)  # every x86-64-v3 CPU runs both

    def test_an_avx2_host_skips_bf16(self):
        rows = self.lines({"ONEDNN_MAX_CPU_ISA": "AVX2", "LIBXSMM_TARGET": "hsw"})
        for x in rows:
            self.assertIn("skipped", x, x)

    def test_bad_options_exit_2(self):
        for args, says in ((["--layer", "100:3136:1024"], "--layer 100:3136:1024"),
                           (["--layer", "64:64"], "BATCH:IN:OUT"),
                           (["--threads", "0"], "--threads"),
                           (["--rounds", "x"], "--rounds"),
                           (["--precision", "f16"], "--precision")):
            r = run(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(says, r.stderr, args)


if __name__ == "__main__":
    unittest.main()
