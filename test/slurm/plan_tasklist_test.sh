#!/usr/bin/env bash
# `srun -N2 --ntasks-per-node=4 psrun plan --json --tasks ps,worker,worker,worker,ps,worker,worker,worker`:
# every rank prints its own view, all 8 agree on the same ps/worker/chief lists, exactly one ps on each node,
# and each rank's self (role, index, node) follows the task list in node-major order.
# Usage: plan_tasklist_test.sh PSRUN
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
lab_start 3

TASKS=ps,worker,worker,worker,ps,worker,worker,worker
timeout 60 srun --immediate=10 -N2 --ntasks-per-node=4 "$SLURM_TEST_DIR/plan_task.sh" "$OUT" rank- \
  "$PSRUN" plan --json --tasks "$TASKS" || { tail -n +1 "$OUT"/*.err; fail "srun psrun plan failed"; }
python3 "$SLURM_TEST_DIR/check_plan.py" --dir "$OUT" --ntasks 8 --tasks "$TASKS" --ps-per-node 1 \
  || { head -c 2000 "$OUT"/rank-0.json; fail "the 8 views do not form the expected map"; }
note "rank 0 sees: $(tr -d '\n' <"$OUT/rank-0.json")"

# The same step with the table form: it names every rank once (8 rows that mention n1 or n2).
timeout 60 srun --immediate=10 -N2 --ntasks-per-node=4 -l "$PSRUN" plan --tasks "$TASKS" >"$OUT/table.txt" \
  || fail "srun psrun plan (table) failed"
rows=$(grep -c '^0: .*\bn[12]\b' "$OUT/table.txt" || true)
[ "$rows" -ge 8 ] || { cat "$OUT/table.txt"; fail "rank 0's table lists $rows rows on n1/n2, expected 8"; }
