#!/usr/bin/env bash
# `psrun plan` called from the batch shell of an sbatch job (no srun, so no SLURM_STEP_* variables although
# SLURM_JOB_ID, SLURM_PROCID=0 and SLURM_NTASKS are set) must not act as rank 0 of a step: it exits 2 and
# tells the user to use srun.
# Usage: batch_shell_test.sh PSRUN
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
lab_start 2

cat >"$OUT/batch.sh" <<JOB
#!/bin/bash
#SBATCH -N2 --ntasks-per-node=2 -o $OUT/batch.out -e $OUT/batch.err
"$PSRUN" plan --json --ps 1
JOB
rc=0
timeout 60 sbatch --wait "$OUT/batch.sh" >/dev/null || rc=$?
note "sbatch --wait returned $rc; psrun said: $(cat "$OUT/batch.err")"
[ "$rc" = 2 ] || fail "psrun plan in a batch shell: exit $rc, expected 2 (stdout: $(cat "$OUT/batch.out"))"
grep -q 'srun' "$OUT/batch.err" || fail "the refusal does not tell the user to use srun"
[ ! -s "$OUT/batch.out" ] || fail "psrun printed a map in the batch shell: $(cat "$OUT/batch.out")"
