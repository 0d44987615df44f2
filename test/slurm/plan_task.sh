#!/usr/bin/env bash
# Runs as one task of a Slurm step: `srun ... plan_task.sh OUTDIR PREFIX COMMAND...`. Records where the task runs
# (OUTDIR/PREFIX<rank>.env: "SLURMD_NODENAME SLURM_NODEID SLURM_LOCALID"; PREFIX<rank>.resv: the step's
# SLURM_STEP_RESV_PORTS when set), runs COMMAND with its stdout in
# PREFIX<rank>.json, stderr in PREFIX<rank>.err, exit code in PREFIX<rank>.rc, and exits with that code.
# With BARRIER=N it then waits (at most 20 s) until N *.json files exist in OUTDIR, which proves that N tasks
# (of this and other jobs) were running at the same time; exit 3 if they were not.
out=$1 prefix=$2
shift 2
me=$out/$prefix$SLURM_PROCID
echo "${SLURMD_NODENAME:-?} ${SLURM_NODEID:-?} ${SLURM_LOCALID:-?}" >"$me.env"
[ -z "${SLURM_STEP_RESV_PORTS:-}" ] || echo "$SLURM_STEP_RESV_PORTS" >"$me.resv"
"$@" >"$me.json.tmp" 2>"$me.err"
rc=$?
mv "$me.json.tmp" "$me.json"
echo "$rc" >"$me.rc"
if [ -n "${BARRIER:-}" ]; then
  for _ in $(seq 1 200); do
    n=$(find "$out" -maxdepth 1 -name '*.json' | wc -l)
    [ "$n" -ge "$BARRIER" ] && exit "$rc"
    sleep 0.1
  done
  echo "barrier: only $n of $BARRIER tasks ran at the same time" >>"$me.err"
  exit 3
fi
exit "$rc"
