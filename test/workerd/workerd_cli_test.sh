#!/usr/bin/env bash
# workerd --standalone end to end: a short run writes summary.json; bad flags exit 2 naming the
# flag; a missing data dir exits 1 and says how to fetch. Needs MNIST in the default data dir
# (test/run.sh runs `psrun data fetch` first). Usage: workerd_cli_test.sh <workerd> <psrun>
set -u
workerd=$1
psrun=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$(dirname "$0")/../support/check.sh"  # check(), require_mnist()

timeout 300 "$psrun" data fetch >/dev/null || { echo "FAILED: data fetch"; exit 1; }

timeout 120 "$workerd" --standalone --steps 30 --batch-size 20 --eval-every 15 --threads 2 \
    --learning-rate 1e-3 --model-dir "$tmp/model" >"$tmp/out" 2>&1
rc=$?
check "short standalone run exits 0 (rc=$rc)" test "$rc" -eq 0
check "summary.json written" test -s "$tmp/model/summary.json"
python3 - "$tmp/model/summary.json" <<'PY' || fail=1
import json, sys
s = json.load(open(sys.argv[1]))
for key in ("global_step", "test_accuracy", "images_per_sec", "train_seconds"):
    assert key in s, f"summary.json lacks {key}"
assert s["global_step"] == 30, s["global_step"]
assert 0.0 <= s["test_accuracy"] <= 1.0 and s["images_per_sec"] > 0 and s["train_seconds"] > 0
assert [e["global_step"] for e in s["evaluations"]] == [15, 30]
# MNIST's customary targets, timed in training seconds (evaluations excluded); 30 steps reach neither.
t = s["targets"]
assert t["metric"] == {"field": "test_accuracy", "higher_is_better": True} and t["seconds"] == "training", t
assert [(x["kind"], x["threshold"], x["reached"]) for x in t["targets"]] == [("default", 0.99, False), ("default", 0.992, False)], t
print("ok: summary.json fields", {k: s[k] for k in ("global_step", "test_accuracy")})
PY
check "progress line logged" grep -q "step 30/30 .* img/s  loss .* test accuracy" "$tmp/out"
check "time to MNIST's targets logged" grep -q "time to 99.0% and 99.2% test accuracy: neither reached" "$tmp/out"

# --target-accuracy: thresholds that fit the run, in percent or as fractions.
timeout 120 "$workerd" --standalone --steps 20 --batch-size 20 --eval-every 10 --threads 2 \
    --learning-rate 1e-3 --target-accuracy 2,0.05 --model-dir "$tmp/targets" >"$tmp/out" 2>&1
rc=$?
check "--target-accuracy 2,0.05 trains (rc=$rc)" test "$rc" -eq 0
check "... and logs the time to 2.0% and 5.0% (above chance: reached at once)" \
    grep -Eq "time to 2.0% in [0-9]+ s \(global step 10\); 5.0% in [0-9]+ s \(global step 10\) \(seconds of training" "$tmp/out"
python3 -c "
import json; t = json.load(open('$tmp/targets/summary.json'))['targets']['targets']
assert [(x['kind'], x['threshold'], x['reached'], x['global_step']) for x in t] == [('given', 0.02, True, 10), ('given', 0.05, True, 10)], t
assert all(x['seconds'] > 0 for x in t), t
print('ok: summary.json targets', t)" || fail=1
timeout 30 "$workerd" --standalone --target-accuracy 99,abc >"$tmp/out" 2>&1
rc=$?
check "--target-accuracy 99,abc exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the option and the value" grep -q -- "--target-accuracy '99,abc': 'abc' is not a number" "$tmp/out"

# Elsewhere than MNIST: the time to the best accuracy reached and to within 1 point of it.
timeout 120 "$psrun" data fetch --dataset fashion-mnist >/dev/null || { echo "FAILED: fashion-mnist fetch"; fail=1; }
timeout 120 "$workerd" --standalone --dataset fashion-mnist --steps 20 --batch-size 20 --eval-every 10 --threads 2 \
    --learning-rate 1e-3 --model-dir "$tmp/fashion" >"$tmp/out" 2>&1
rc=$?
check "a short fashion-mnist run trains (rc=$rc)" test "$rc" -eq 0
check "... and logs the time to its best accuracy" \
    grep -Eq "time to the best test accuracy \([0-9.]+%\) in [0-9]+ s \(global step (10|20)\); to within 1 point of it" "$tmp/out"
python3 -c "
import json; s = json.load(open('$tmp/fashion/summary.json')); t = s['targets']['targets']
best = max(e['test_accuracy'] for e in s['evaluations'])
assert s['dataset'] == 'fashion-mnist' and [x['kind'] for x in t] == ['best', 'near_best'], s
assert t[0]['threshold'] == best and abs(t[1]['threshold'] - (best - 0.01)) < 1e-12 and t[0]['reached'], t
print('ok: fashion-mnist targets', t)" || fail=1

# The oneDNN-only path end to end (the hand-written kernels are the default).
timeout 120 "$workerd" --standalone --steps 10 --batch-size 20 --threads 2 --hand-kernels off \
    --model-dir "$tmp/plain" >"$tmp/out" 2>&1
rc=$?
check "--hand-kernels off trains (rc=$rc)" test "$rc" -eq 0
timeout 30 "$workerd" --standalone --hand-kernels maybe >"$tmp/out" 2>&1
rc=$?
check "--hand-kernels maybe exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the flag" grep -q -- "--hand-kernels" "$tmp/out"
timeout 30 "$workerd" --standalone --wire-precision fp8 >"$tmp/out" 2>&1
rc=$?
check "--wire-precision fp8 exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the flag" grep -q -- "--wire-precision" "$tmp/out"

timeout 30 "$workerd" --standalone --batch-size 0 >"$tmp/out" 2>&1
rc=$?
check "--batch-size 0 exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the flag" grep -q -- "--batch-size" "$tmp/out"
timeout 30 "$workerd" --standalone --optimizer rmsprop >"$tmp/out" 2>&1
check "unknown optimizer exits 2" test $? -eq 2
timeout 30 "$workerd" --standalone --shard 3/3 >"$tmp/out" 2>&1
check "bad --shard exits 2" test $? -eq 2
timeout 30 "$workerd" --standalone --synthetic-compute-jitter exp:20 >"$tmp/out" 2>&1
rc=$?
check "--synthetic-compute-jitter without --synthetic-compute-ms exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the flag it needs" grep -q -- "needs --synthetic-compute-ms" "$tmp/out"
timeout 30 "$workerd" --standalone --synthetic-compute-ms 5 --synthetic-compute-jitter exp:-1 >"$tmp/out" 2>&1
rc=$?
check "--synthetic-compute-jitter exp:-1 exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the flag" grep -q -- "--synthetic-compute-jitter" "$tmp/out"

# Learning-rate schedules (docs/running.md): one trains and is named in summary.json; bad ones exit 2.
timeout 120 "$workerd" --standalone --steps 10 --batch-size 20 --threads 2 --learning-rate 1e-3 \
    --lr-schedule cosine:steps=5,alpha=0.1 --lr-warmup-steps 5 --model-dir "$tmp/sched" >"$tmp/out" 2>&1
rc=$?
check "--lr-schedule cosine with warm-up trains (rc=$rc)" test "$rc" -eq 0
check "... summary.json names it" grep -Eq '"lr_schedule": ?"cosine:steps=5,alpha=0.1,warmup=5"' "$tmp/sched/summary.json"
timeout 30 "$workerd" --standalone --lr-schedule "piecewise:boundaries=20,10;values=1,2,3" >"$tmp/out" 2>&1
rc=$?
check "non-increasing piecewise boundaries exit 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the field" grep -q -- "--lr-schedule piecewise: boundaries must be strictly increasing" "$tmp/out"
timeout 30 "$workerd" --standalone --lr-schedule cosine:steps=100 --lr-decay-rate 0.1 --lr-decay-steps 100 >"$tmp/out" 2>&1
check "--lr-schedule with --lr-decay-* exits 2" test $? -eq 2
timeout 60 "$workerd" --standalone --data-dir "$tmp/none" --steps 1 >"$tmp/out" 2>&1
rc=$?
check "missing data exits 1 (rc=$rc)" test "$rc" -eq 1
check "... and says how to fetch" grep -q "psrun data fetch" "$tmp/out"

timeout 120 "$psrun" bench train --steps 3 --warmup-steps 1 --batch-size 10 >"$tmp/bench"
rc=$?
check "bench train exits 0 (rc=$rc)" test "$rc" -eq 0
python3 -c "
import json,sys; d=json.loads(open('$tmp/bench').read())
assert d['images_per_sec'] > 0 and d['ms_per_step'] > 0 and d['model'] == 'mnist_deep'
kinds = [(l['index'], l['kind']) for l in d['layers']]
assert [k for _, k in kinds][-3:] == ['dropout', 'dense', 'loss'] and kinds[0][0] == 0 and any(i == 6 for i, _ in kinds), kinds
assert d['ms_per_step_median'] > 0 and d['images_per_sec_median_step'] > 0
# Against this host's peak (common/peak_flops.h): the probe ran for --threads 2.
p = d['peak']
assert d['cpu_model'] == p['cpu_model'] and p['cpu_model'], p
assert p['threads'] == min(2, p['cpus']) and p['f32_gflops'] > 0 and p['f32_isa'] in ('avx512f', 'avx2+fma'), p
assert (p['bf16_gflops'] is None) == (p['bf16_isa'] == 'none'), p
assert abs(d['mflop_per_image'] - 82.049024) < 1e-6, d['mflop_per_image']
assert abs(d['gflops'] - d['images_per_sec'] * d['mflop_per_image'] / 1000) < 1e-6 * d['gflops']
assert d['peak_gflops'] == p['f32_gflops'] / p['threads'] * min(2, p['cpus'])
assert abs(d['fraction_of_peak'] - d['gflops'] / d['peak_gflops']) < 1e-9
# Sampled between the steps (one before, none after 3 steps, topped up to 8): their median, and the best.
assert p['statistic'] == 'median' and p['samples'] == 8, p
assert d['peak_best_gflops'] >= d['peak_gflops'] and d['fraction_of_best_peak'] <= d['fraction_of_peak'], d
assert 0 < d['fraction_of_peak'] < 1 and 0 < d['fraction_of_peak_median_step'] < 1.5, d
print('ok: bench JSON', round(d['images_per_sec']), 'img/s,', round(100 * d['fraction_of_peak'], 1), '% of', round(d['peak_gflops']), 'GFLOP/s f32')" || fail=1
# bf16 where the CPU has it: the fraction is of the bf16 peak.
if grep -qE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
  timeout 120 "$psrun" bench train --steps 3 --warmup-steps 1 --batch-size 10 --precision bf16 >"$tmp/bench-bf16"
  rc=$?
  check "bench train --precision bf16 exits 0 (rc=$rc)" test "$rc" -eq 0
  python3 -c "
import json; d=json.loads(open('$tmp/bench-bf16').read()); p=d['peak']
if p['bf16_gflops'] is None:
    assert d['peak_gflops'] is None and d['fraction_of_peak'] is None, d  # AMX without AVX512-BF16
else:
    assert d['peak_gflops'] == p['bf16_gflops'] / p['threads'] * min(2, p['cpus'])
    assert abs(d['fraction_of_peak'] - d['gflops'] / d['peak_gflops']) < 1e-9
print('ok: bench bf16 against', d['peak_gflops'], 'GFLOP/s')" || fail=1
fi
# Every zoo model benchmarks, with its layers by index and kind.
for m in $("$psrun" model list | awk '{print $1}'); do
  timeout 120 "$psrun" bench train --model "$m" --steps 2 --warmup-steps 1 --batch-size 8 --peak 0 >"$tmp/bench-$m"
  rc=$?
  check "bench train --model $m exits 0 (rc=$rc)" test "$rc" -eq 0
  python3 -c "
import json; d=json.loads(open('$tmp/bench-$m').read())
assert d['model'] == '$m' and d['images_per_sec'] > 0 and d['layers'][-1]['kind'] == 'loss'
assert 'peak' not in d and d['mflop_per_image'] > 0  # --peak 0: no probe, the work per image still
assert all(l['forward_ms'] >= 0 and l['backward_ms'] >= 0 for l in d['layers'])
print('ok: bench $m', len(d['layers']), 'layers,', round(d['images_per_sec']), 'img/s')" || fail=1
done
timeout 30 "$psrun" bench train --model no_such_model >/dev/null 2>"$tmp/err"
check "bench with an unknown model exits 2" test $? -eq 2
check "... and names the built-ins" grep -q "mnist_deep" "$tmp/err"
timeout 30 "$psrun" bench train --precision fp8 >/dev/null 2>&1
check "bench with a bad precision exits 2" test $? -eq 2
# --augment (workerd/augment.h): flips and random crops of the training images; a bad spec is exit 2.
timeout 120 "$workerd" --standalone --model lenet5 --steps 20 --batch-size 50 --threads 2 --augment flip,crop=2 \
    --log-every 20 >"$tmp/augment.log" 2>&1
check "--augment flip,crop=2 trains lenet5 (rc=$?)" grep -q "done: 20 steps" "$tmp/augment.log"
timeout 30 "$workerd" --standalone --model lenet5 --steps 1 --augment crop=0 >"$tmp/augment-bad.log" 2>&1
check "--augment crop=0 exits 2" test $? -eq 2
check "... naming the part and the form" grep -q "'crop=0' is not flip or crop=P" "$tmp/augment-bad.log"
exit $fail
