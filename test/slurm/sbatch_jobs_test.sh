#!/usr/bin/env bash
# The jobs/ sbatch scripts, submitted for real with `sbatch --wait` in plan-only mode (PSRUN_PLAN_ONLY=1: the
# same srun line and role options, with `psrun plan --json` instead of `psrun run`): each returns 0 and every
# rank's output forms the expected map (ps-standby: its ps step and worker step agree on one explicit map).
# Also: a bad sync layout is refused with exit 2 before any srun.
# Usage: sbatch_jobs_test.sh PSRUN   (run from the repository root, as meson does)
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
JOBS=$(realpath "$SLURM_TEST_DIR/../../jobs")
lab_start 3
export PSRUN PSRUN_PLAN_ONLY=1 MODEL_DIR=$OUT/model DATA_DIR=$OUT/data

# All jobs at once (they fit: oversubscribed 8-CPU nodes), each with --wait in the background.
declare -A pid
submit() {
  local name=$1
  shift
  timeout 90 sbatch --wait -o "$OUT/$name.out" -e "$OUT/$name.err" "$@" >/dev/null &
  pid[$name]=$!
  track_pid $!
}
# -w pins each job's nodes so that the expected node of every rank is known.
submit tasklist -w 'n[1-2]' "$JOBS/mnist-tasklist.sbatch"
submit 1node -w n3 "$JOBS/mnist-1node.sbatch"
submit nodes -w 'n[1-3]' "$JOBS/mnist-nodes.sbatch"
submit sync -w 'n[2-3]' "$JOBS/mnist-sync.sbatch"
REPLICAS=5 BACKUP=1 submit sync-bad "$JOBS/mnist-sync.sbatch"
submit standby -w 'n[1-2]' "$JOBS/ps-standby.sbatch"

for name in tasklist 1node nodes sync standby; do
  rc=0
  wait "${pid[$name]}" || rc=$?
  [ "$rc" = 0 ] || { cat "$OUT/$name.out" "$OUT/$name.err" >&2 || true; fail "jobs/ $name: sbatch --wait returned $rc"; }
done
rc=0
wait "${pid[sync-bad]}" || rc=$?
[ "$rc" = 2 ] || fail "mnist-sync with REPLICAS+BACKUP != workers: exit $rc, expected 2"
grep -q 'must equal' "$OUT/sync-bad.err" || fail "mnist-sync refusal does not say why: $(cat "$OUT/sync-bad.err")"

check() { python3 "$SLURM_TEST_DIR/check_plan.py" --srun-output "$OUT/$1.out" "${@:2}" || {
  cat "$OUT/$1.out"; fail "jobs/ $1: the map is not the expected one"; }; }
check tasklist --ntasks 8 --tasks ps,worker,worker,worker,ps,worker,worker,worker --ps-per-node 1 \
  --block-nodes n1,n1,n1,n1,n2,n2,n2,n2
grep -q '^memory per task: 400 MB (1 CPUs per task)$' "$OUT/tasklist.out" \
  || fail "mnist-tasklist did not derive 400 MB per task from DefMemPerCPU=400: $(grep memory "$OUT/tasklist.out")"
check 1node --ntasks 4 --ps 1 --block-nodes n3,n3,n3,n3
check nodes --ntasks 3 --ps 1 --block-nodes n1,n2,n3
check sync --ntasks 6 --ps 1 --block-nodes n2,n2,n2,n3,n3,n3

# ps-standby: a 1-task ps step and a 3-task worker step, both from one explicit TF-style map: ps 0 on n1.
python3 - "$OUT/standby.out" <<'PY' || { cat "$OUT/standby.out"; fail "jobs/ps-standby: the step maps are not the expected ones"; }
import json, re, sys
steps, cur = {}, None
for line in open(sys.argv[1]):
    if line.startswith("== "):
        cur = steps.setdefault(line[3:].strip(), [])
    elif (m := re.match(r"^\d+: (\{.*)$", line)) and cur is not None:
        cur.append(json.loads(m.group(1)))
ps, workers = steps["ps step"], steps["worker step"]
views = ps + workers
assert len(ps) == 1 and len(workers) == 3, f"{len(ps)} ps views, {len(workers)} worker views"
assert all(v["ps"] == views[0]["ps"] and v["worker"] == views[0]["worker"] for v in views), "views disagree"
assert len(views[0]["ps"]) == 1 and views[0]["ps"][0].startswith("n1:"), f"ps {views[0]['ps']}"
assert len(views[0]["worker"]) == 3, f"workers {views[0]['worker']}"
assert ps[0]["self"]["role"] == "ps" and ps[0]["self"]["index"] == 0 and ps[0]["self"]["node"] == "n1", ps[0]["self"]
assert sorted((v["self"]["role"], v["self"]["index"]) for v in workers) == [("worker", i) for i in range(3)]
print(f"ps-standby ok: ps {views[0]['ps']} | worker {views[0]['worker']}")
PY
