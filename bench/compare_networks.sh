#!/bin/bash
# The seven networks of bench/networks.py in psrun and in PyTorch, side by side on this host
# (docs/benchmarks.md "The seven networks against PyTorch"). Two parts:
#
#   bench/compare_networks.sh accuracy [SEEDS="1 2 3"] [STEPS=600] [NETWORKS...]
#     per network and seed, PyTorch first writes the module's initial weights (torch seed S) as a
#     training-mode ONNX export and trains the module STEPS steps of batch 128 (Adam, constant
#     LR); then psrun trains that export from the same weights through psd: `psrun local --ps 1
#     --workers 2 --sync`, batch 64 per worker, psd averaging both workers' gradients, so each
#     global step is one Adam step over 128 examples, STEPS global steps, --seed S. CNNs on
#     Fashion-MNIST, the MLP and sequence models on MNIST, the embedding bag on MNIST as token ids.
#     One JSON line per run, then per network the medians over the seeds and psrun - PyTorch.
#     With EMA=D in the environment, both sides also keep a moving average of the weights with decay
#     D (psrun --ema-decay D, PyTorch's AveragedModel with the same EMA, buffers averaged) and report
#     its accuracy beside the weights'; psrun then uses adam_torch (torch.optim.Adam's form).
#     OPTIMIZER=adam_torch asks for that form without the average (the default, adam, is TF 1.x's,
#     epsilon applied to the uncorrected second moment). NETWORKS may also be bench/more_networks.py's
#     fifteen (exported at opset 17; the token models train on `networks.py tokens`).
#
#   bench/compare_networks.sh speed [ROUNDS=5] [NETWORKS...]
#     (NETWORKS: bench/networks.py's seven by default, or any of bench/more_networks.py's, exported
#     at opset 17) per round and network, one after the other: `psrun bench train --model NET.onnx` (batch 128,
#     2 threads, f32) and PyTorch's training step on the same module (pytorch_networks.py bench,
#     2 threads; the CNNs also with channels_last, the faster of the two counts). One JSON line
#     per run, then per network the median img/s and psrun / PyTorch.
#
# Needs a built tree (build/launcher/psrun) and Debian's python3-torch and python3-onnx; speed
# also libopenblas0-openmp (torch's dense layers on Debian's reference BLAS are ~10x slower).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: compare_networks.sh accuracy|speed [...]}
shift
psrun=build/launcher/psrun
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out=$work/results.jsonl
all_networks=(resnet20 bn_cnn mobilenet mlp_ln_gelu lstm_rows transformer_rows embedding_bag)
tunables=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824

# The token models: the embedding bag and bench/more_networks.py's mnist-tokens networks.
more_list=$($py bench/more_networks.py list)
uses_tokens() { [ "$1" = embedding_bag ] || grep -q "^$1 mnist-tokens " <<<"$more_list"; }
learning_rate() { [ "$1" = embedding_bag ] && echo 1e-2 || echo 1e-3; }
is_cnn() {
  case $1 in
    resnet20|bn_cnn|mobilenet|groupnorm_cnn|instnorm_prelu_cnn|activation_mix|mobilenet_v3|convnext|unet|pooling_mix|conv_transpose_net) return 0 ;;
  esac
  return 1
}

if [ "$mode" = accuracy ]; then
  seeds=${1:-1 2 3}
  steps=${2:-600}
  shift $(( $# < 2 ? $# : 2 ))
  networks=("$@")
  [ $# -gt 0 ] || networks=("${all_networks[@]}")
  $psrun data fetch --dataset mnist >/dev/null
  $psrun data fetch --dataset fashion-mnist >/dev/null
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/psrun/data
  $py bench/networks.py tokens "$cache/mnist" "$work/tokens" >/dev/null
  for name in "${networks[@]}"; do
    lr=$(learning_rate "$name")
    data=(--data-dir "$cache/mnist")
    psdata=(--dataset mnist)
    if is_cnn "$name"; then data=(--data-dir "$cache/fashion-mnist"); psdata=(--dataset fashion-mnist); fi
    if uses_tokens "$name"; then
      data=(--tokens "$work/tokens")
      psdata=(--train-images "$work/tokens/train-tokens.npy" --train-labels "$work/tokens/train-labels.npy"
              --test-images "$work/tokens/test-tokens.npy" --test-labels "$work/tokens/test-labels.npy")
    fi
    for seed in $seeds; do
      init=$work/$name-$seed.onnx
      ema=(); optimizer=${OPTIMIZER:-adam}
      [ -n "${EMA:-}" ] && { ema=(--ema-decay "$EMA"); optimizer=adam_torch; }
      GLIBC_TUNABLES=$tunables $py bench/pytorch_networks.py train "$name" --seed "$seed" --steps "$steps" \
        --batch-size 128 --learning-rate "$lr" --threads 2 --export "$init" "${ema[@]}" "${data[@]}" | tee -a "$out"
      dir=$work/run-$name-$seed
      timeout 1800 $psrun local --ps 1 --workers 2 --sync -- --model "$init" --model-dir "$dir" \
        --steps "$steps" --batch-size 64 --learning-rate "$lr" --optimizer $optimizer --precision f32 \
        --seed "$seed" --log-every 100000 "${ema[@]}" "${psdata[@]}" >"$work/psrun.log" 2>&1 ||
        { tail -20 "$work/psrun.log" >&2; exit 1; }
      $py - "$dir/summary.json" "$name" "$seed" "$steps" "$lr" <<'PY' | tee -a "$out"
import json, sys
s = json.load(open(sys.argv[1]))
print(json.dumps({"system": "psrun", "network": sys.argv[2], "seed": int(sys.argv[3]), "steps": s["global_step"],
                  "batch_size": 128, "learning_rate": float(sys.argv[5]), "test_accuracy": s["test_accuracy"],
                  "train_seconds": round(s["train_seconds"], 2), "workers": s["workers"], "optimizer": s["optimizer"],
                  **({"ema_decay": s["ema_decay"], "ema_test_accuracy": s["ema_test_accuracy"]}
                     if s.get("ema_decay") else {})}))
PY
    done
  done
  $py - "$out" <<'PY'
import collections, json, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs[(r["network"], r["system"])].append(r)
print("| network | PyTorch (seeds) | psrun (seeds) | median PyTorch | median psrun | psrun - PyTorch | s PyTorch / psrun |")
print("|---|---|---|---|---|---|---|")
for name in dict.fromkeys(n for n, _ in runs):
    t, p = runs[(name, "pytorch")], runs[(name, "psrun")]
    mt = statistics.median(r["test_accuracy"] for r in t)
    mp = statistics.median(r["test_accuracy"] for r in p)
    fmt = lambda rs: ", ".join("%.2f" % (100 * r["test_accuracy"]) for r in rs)
    sec = lambda rs: statistics.median(r["train_seconds"] for r in rs)
    print("| %s | %s | %s | %.2f%% | %.2f%% | %+.2f | %.0f / %.0f |"
          % (name, fmt(t), fmt(p), 100 * mt, 100 * mp, 100 * (mp - mt), sec(t), sec(p)))
ema = [n for n in dict.fromkeys(n for n, _ in runs) if "ema_test_accuracy" in runs[(n, "psrun")][0]]
if ema:
    print("\nmoving average of the weights (EMA decay %g):\n" % runs[(ema[0], "psrun")][0]["ema_decay"])
    print("| network | AveragedModel (seeds) | psrun --ema-decay (seeds) | median AveragedModel | median psrun | psrun - PyTorch |")
    print("|---|---|---|---|---|---|")
    for name in ema:
        t, p = runs[(name, "pytorch")], runs[(name, "psrun")]
        mt = statistics.median(r["ema_test_accuracy"] for r in t)
        mp = statistics.median(r["ema_test_accuracy"] for r in p)
        fmt = lambda rs: ", ".join("%.2f" % (100 * r["ema_test_accuracy"]) for r in rs)
        print("| %s | %s | %s | %.2f%% | %.2f%% | %+.2f |" % (name, fmt(t), fmt(p), 100 * mt, 100 * mp, 100 * (mp - mt)))
PY
elif [ "$mode" = speed ]; then
  bench/check_blas.sh
  rounds=${1:-5}
  shift $(( $# < 1 ? $# : 1 ))
  networks=("$@")
  [ $# -gt 0 ] || networks=("${all_networks[@]}")
  # Each name from bench/networks.py or, failing that, bench/more_networks.py (opset 17).
  more=$(cut -d' ' -f1 <<<"$more_list")
  for name in "${networks[@]}"; do
    if grep -qx "$name" <<<"$more"; then
      $py bench/more_networks.py export "$work/nets" --opset 17 "$name" >/dev/null 2>&1
    else
      $py bench/networks.py export "$work/nets" "$name" >/dev/null
    fi
  done
  for ((round = 1; round <= rounds; round++)); do
    for name in "${networks[@]}"; do
      $psrun bench train --model "$work/nets/$name.onnx" --batch-size 128 --threads 2 --precision f32 \
        --steps 60 --warmup-steps 10 | $py -c '
import json, sys
d = json.load(sys.stdin)
d.update(system="psrun", network=sys.argv[1], round=int(sys.argv[2]))
print(json.dumps(d))' "$name" "$round" | tee -a "$out" | cut -c1-200
      variants=("")
      is_cnn "$name" && variants=("" --channels-last)
      for v in "${variants[@]}"; do
        GLIBC_TUNABLES=$tunables $py bench/pytorch_networks.py bench "$name" --batch-size 128 --threads 2 \
          --steps 30 --warmup 5 $v | $py -c '
import json, sys
d = json.load(sys.stdin); d["round"] = int(sys.argv[1]); print(json.dumps(d))' "$round" | tee -a "$out"
      done
    done
  done
  $py - "$out" <<'PY'
import collections, json, statistics, sys
ps, pt = collections.defaultdict(list), collections.defaultdict(dict)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["system"] == "psrun":
        ps[r["network"]].append(r)
    else:
        key = (r["network"], r["round"])
        pt[key][r["channels_last"]] = r["images_per_sec"]
print("| network | psrun img/s | fraction of f32 peak | PyTorch img/s (best layout) | psrun / PyTorch |")
print("|---|---|---|---|---|")
for name, runs in ps.items():
    p = statistics.median(r["images_per_sec"] for r in runs)
    frac = statistics.median(r.get("fraction_of_peak", 0) for r in runs)
    best = {}
    for (n, rnd), v in pt.items():
        if n == name:
            best[rnd] = max(v.values())
    layouts = collections.Counter(max(v, key=v.get) for (n, _), v in pt.items() if n == name)
    t = statistics.median(best.values())
    ratio = statistics.median(r["images_per_sec"] / best[r["round"]] for r in runs)
    print("| %s | %.0f | %.2f | %.0f (%s) | %.2f |" % (name, p, frac, t,
          "channels_last" if layouts.get(True, 0) > layouts.get(False, 0) else "contiguous", ratio))
PY
else
  echo "usage: compare_networks.sh accuracy|speed [...]" >&2
  exit 2
fi
