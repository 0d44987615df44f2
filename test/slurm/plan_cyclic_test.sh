#!/usr/bin/env bash
# `srun -N3 -n6 -m cyclic psrun plan --json --ps 2 --placement spread`: Slurm allocates 4,1,1 tasks and numbers
# ranks round-robin (0=n1 1=n2 2=n3 3..5=n1), so ranks are not contiguous per node. All views agree, the 2 ps sit
# on 2 different nodes, and each rank's self.node is the node it runs on (SLURMD_NODENAME).
# Also with --resv-ports, and with -m arbitrary (an uneven hostfile layout) and a task list.
# Usage: plan_cyclic_test.sh PSRUN
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
lab_start 3

timeout 60 srun --immediate=10 -N3 -n6 -m cyclic "$SLURM_TEST_DIR/plan_task.sh" "$OUT" rank- \
  "$PSRUN" plan --json --ps 2 --placement spread || { tail -n +1 "$OUT"/*.err; fail "srun psrun plan failed"; }
layout=$(for r in 0 1 2 3 4 5; do cut -d' ' -f1 "$OUT/rank-$r.env"; done | tr '\n' ' ')
[ "$layout" = "n1 n2 n3 n1 n1 n1 " ] || fail "unexpected cyclic layout from Slurm: $layout"
python3 "$SLURM_TEST_DIR/check_plan.py" --dir "$OUT" --ntasks 6 --ps 2 --distinct-ps-nodes \
  || { head -c 2000 "$OUT"/rank-0.json; fail "the 6 views do not form the expected map"; }

# Same with --resv-ports: the addresses use the ports Slurm reserved for the step.
rm -f "$OUT"/rank-*
timeout 60 srun --immediate=10 -N3 -n6 -m cyclic --resv-ports=4 "$SLURM_TEST_DIR/plan_task.sh" "$OUT" rank- \
  "$PSRUN" plan --json --ps 2 --placement spread || { tail -n +1 "$OUT"/*.err; fail "srun --resv-ports psrun plan failed"; }
python3 "$SLURM_TEST_DIR/check_plan.py" --dir "$OUT" --ntasks 6 --ps 2 --distinct-ps-nodes \
  || fail "the 6 views (--resv-ports) do not form the expected map"
python3 - "$OUT" <<'PY' || fail "with --resv-ports, the map's ports are not the reserved ones"
import json, sys
d = sys.argv[1]
v = json.load(open(f"{d}/rank-0.json"))
text = open(f"{d}/rank-0.resv").read().strip()
reserved = set()
for part in text.split(","):
    lo, _, hi = part.partition("-")
    reserved.update(range(int(lo), int(hi or lo) + 1))
ports = [int(a.rsplit(":", 1)[1]) for a in v["ps"] + v["worker"]]
bad = [p for p in ports if p not in reserved]
print(f"reserved {text}, map ports {ports}")
sys.exit(1 if bad else 0)
PY

# -m arbitrary with an uneven hostfile (tasks 0..4 on n2 n1 n2 n3 n1 -> 2(x2),1): the task list is applied in
# node-major order (n1 local 0, n1 local 1, n2 local 0, ...), whatever the global ranks are.
rm -f "$OUT"/rank-*
printf 'n2\nn1\nn2\nn3\nn1\n' >"$OUT/hostfile"
SLURM_HOSTFILE=$OUT/hostfile timeout 60 srun --immediate=10 -n5 -m arbitrary "$SLURM_TEST_DIR/plan_task.sh" "$OUT" rank- \
  "$PSRUN" plan --json --tasks ps,worker,worker,ps,worker || { tail -n +1 "$OUT"/*.err; fail "srun -m arbitrary psrun plan failed"; }
layout=$(for r in 0 1 2 3 4; do cut -d' ' -f1 "$OUT/rank-$r.env"; done | tr '\n' ' ')
[ "$layout" = "n2 n1 n2 n3 n1 " ] || fail "unexpected arbitrary layout from Slurm: $layout"
python3 "$SLURM_TEST_DIR/check_plan.py" --dir "$OUT" --ntasks 5 --tasks ps,worker,worker,ps,worker \
  || fail "the 5 views (-m arbitrary) do not form the expected map"
