#!/usr/bin/env bash
# A real Slurm 22.05 cluster on this one host, for integration tests: one slurmctld and NODES slurmd
# (n1..nN on 127.0.0.1..N, one port each), auth/none, private slurm.conf, nothing written outside $LAB.
#
#   LAB=/tmp/lab test/slurm/lab.sh up      # start; waits (<= 30 s) until every node is idle
#   export SLURM_CONF=$LAB/etc/slurm.conf  # every client needs it (there is no /etc/slurm/slurm.conf)
#   test/slurm/lab.sh status               # daemons, nodes, jobs
#   test/slurm/lab.sh down                 # scancel all jobs, wait for the queue to empty, kill the sandbox
#
# Environment (read by `up`, recorded in $LAB/lab.env, so `down`/`status` need only LAB):
#   LAB      directory for config, state, spool, logs and pid files (required; created if missing)
#   NODES    number of slurmd (default 3)           CPUS  CPUs per node (default 8, more than the host has)
#   PORT     slurmctld port; slurmd i listens on PORT+i (default: a free random block below 32768)
#   RESV     size of the MpiParams=ports range (default 200; placed after the slurmd ports). With it, every step
#            gets SLURM_STEP_RESV_PORTS (as many ports as its largest node has tasks, or K with --resv-ports=K).
#            RESV=0: no MpiParams, so steps have no SLURM_STEP_RESV_PORTS (psrun then derives its ports).
#   SANDBOX  1 (default): everything runs in a private PID + mount namespace (`unshare`), in which $LAB/hosts
#            is bind-mounted over /etc/hosts so n1..nN resolve for the daemons and every task. `down` kills the
#            namespace by the PID of its unshare process, which ends every daemon, step and task at once.
#            0: daemons run in the host namespaces (n1..nN then do not resolve; `down` kills them by PID).
#   DEF_MEM_PER_CPU  partition DefMemPerCPU in MB (default 400; the jobs/ scripts derive --mem from it)
#
# Clients run in the root namespace need only SLURM_CONF: NodeAddr=127.0.0.i is in slurm.conf, so srun never
# resolves n1..nN itself. Every client call in this script is bounded by `timeout`. Exit status: 0 ok,
# 1 the lab did not come up / go down in time (logs are printed), 2 usage error.
set -euo pipefail

die_usage() { echo "lab.sh: $*" >&2; exit 2; }
cmd=${1:-}
[ -n "$cmd" ] || die_usage "usage: LAB=DIR [NODES=3 CPUS=8 PORT=P SANDBOX=1] lab.sh up|down|status"
[ -n "${LAB:-}" ] || die_usage "set LAB to the lab directory (e.g. LAB=\$(mktemp -d /tmp/slurmlab.XXXX))"
LAB=$(realpath -m "$LAB")
CONF=$LAB/etc/slurm.conf
# shellcheck source=test/slurm/lab_sandbox.sh
. "$(dirname "${BASH_SOURCE[0]}")/lab_sandbox.sh"

# True if none of the ports $1..$1+$2-1 is bound on this host (TCP listen or any socket).
ports_free() {
  local used
  used=$(ss -Htan 2>/dev/null | awk '{n=split($4,a,":"); print a[n]}' | sort -un)
  local p
  for ((p = $1; p < $1 + $2; p++)); do
    grep -qx "$p" <<<"$used" && return 1
  done
  return 0
}

# Picks a free block of $1 ports in 10000..32000 (below the ephemeral range, so client sockets never take them).
pick_port_block() {
  local n=$1 base _
  for _ in $(seq 1 50); do
    base=$((10000 + (RANDOM * 32768 + RANDOM) % (32000 - 10000 - n)))
    if ports_free "$base" "$n"; then echo "$base"; return 0; fi
  done
  echo "lab.sh: no free block of $n ports found" >&2
  return 1
}

write_conf() {
  local last_node_port=$((PORT + NODES)) resv_lo=$((PORT + NODES + 1))
  local resv_hi=$((PORT + NODES + RESV))
  mkdir -p "$LAB"/{etc,state,log,run}
  local n
  for ((n = 1; n <= NODES; n++)); do mkdir -p "$LAB/spool/n$n"; done
  : >"$LAB/hosts"
  echo "127.0.0.1 localhost" >>"$LAB/hosts"
  local i
  for ((i = 1; i <= NODES; i++)); do echo "127.0.0.$i n$i" >>"$LAB/hosts"; done
  cat >"$CONF" <<EOF
# Written by test/slurm/lab.sh for the lab in $LAB. Do not edit: \`lab.sh up\` rewrites it.
ClusterName=lab
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$PORT
$(slurm_conf_common)
$( ((RESV > 0)) && echo "MpiParams=ports=$resv_lo-$resv_hi")
NodeName=n[1-$NODES] NodeHostname=localhost NodeAddr=127.0.0.[1-$NODES] Port=[$((PORT + 1))-$last_node_port] CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4 DefMemPerCPU=$DEF_MEM_PER_CPU
EOF
}

# The script run as PID 1 of the sandbox (or directly with SANDBOX=0): starts the daemons, then (sandbox only)
# stays alive as the namespace's init, reaping orphans, until `down` kills the namespace.
write_init() {
  cat >"$LAB/run/init.sh" <<EOF
#!/usr/bin/env bash
set -e
export SLURM_CONF=$CONF
if [ "\${1:-}" = sandbox ]; then mount --bind $LAB/hosts /etc/hosts; fi
slurmctld -i
for ((i = 1; i <= $NODES; i++)); do slurmd -N n\$i; done
if [ "\${1:-}" = sandbox ]; then
  trap '' TERM INT HUP
  while :; do sleep 3600 & wait \$! || true; done
fi
EOF
  chmod +x "$LAB/run/init.sh"
}

do_up() {
  NODES=${NODES:-3} CPUS=${CPUS:-8} SANDBOX=${SANDBOX:-1} RESV=${RESV:-200}
  DEF_MEM_PER_CPU=${DEF_MEM_PER_CPU:-400}
  [[ $NODES =~ ^[1-9][0-9]*$ && $NODES -le 250 ]] || die_usage "NODES must be 1..250, got '$NODES'"
  [[ $CPUS =~ ^[1-9][0-9]*$ ]] || die_usage "CPUS must be a positive integer, got '$CPUS'"
  [[ $RESV =~ ^[0-9]+$ ]] || die_usage "RESV must be a number of ports (0 for none), got '$RESV'"
  if [ -e "$LAB/run/unshare.pid" ] && stamp_alive "$LAB/run/unshare.pid"; then
    die_usage "a lab is already running in $LAB: run 'LAB=$LAB lab.sh down' first"
  fi
  if [ -n "${PORT:-}" ]; then
    [[ $PORT =~ ^[0-9]+$ ]] || die_usage "PORT must be a number, got '$PORT'"
    ports_free "$PORT" $((NODES + 1 + RESV)) || { echo "lab.sh: ports $PORT..$((PORT + NODES + RESV)) are not all free" >&2; exit 1; }
  else
    PORT=$(pick_port_block $((NODES + 1 + RESV)))
  fi
  rm -rf "$LAB/state" "$LAB/spool" "$LAB/run" "$LAB/log"
  write_conf
  write_init
  printf 'NODES=%s\nCPUS=%s\nPORT=%s\nSANDBOX=%s\nRESV=%s\n' "$NODES" "$CPUS" "$PORT" "$SANDBOX" "$RESV" >"$LAB/lab.env"

  if [ "$SANDBOX" = 1 ]; then
    # setsid: the sandbox leaves our session and terminal; $! is unshare itself, since a background
    # child is never a process-group leader, so setsid execs without forking.
    setsid unshare --pid --fork --mount-proc --kill-child=SIGKILL --propagation private \
      "$LAB/run/init.sh" sandbox </dev/null >"$LAB/log/init.log" 2>&1 &
    local upid=$!
    pid_stamp "$upid" >"$LAB/run/unshare.pid"
  else
    "$LAB/run/init.sh" </dev/null >"$LAB/log/init.log" 2>&1 || { dump_logs; exit 1; }
  fi

  local deadline=$((SECONDS + 30))
  until nodes_idle; do
    if ((SECONDS >= deadline)); then
      echo "lab.sh: nodes not idle after 30 s" >&2
      client sinfo -N >&2 || true
      dump_logs
      do_down >/dev/null 2>&1 || true
      exit 1
    fi
    if [ "$SANDBOX" = 1 ] && ! stamp_alive "$LAB/run/unshare.pid"; then
      echo "lab.sh: the sandbox exited during startup" >&2
      cat "$LAB/log/init.log" >&2
      dump_logs
      exit 1
    fi
    sleep 0.05
  done
  record_pids
  echo "lab up: LAB=$LAB NODES=$NODES CPUS=$CPUS PORT=$PORT SANDBOX=$SANDBOX SLURM_CONF=$CONF"
}

# $LAB/run/pids: "<pid> <start time>" of every process of the lab as seen from the root namespace
# (the unshare process and everything in its PID namespace, or the daemons with SANDBOX=0).
record_pids() {
  local out=$LAB/run/pids
  : >"$out"
  if [ "$SANDBOX" = 1 ]; then
    record_sandbox_pids "$out"
  else
    local f p
    for f in "$LAB"/run/slurm*.pid; do
      read -r p <"$f" && pid_stamp "$p" >>"$out" || true
    done
  fi
}

load_env() {
  [ -f "$LAB/lab.env" ] || { echo "lab.sh: no lab in $LAB (no lab.env)" >&2; exit 1; }
  # shellcheck disable=SC1091
  . "$LAB/lab.env"
}

do_down() {
  load_env
  local rc=0
  # 1. cancel every job and wait (bounded) for the queue to empty: steps must not outlive slurmd (G2, G3).
  if [ -f "$CONF" ] && { [ "$SANDBOX" != 1 ] || stamp_alive "$LAB/run/unshare.pid"; }; then
    cancel_all_jobs
  fi
  # 2. kill by recorded PID, never by name.
  if [ "$SANDBOX" = 1 ]; then
    if stamp_alive "$LAB/run/unshare.pid"; then
      local upid
      read -r upid _ <"$LAB/run/unshare.pid"
      kill -KILL "$upid" 2>/dev/null || true   # unshare ignores TERM; --kill-child then ends the namespace
    fi
  else
    CLIENT_TIMEOUT=5 client scontrol shutdown >/dev/null 2>&1 || true
    sleep 0.5
    local pid start
    while read -r pid start; do
      [ "$(pid_stamp "$pid" 2>/dev/null)" = "$pid $start" ] && kill -KILL "$pid" 2>/dev/null || true
    done <"$LAB/run/pids"
  fi
  # 3. wait (bounded) until every recorded process is gone.
  wait_all_gone || rc=1
  [ $rc = 0 ] && echo "lab down: $LAB"
  return $rc
}

do_status() {
  load_env
  echo "LAB=$LAB NODES=$NODES CPUS=$CPUS PORT=$PORT SANDBOX=$SANDBOX SLURM_CONF=$CONF"
  if [ "$SANDBOX" = 1 ] && ! stamp_alive "$LAB/run/unshare.pid"; then
    echo "sandbox: not running"
    return 3
  fi
  echo "processes:"
  live_pids | sed 's/^/  /'
  client sinfo -N -o '%N %t %C' || return 1
  client squeue || return 1
}

case $cmd in
  up) do_up ;;
  down) do_down ;;
  status) do_status ;;
  *) die_usage "unknown command '$cmd' (up, down or status)" ;;
esac
