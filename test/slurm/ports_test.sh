#!/usr/bin/env bash
# Two jobs running at the same time on the same node (n1) get different ports: every address of both maps is
# distinct. Mode "derived": the lab has no MpiParams=ports, so psrun derives ports from --port-base, the job id,
# the step id and the local id. Mode "resv": steps get SLURM_STEP_RESV_PORTS from slurmctld.
# The tasks wait for each other (a file barrier), which proves the two jobs overlapped in time.
# Usage: ports_test.sh PSRUN derived|resv
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN derived|resv}")
MODE=${2:?usage: $0 PSRUN derived|resv}
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
case $MODE in derived) export RESV=0 ;; resv) export RESV=200 ;; *) fail "bad mode $MODE" ;; esac
TEST_NAME+="-$MODE"
lab_start 2

pids=()
for job in a b; do
  BARRIER=8 timeout 60 srun --immediate=10 -N1 -w n1 -n4 -J "ports-$job" "$SLURM_TEST_DIR/plan_task.sh" \
    "$OUT" "job$job-" "$PSRUN" plan --json --ps 1 &
  pids+=($!)
  track_pid $!
done
for i in 0 1; do
  wait "${pids[$i]}" || { tail -n +1 "$OUT"/*.err; fail "job $i: srun psrun plan failed or the jobs did not overlap"; }
done
if [ "$MODE" = derived ]; then
  ! compgen -G "$OUT/*.resv" >/dev/null || fail "the lab without MpiParams still gave SLURM_STEP_RESV_PORTS"
fi
for job in a b; do
  python3 "$SLURM_TEST_DIR/check_plan.py" --dir "$OUT" --prefix "job$job-" --ntasks 4 --ps 1 \
    || fail "job $job: the 4 views do not form the expected map"
done
python3 - "$OUT" <<'PY' || fail "the two concurrent jobs on n1 share a port"
import json, sys
d = sys.argv[1]
maps = {j: json.load(open(f"{d}/job{j}-0.json")) for j in "ab"}
addrs = {j: set(m["ps"] + m["worker"] + [m["chief"]]) for j, m in maps.items()}
print("job a:", sorted(addrs["a"]), "job b:", sorted(addrs["b"]))
assert all(a.rsplit(":", 1)[0] == "n1" for s in addrs.values() for a in s), "an address is not on n1"
sys.exit(1 if addrs["a"] & addrs["b"] else 0)
PY
