# shellcheck shell=bash
# Sourced by the Slurm lab tests: brings up a private lab (test/slurm/lab.sh) and tears it down on EXIT,
# then checks that no process of the lab is left (the recorded PIDs and the sandbox's PID namespace).
# Provides: lab_start [NODES], fail MSG, note MSG, bg PID registration (track_pid), $LAB, $OUT, SLURM_CONF.
# LAB_KIND=ns (set before sourcing): the network-namespace lab (nslab.sh, one namespace per node, links shaped
# to RATE Mbit/s); clients then run in the controller's namespace through the LAB_EXEC prefix
# ("${LAB_EXEC[@]}" timeout 30 srun ...), which is empty for the loopback lab.
# A test script sets `set -euo pipefail`, sources this file and calls lab_start; it exits 0 on success.

SLURM_TEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB_SH=$SLURM_TEST_DIR/lab.sh
LAB_EXEC=()
if [ "${LAB_KIND:-}" = ns ]; then
  LAB_SH=$SLURM_TEST_DIR/nslab.sh
  LAB_EXEC=("$LAB_SH" exec)
fi
TEST_NAME=$(basename "$0" .sh)
TRACKED_PIDS=()
LAB=

note() { echo "[$TEST_NAME] $*"; }
fail() {
  echo "[$TEST_NAME] FAIL: $*" >&2
  exit 1
}

# Remembers a background client (srun, sbatch) so that the EXIT trap ends it by PID.
track_pid() { TRACKED_PIDS+=("$1"); }

# Brings up a lab with $1 nodes (default 3) in a fresh temp dir and exports SLURM_CONF for the clients.
# RESV=0 in the environment: a lab without MpiParams=ports (no SLURM_STEP_RESV_PORTS in steps).
lab_start() {
  if [ "$(id -u)" != 0 ]; then
    note "SKIP: the Slurm lab needs root (slurmd, unshare)"
    exit 77
  fi
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null || fail "slurmctld/slurmd not installed (jobs/setup.sh)"
  LAB=$(mktemp -d "${TMPDIR:-/tmp}/psrun-slurmlab.XXXXXX")
  export LAB
  OUT=$LAB/out
  mkdir -p "$OUT"
  trap lab_cleanup EXIT
  trap 'exit 143' TERM INT HUP   # so that a killed test (meson timeout, Ctrl-C) still takes its lab down
  command -v tc >/dev/null && command -v nsenter >/dev/null || fail "tc/nsenter missing (jobs/setup.sh installs iproute2, util-linux)"
  NODES=${1:-3} CPUS=8 SANDBOX=1 RESV=${RESV:-200} "$LAB_SH" up >"$LAB/up.log" 2>&1 || {
    cat "$LAB/up.log" >&2
    fail "lab did not come up"
  }
  export SLURM_CONF=$LAB/etc/slurm.conf
  note "$(tail -n 1 "$LAB/up.log")"
}

# EXIT trap: stop our own clients by PID, take the lab down, verify that nothing of it survived.
lab_cleanup() {
  local rc=$? pid
  for pid in "${TRACKED_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  [ -n "$LAB" ] || exit "$rc"
  if ! "$LAB_SH" down >"$LAB/down.log" 2>&1; then
    cat "$LAB/down.log" >&2
    echo "[$TEST_NAME] FAIL: lab.sh down failed" >&2
    rc=1
  fi
  if ! lab_verify_gone; then rc=1; fi
  for pid in "${TRACKED_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$rc" = 0 ] && [ -z "${KEEP_LAB:-}" ]; then
    rm -rf "$LAB"
  else
    echo "[$TEST_NAME] lab directory kept for inspection: $LAB (logs in $LAB/log)" >&2
  fi
  exit "$rc"
}

# Independent of lab.sh: every PID recorded at `up` (with its start time) is gone, and no process is left in
# the sandbox's PID namespace.
lab_verify_gone() {
  local ok=0 pid start now st
  [ -s "$LAB/run/pids" ] || { echo "[$TEST_NAME] FAIL: $LAB/run/pids missing" >&2; return 1; }
  while read -r pid start; do
    st=$(cat "/proc/$pid/stat" 2>/dev/null) || continue
    st=${st##*) }
    now=$(cut -d' ' -f20 <<<"$st")
    if [ "$now" = "$start" ] && [ "${st:0:1}" != Z ]; then   # a zombie has ended (G11: reaped late)
      echo "[$TEST_NAME] FAIL: lab process $pid still alive after down" >&2
      ok=1
    fi
  done <"$LAB/run/pids"
  if [ -s "$LAB/run/pidns" ]; then
    local ns d
    ns=$(cat "$LAB/run/pidns")
    for d in /proc/[0-9]*; do
      if [ "$(readlink "$d/ns/pid" 2>/dev/null)" = "$ns" ]; then
        echo "[$TEST_NAME] FAIL: process ${d#/proc/} still in the lab's PID namespace $ns" >&2
        ok=1
      fi
    done
  else
    echo "[$TEST_NAME] FAIL: the sandbox's PID namespace was not recorded" >&2
    ok=1
  fi
  if [ -s "$LAB/run/netns" ]; then
    local name
    while read -r name; do
      if [ -e "/run/netns/$name" ]; then
        echo "[$TEST_NAME] FAIL: network namespace $name still exists after down" >&2
        ok=1
      fi
    done <"$LAB/run/netns"
  fi
  [ $ok = 0 ] && note "down: all $(wc -l <"$LAB/run/pids") recorded lab processes and the PID namespace are gone"
  return $ok
}
