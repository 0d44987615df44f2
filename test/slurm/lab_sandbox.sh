# shellcheck shell=bash
# Process and client helpers shared by the lab harnesses (lab.sh: loopback nodes; nslab.sh: one network
# namespace per node). Sourced; the caller sets LAB, CONF and NODES, and optionally CLIENT_WRAP (an array
# prefixed to every client, e.g. nsenter into the namespace the controller listens in).

# Runs a Slurm client against this lab, bounded in time.
client() { SLURM_CONF=$CONF timeout "${CLIENT_TIMEOUT:-10}" ${CLIENT_WRAP[@]+"${CLIENT_WRAP[@]}"} "$@"; }

# Prints "<pid> <start time>" so that a later check cannot be fooled by a reused PID.
# Field 22 of /proc/PID/stat is the start time; the comm field before it may hold spaces, so cut after ") ".
# A zombie (state Z, waiting for a parent that may reap late: G11) has ended and counts as gone.
pid_stamp() {
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  st=${st##*) }
  [ "${st:0:1}" != Z ] || return 1
  echo "$1 $(cut -d' ' -f20 <<<"$st")"
}

# True while the process recorded as "<pid> <start time>" in file $1 still runs.
stamp_alive() {
  local pid start
  [ -s "$1" ] || return 1
  read -r pid start <"$1"
  [ "$(pid_stamp "$pid" 2>/dev/null)" = "$pid $start" ]
}

nodes_idle() { [ "$(client sinfo -h -t idle -o %D 2>/dev/null | awk '{s+=$1} END {print s+0}')" = "$NODES" ]; }

dump_logs() {
  local f
  for f in "$LAB"/log/*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 30 "$f"; }; done >&2
}

# The PID namespace of the sandbox (e.g. "pid:[4026532301]"), read from unshare's child (the init).
sandbox_ns() {
  local upid child
  read -r upid _ <"$LAB/run/unshare.pid"
  child=$(cat "/proc/$upid/task/$upid/children" 2>/dev/null | awk '{print $1}')
  [ -n "$child" ] && readlink "/proc/$child/ns/pid"
}

# PIDs (root namespace) of every process in PID namespace $1.
ns_members() {
  local d
  for d in /proc/[0-9]*; do
    [ "$(readlink "$d/ns/pid" 2>/dev/null)" = "$1" ] && echo "${d#/proc/}"
  done
  return 0
}

# Prints the recorded lab processes that still run (and, for the sandbox, anything left in its namespace).
live_pids() {
  local pid start seen=" "
  if [ -f "$LAB/run/pids" ]; then
    while read -r pid start; do
      if [ "$(pid_stamp "$pid" 2>/dev/null)" = "$pid $start" ]; then
        echo "$pid $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")"
        seen+="$pid "
      fi
    done <"$LAB/run/pids"
  fi
  if [ -s "$LAB/run/pidns" ]; then
    local p
    for p in $(ns_members "$(cat "$LAB/run/pidns")"); do
      [[ $seen == *" $p "* ]] || echo "$p $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline") (in the sandbox)"
    done
  fi
  return 0
}

all_gone() { [ -z "$(live_pids)" ]; }

# Cancels every job and waits (at most 15 s) for the queue to empty: steps must not outlive slurmd.
cancel_all_jobs() {
  local ids
  ids=$(CLIENT_TIMEOUT=5 client squeue -h -o %i 2>/dev/null || true)
  [ -n "$ids" ] || return 0
  # shellcheck disable=SC2086
  CLIENT_TIMEOUT=5 client scancel $ids 2>/dev/null || true
  local deadline=$((SECONDS + 15))
  while [ -n "$(CLIENT_TIMEOUT=5 client squeue -h -o %i 2>/dev/null || true)" ]; do
    ((SECONDS < deadline)) || { echo "lab: jobs still queued after 15 s; killing anyway" >&2; break; }
    sleep 0.1
  done
}

# Waits (at most 10 s) until every recorded lab process is gone; lists the survivors and fails otherwise.
wait_all_gone() {
  local deadline=$((SECONDS + 10))
  while ! all_gone; do
    if ((SECONDS >= deadline)); then
      echo "lab: processes still alive after down:" >&2
      live_pids >&2
      return 1
    fi
    sleep 0.05
  done
}

# Appends to file $1 the unshare process and every process of its PID namespace ("<pid> <start time>"), and
# records the namespace in $LAB/run/pidns.
record_sandbox_pids() {
  cat "$LAB/run/unshare.pid" >>"$1"
  local ns p
  ns=$(sandbox_ns) || return 0
  echo "$ns" >"$LAB/run/pidns"
  for p in $(ns_members "$ns"); do pid_stamp "$p" >>"$1" || true; done
}

# The slurm.conf lines both labs share: auth/none, files under $LAB, linuxproc without cgroups, oversubscribed
# CPUs (config_overrides), a scheduler that starts batch jobs at once (heterogeneous jobs too: only the
# backfill scheduler starts those, every bf_interval, 30 s by default, here 1 s) and `sbatch --wait` polling
# every 2 s (MinJobAge=5), no accounting. The caller adds the cluster, controller, MpiParams, node and partition lines.
slurm_conf_common() {
  cat <<EOF
SlurmUser=root
SlurmdUser=root
MailProg=/bin/true
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$LAB/state
SlurmdSpoolDir=$LAB/spool/%n
SlurmctldPidFile=$LAB/run/slurmctld.pid
SlurmdPidFile=$LAB/run/slurmd-%n.pid
SlurmctldLogFile=$LAB/log/slurmctld.log
SlurmdLogFile=$LAB/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,bf_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
InactiveLimit=0
KillWait=5
MinJobAge=5
SlurmctldTimeout=30
SlurmdTimeout=30
Waittime=0
EOF
}
