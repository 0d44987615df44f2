#!/usr/bin/env bash
# The emulated multi-node lab (test/slurm/nslab.sh): 3 nodes, each its own network namespace with a link shaped
# to RATE Mbit/s (default 200) in both directions. Checks: every task runs on its own host (hostname n<i>,
# address 10.99.0.<i> on eth0, which is also what its node name resolves to); a TCP stream from n2 to n1 gets the
# shaped rate (within 15%, the fastest of up to three streams) and re-shaping to half the rate halves it; `psrun addr --interface eth0` on every
# node gives the addresses that `psrun plan --node-addrs` then puts in the map. `down` (EXIT trap) must leave no
# process and no namespace.
# Usage: nslab_test.sh PSRUN
set -euo pipefail
LAB_KIND=ns
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
RATE=${RATE:-200}
export RATE
lab_start 3

out=$("${LAB_EXEC[@]}" timeout 30 srun --immediate=10 -N3 --ntasks-per-node=1 -l bash -c \
  'echo "$(hostname) $(ip -4 -o addr show dev eth0 | awk "{print \$4}") $(getent hosts "$SLURMD_NODENAME" | cut -d" " -f1)"' | sort -n)
note "hosts:"$'\n'"$out"
[ "$out" = "0: n1 10.99.0.1/16 10.99.0.1
1: n2 10.99.0.2/16 10.99.0.2
2: n3 10.99.0.3/16 10.99.0.3" ] || fail "tasks do not run in their own namespaces"

# link_rate JSON line -> Mbit/s
link_mbit() {
  local line
  line=$("${LAB_EXEC[@]}" timeout 60 srun --immediate=10 -N2 --ntasks-per-node=1 "$SLURM_TEST_DIR/link_rate.py" 3 | grep '^{') ||
    fail "link_rate.py printed no result"
  note "n2 -> n1: $line" >&2
  python3 -c 'import json, sys; d = json.loads(sys.argv[1]); assert d["from"] == "10.99.0.2", d; print(d["mbit_per_s"])' "$line" ||
    fail "the stream did not come from n2's address: $line"
}
within() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN {exit !(a >= b * (1 - tol) && a <= b * (1 + tol))}'; }
# The fastest of up to three streams, stopping at the first within 15% of RATE_MBIT: the shaping caps
# the rate, and a stream whose sender or receiver loses its CPU to the test running beside this one
# (test/run.sh runs two at a time) reads low, never high (a CI run read 120.8 of 200 that way). An
# unshaped link still fails: every try reads far above the rate.
best_mbit() {
  local want=$1 best=0 got
  for _ in 1 2 3; do
    got=$(link_mbit)
    best=$(awk -v a="$got" -v b="$best" 'BEGIN {print (a > b ? a : b)}')
    within "$best" "$want" 0.15 && break
  done
  echo "$best"
}
full=$(best_mbit "$RATE")
within "$full" "$RATE" 0.15 || fail "n2 -> n1 at $full Mbit/s; the links are shaped to $RATE"
"$LAB_SH" shape $((RATE / 2)) || fail "nslab.sh shape failed"
half=$(best_mbit $((RATE / 2)))
within "$half" $((RATE / 2)) 0.15 || fail "after shape $((RATE / 2)): $half Mbit/s"
note "link: $full Mbit/s at RATE=$RATE, $half Mbit/s at RATE=$((RATE / 2))"

addrs=$("${LAB_EXEC[@]}" timeout 30 srun --immediate=10 -N3 --ntasks-per-node=1 "$PSRUN" addr --interface eth0 | paste -sd,)
note "psrun addr --interface eth0: $addrs"
"${LAB_EXEC[@]}" timeout 30 srun --immediate=10 -N3 --ntasks-per-node=2 -l "$PSRUN" plan --json --ps 1 \
  --interface eth0 --node-addrs "$addrs" >"$OUT/plan.out" || fail "psrun plan failed: $(cat "$OUT/plan.out")"
python3 - "$OUT/plan.out" <<'PY' || fail "the map does not use each node's own address: $(cat "$OUT/plan.out")"
import json, re, sys
views = [json.loads(re.sub(r"^\s*\d+: ", "", l)) for l in open(sys.argv[1]) if l.strip()]
assert len(views) == 6, len(views)
for v in views:
    node = int(v["self"]["node"][1:])
    assert v["self"]["address"].startswith(f"10.99.0.{node}:"), v["self"]
    assert v["ps"][0].startswith("10.99.0.1:"), v["ps"]
    assert sorted({w.split(":")[0] for w in v["worker"]}) == ["10.99.0.1", "10.99.0.2", "10.99.0.3"], v["worker"]
print("plan: ps", views[0]["ps"], "workers", views[0]["worker"])
PY
note "ok"
