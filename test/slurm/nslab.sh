#!/usr/bin/env bash
# An emulated multi-node Slurm 22.05 cluster on this one host: every node is its own network namespace (with
# its own hostname n<i> and /dev/shm) with one link to a bridge, shaped in both directions to RATE with `tbf`.
# Traffic between tasks on different nodes crosses two shaped links (the sender's uplink, the receiver's
# downlink), as on a cluster switch; tasks on one node talk over that node's loopback. The controller lives
# in a namespace of its own that holds the bridge; clients (srun, sbatch, squeue) must run there: use
# `nslab.sh exec CMD...`. netem is not available on these kernels, so latency stays loopback's.
#
#   LAB=/tmp/nl NODES=3 RATE=1000 test/slurm/nslab.sh up    # waits (<= 30 s) until every node is idle
#   LAB=/tmp/nl test/slurm/nslab.sh exec srun -N3 hostname  # n1 n2 n3
#   LAB=/tmp/nl test/slurm/nslab.sh shape 100               # re-shape every link to 100 Mbit/s (0: unshaped)
#   LAB=/tmp/nl test/slurm/nslab.sh stats                   # per node: bytes sent and received on its link
#   LAB=/tmp/nl test/slurm/nslab.sh link 1 down             # node 1's link down (a flapping switch port); `up` again
#   LAB=/tmp/nl test/slurm/nslab.sh down                    # scancel, kill the sandbox, delete the namespaces
#
# Environment (read by `up`, recorded in $LAB/lab.env):
#   LAB    directory for config, state, spool, logs, pid files and the hosts file (required)
#   NODES  number of nodes, 1..200 (default 3)     CPUS  CPUs per node (default 8)
#   RATE   link rate in Mbit/s per direction (default 1000; 0: unshaped)
#   NET    first two octets of the lab's /16 (default 10.99): node i is NET.0.i, the controller NET.0.254
#   SLURM  1 (default), or 0 for the network only (no Slurm, no sandbox): run processes on node N with
#          `nslab.sh on N CMD...` (bench/scale.py does); `down` deletes the namespaces
# Namespaces are named after a hash of LAB (psl<hash>c, psl<hash>n<i>), so labs in different directories can
# run side by side. Everything the lab starts runs in one PID namespace (`unshare`), killed by PID at `down`.
# Exit status: 0 ok, 1 the lab did not come up / go down, 2 usage error.
set -euo pipefail

die_usage() { echo "nslab.sh: $*" >&2; exit 2; }
cmd=${1:-}
[ -n "$cmd" ] || die_usage "usage: LAB=DIR [NODES=3 RATE=1000 NET=10.99] nslab.sh up|down|status|stats|shape MBIT|link N up|down|exec CMD...|on N CMD..."
[ -n "${LAB:-}" ] || die_usage "set LAB to the lab directory (e.g. LAB=\$(mktemp -d /tmp/nslab.XXXX))"
LAB=$(realpath -m "$LAB")
CONF=$LAB/etc/slurm.conf
PFX=psl$(printf '%s' "$LAB" | md5sum | cut -c1-6)
CTL_NS=${PFX}c
CLIENT_WRAP=(nsenter "--net=/run/netns/$CTL_NS")
# shellcheck source=test/slurm/lab_sandbox.sh
. "$(dirname "${BASH_SOURCE[0]}")/lab_sandbox.sh"

node_ns() { echo "${PFX}n$1"; }
in_ns() { local ns=$1; shift; nsenter "--net=/run/netns/$ns" "$@"; }

# tbf on one interface: RATE Mbit/s, a bucket of 1 ms at that rate (at least 16 kB; tbf segments larger GSO
# packets itself) and a queue of 50 ms. A small bucket keeps a message from riding a burst at memory speed: a
# 10 ms bucket had let a 318 KB push at 100 Mbit/s through 12% faster than the rate allows. RATE 0: unshaped.
shape_dev() {
  local ns=$1 dev=$2 mbit=$3
  in_ns "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
  ((mbit > 0)) || return 0
  local burst=$((mbit * 1000000 / 8 / 1000))
  ((burst >= 16000)) || burst=16000
  in_ns "$ns" tc qdisc add dev "$dev" root tbf rate "${mbit}mbit" burst "$burst" latency 400ms
}

shape_all() {
  local i
  for ((i = 1; i <= NODES; i++)); do
    shape_dev "$(node_ns "$i")" eth0 "$1"   # node -> bridge (upload)
    shape_dev "$CTL_NS" "p$i" "$1"          # bridge -> node (download)
  done
}

make_network() {
  ip netns add "$CTL_NS"
  in_ns "$CTL_NS" ip link set lo up
  in_ns "$CTL_NS" ip link add br0 type bridge
  in_ns "$CTL_NS" ip addr add "$NET.0.254/16" dev br0
  in_ns "$CTL_NS" ip link set br0 up
  local i ns
  for ((i = 1; i <= NODES; i++)); do
    ns=$(node_ns "$i")
    ip netns add "$ns"
    ip link add "${PFX}e$i" netns "$ns" type veth peer name "p$i" netns "$CTL_NS"
    in_ns "$ns" ip link set "${PFX}e$i" name eth0
    in_ns "$ns" ip addr add "$NET.0.$i/16" dev eth0
    in_ns "$ns" ip link set lo up
    in_ns "$ns" ip link set eth0 up
    in_ns "$CTL_NS" ip link set "p$i" master br0
    in_ns "$CTL_NS" ip link set "p$i" up
  done
  shape_all "$RATE"
}

delete_network() {
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${PFX}(c|n[0-9]+)$" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
}

write_conf() {
  mkdir -p "$LAB"/{etc,state,log,run}
  local i
  for ((i = 1; i <= NODES; i++)); do mkdir -p "$LAB/spool/n$i"; done
  { echo "127.0.0.1 localhost"; echo "$NET.0.254 ctl"
    for ((i = 1; i <= NODES; i++)); do echo "$NET.0.$i n$i"; done; } >"$LAB/hosts"
  cat >"$CONF" <<EOF
# Written by test/slurm/nslab.sh for the lab in $LAB. Do not edit: \`nslab.sh up\` rewrites it.
ClusterName=nslab
SlurmctldHost=ctl($NET.0.254)
SlurmctldPort=6817
SlurmdPort=6818
$(slurm_conf_common)
MpiParams=ports=20000-20199
NodeName=n[1-$NODES] NodeHostname=n[1-$NODES] NodeAddr=$NET.0.[1-$NODES] CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4 DefMemPerCPU=400
EOF
}

# PID 1 of the sandbox: hosts file, slurmctld in the controller's namespace, one slurmd per node namespace
# (nsenter, not `ip netns exec`, which remounts /sys and breaks slurmd's cgroup plugin), then reaps orphans.
write_init() {
  cat >"$LAB/run/init.sh" <<EOF
#!/usr/bin/env bash
set -e
export SLURM_CONF=$CONF
mount --bind $LAB/hosts /etc/hosts
nsenter --net=/run/netns/$CTL_NS unshare --uts sh -c "hostname ctl && exec slurmctld -i"
for ((i = 1; i <= $NODES; i++)); do
  # Its own UTS namespace (hostname n<i>) and mount namespace with a private /dev/shm: tasks on one node
  # share memory (psrun's shared-memory exchange), tasks on different nodes cannot, as on real hosts.
  nsenter --net=/run/netns/${PFX}n\$i unshare --uts --mount --propagation private \\
    sh -c "mount -t tmpfs -o size=2g,mode=1777 tmpfs /dev/shm && hostname n\$i && exec slurmd -N n\$i"
done
trap '' TERM INT HUP
while :; do sleep 3600 & wait \$! || true; done
EOF
  chmod +x "$LAB/run/init.sh"
}

load_env() {
  [ -f "$LAB/lab.env" ] || { echo "nslab.sh: no lab in $LAB (no lab.env)" >&2; exit 1; }
  # shellcheck disable=SC1091
  . "$LAB/lab.env"
}

do_up() {
  local i
  NODES=${NODES:-3} CPUS=${CPUS:-8} RATE=${RATE:-1000} NET=${NET:-10.99}
  [[ $NODES =~ ^[1-9][0-9]*$ && $NODES -le 200 ]] || die_usage "NODES must be 1..200, got '$NODES'"
  [[ $CPUS =~ ^[1-9][0-9]*$ ]] || die_usage "CPUS must be a positive integer, got '$CPUS'"
  [[ $RATE =~ ^[0-9]+$ ]] || die_usage "RATE must be Mbit/s as an integer (0: unshaped), got '$RATE'"
  [[ $NET =~ ^[0-9]{1,3}\.[0-9]{1,3}$ ]] || die_usage "NET must be two octets such as 10.99, got '$NET'"
  if [ -e "$LAB/run/unshare.pid" ] && stamp_alive "$LAB/run/unshare.pid"; then
    die_usage "a lab is already running in $LAB: run 'LAB=$LAB nslab.sh down' first"
  fi
  [ -z "$(ip netns list | awk '{print $1}' | grep -E "^${PFX}(c|n[0-9]+)$" || true)" ] ||
    die_usage "namespaces ${PFX}* exist already: run 'LAB=$LAB nslab.sh down' first"
  rm -rf "$LAB/state" "$LAB/spool" "$LAB/run" "$LAB/log"
  write_conf
  write_init
  printf 'NODES=%s\nCPUS=%s\nRATE=%s\nNET=%s\nSANDBOX=1\n' "$NODES" "$CPUS" "$RATE" "$NET" >"$LAB/lab.env"
  { echo "$CTL_NS"; for ((i = 1; i <= NODES; i++)); do node_ns "$i"; done; } >"$LAB/netns"
  make_network || { delete_network; echo "nslab.sh: could not create the namespaces and links" >&2; exit 1; }
  if [ "${SLURM:-1}" = 0 ]; then   # the network only: start processes with `nslab.sh on NODE CMD...`
    mv "$LAB/netns" "$LAB/run/netns"
    : >"$LAB/run/pids"
    echo "nslab up (network only): LAB=$LAB NODES=$NODES RATE=${RATE} Mbit/s, node i at $NET.0.i"
    return 0
  fi

  setsid unshare --pid --fork --mount-proc --kill-child=SIGKILL --propagation private \
    "$LAB/run/init.sh" </dev/null >"$LAB/log/init.log" 2>&1 &
  pid_stamp $! >"$LAB/run/unshare.pid"

  local deadline=$((SECONDS + 30))
  until nodes_idle; do
    if ((SECONDS >= deadline)) || ! stamp_alive "$LAB/run/unshare.pid"; then
      echo "nslab.sh: nodes not idle after $((SECONDS - deadline + 30)) s" >&2
      cat "$LAB/log/init.log" >&2
      dump_logs
      do_down >/dev/null 2>&1 || true
      exit 1
    fi
    sleep 0.05
  done
  mv "$LAB/netns" "$LAB/run/netns"   # the namespaces, for an independent check after down
  : >"$LAB/run/pids"
  record_sandbox_pids "$LAB/run/pids"
  echo "nslab up: LAB=$LAB NODES=$NODES RATE=${RATE} Mbit/s NET=$NET.0.0/16 namespaces ${PFX}c ${PFX}n1..$NODES"
}

do_down() {
  load_env
  local rc=0
  if [ -f "$CONF" ] && stamp_alive "$LAB/run/unshare.pid"; then
    cancel_all_jobs
    local upid
    read -r upid _ <"$LAB/run/unshare.pid"
    kill -KILL "$upid" 2>/dev/null || true   # unshare ignores TERM; --kill-child then ends the namespace
  fi
  [ -f "$LAB/run/pids" ] && { wait_all_gone || rc=1; }
  delete_network
  if [ -n "$(ip netns list | awk '{print $1}' | grep -E "^${PFX}(c|n[0-9]+)$" || true)" ]; then
    echo "nslab.sh: namespaces ${PFX}* still exist" >&2
    rc=1
  fi
  [ $rc = 0 ] && echo "nslab down: $LAB"
  return $rc
}

case $cmd in
  up) do_up ;;
  down) do_down ;;
  status)
    load_env
    echo "LAB=$LAB NODES=$NODES RATE=$RATE NET=$NET"
    live_pids | sed 's/^/  /'
    client sinfo -N -o '%N %t %C' && client squeue ;;
  shape)
    load_env
    [[ ${2:-} =~ ^[0-9]+$ ]] || die_usage "shape needs a rate in Mbit/s (0: unshaped)"
    shape_all "$2"
    sed -i "s/^RATE=.*/RATE=$2/" "$LAB/lab.env" ;;
  stats)
    # One JSON line per node: bytes it sent (up) and received (down) on its link since `up`.
    load_env
    for ((i = 1; i <= NODES; i++)); do
      in_ns "$(node_ns "$i")" ip -j -s link show dev eth0 | python3 -c '
import json, sys
s = json.load(sys.stdin)[0]["stats64"]
print(json.dumps({"node": sys.argv[1], "up_bytes": s["tx"]["bytes"], "down_bytes": s["rx"]["bytes"]}))' "n$i"
    done ;;
  link)
    # Node N's link down or up (`ip link set eth0 down|up` in its namespace): every connection of the node stalls
    # (no packet in or out, no reset), as when its switch port flaps or its switch reboots. The link keeps its
    # shaping; `up` restores its route.
    load_env
    [[ ${2:-} =~ ^[0-9]+$ ]] && ((${2} >= 1 && ${2} <= NODES)) || die_usage "link needs a node number 1..$NODES"
    [[ ${3:-} == up || ${3:-} == down ]] || die_usage "link needs up or down after the node number"
    in_ns "$(node_ns "$2")" ip link set eth0 "$3" ;;
  on)
    # Runs CMD in node N's network namespace (not in the sandbox: node names do not resolve, use NET.0.N).
    load_env
    [[ ${2:-} =~ ^[0-9]+$ ]] && ((${2} >= 1 && ${2} <= NODES)) || die_usage "on needs a node number 1..$NODES"
    node=$2
    shift 2
    [ $# -gt 0 ] || die_usage "on needs a command"
    # A private /dev/shm per command: processes started on different nodes must not find each other's
    # shared-memory segments (nor can two commands on one node: they talk over the node's loopback).
    exec nsenter "--net=/run/netns/$(node_ns "$node")" unshare --mount --propagation private \
      sh -c 'mount -t tmpfs -o size=2g,mode=1777 tmpfs /dev/shm && exec "$@"' on-node "$@" ;;
  exec)
    load_env
    shift
    [ $# -gt 0 ] || die_usage "exec needs a command"
    SLURM_CONF=$CONF exec "${CLIENT_WRAP[@]}" "$@" ;;
  *) die_usage "unknown command '$cmd' (up, down, status, stats, shape, link, exec or on)" ;;
esac
