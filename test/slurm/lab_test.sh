#!/usr/bin/env bash
# The lab harness itself (no psrun needed): nodes n1..n3 are idle, a 3-node step sees the Slurm variables the
# launcher reads, node names resolve inside the sandbox (and srun in the root namespace does not need them),
# `sbatch --wait` returns the script's exit code, --resv-ports works, and `down` leaves nothing behind even with a
# step still running.
set -euo pipefail
. "$(dirname "$0")/common.sh"
lab_start 3

out=$(timeout 30 srun --immediate=10 -N3 -n6 --ntasks-per-node=2 -l bash -c \
  'echo "$SLURMD_NODENAME $SLURM_NODEID $SLURM_LOCALID $SLURM_STEP_NODELIST $SLURM_STEP_TASKS_PER_NODE $SLURM_STEP_NUM_TASKS $(getent hosts "$SLURMD_NODENAME" | cut -d" " -f1)"' | sort -n)
note "srun -N3 -n6 --ntasks-per-node=2:"$'\n'"$out"
expected="0: n1 0 0 n[1-3] 2(x3) 6 127.0.0.1
1: n1 0 1 n[1-3] 2(x3) 6 127.0.0.1
2: n2 1 0 n[1-3] 2(x3) 6 127.0.0.2
3: n2 1 1 n[1-3] 2(x3) 6 127.0.0.2
4: n3 2 0 n[1-3] 2(x3) 6 127.0.0.3
5: n3 2 1 n[1-3] 2(x3) 6 127.0.0.3"
[ "$out" = "$expected" ] || fail "unexpected step environment"
# srun itself runs outside the sandbox: it reaches the nodes through NodeAddr and never resolves n1..n3.
getent hosts n1 >/dev/null || note "n1 does not resolve outside the sandbox, and srun worked anyway"

# -m cyclic numbers ranks round-robin over the 4,1,1 allocation.
out=$(timeout 30 srun --immediate=10 -N3 -n6 -m cyclic -l printenv SLURMD_NODENAME | sort -n | tr '\n' ' ')
[ "$out" = "0: n1 1: n2 2: n3 3: n1 4: n1 5: n1 " ] || fail "cyclic layout: $out"

# --resv-ports gives every task of a step the same reserved range, inside MpiParams=ports.
out=$(timeout 30 srun --immediate=10 -N2 --ntasks-per-node=2 --resv-ports=2 printenv SLURM_STEP_RESV_PORTS | sort -u)
[[ $out =~ ^[0-9]+-[0-9]+$ ]] || fail "SLURM_STEP_RESV_PORTS: '$out'"

# sbatch --wait returns the job script's exit code; the batch shell has no SLURM_STEP_* variables.
printf '#!/bin/bash\n#SBATCH -N2 --ntasks-per-node=1 -o %s/batch.out\nenv | grep -c "^SLURM_STEP_" || true\nsrun hostname >/dev/null || exit 9\nexit 7\n' "$OUT" >"$OUT/job.sh"
rc=0
timeout 60 sbatch --wait "$OUT/job.sh" >/dev/null || rc=$?
[ "$rc" = 7 ] || fail "sbatch --wait returned $rc, expected the script's 7"
[ "$(head -n 1 "$OUT/batch.out")" = 0 ] || fail "batch shell has SLURM_STEP_* variables: $(cat "$OUT/batch.out")"

# A second lab can run at the same time (its own ports), and a step left running is ended by `down`.
LAB2=$(mktemp -d "${TMPDIR:-/tmp}/psrun-slurmlab.XXXXXX")
LAB=$LAB2 NODES=1 "$LAB_SH" up >/dev/null || fail "second lab did not come up"
out=$(SLURM_CONF=$LAB2/etc/slurm.conf timeout 30 srun --immediate=10 -n2 printenv SLURMD_NODENAME | sort -u)
LAB=$LAB2 "$LAB_SH" down >/dev/null || fail "second lab: down failed"
[ "$out" = n1 ] || fail "second lab: $out"
[ "$(grep ^PORT= "$LAB2/lab.env")" != "$(grep ^PORT= "$LAB/lab.env")" ] || fail "two labs share a port"
rm -rf "$LAB2"

timeout 60 srun --immediate=10 -N1 -n2 sleep 300 &
track_pid $!
for _ in $(seq 1 100); do
  [ -n "$(timeout 5 squeue -h -t R -o %i)" ] && break
  sleep 0.1
done
[ -n "$(timeout 5 squeue -h -t R -o %i)" ] || fail "the sleep step did not start"
note "ok (down is checked by the EXIT trap with a step still running)"
