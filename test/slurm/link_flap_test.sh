#!/usr/bin/env bash
# A network that blinks is not a dead parameter server, on the network-namespace lab (nslab.sh: one namespace per
# node, links shaped to RATE Mbit/s, real Slurm): three jobs at once, each 1 psd on n1, the chief on n2 and worker
# 1 on n3 (`psrun run --ps 1 --placement spread`, MAC auth, dls_mlp on real MNIST, checkpoints every 3 s), with
# --worker-timeout 6 and --heartbeat-timeout 3 so that both sides declare the other lost during a flap:
#   async and sync  --reconnect-wait 40: n1's link goes down for FLAP s (every psd cut off), then n2's (both chiefs
#                   cut off). Checks: every rank exits 0, psd applied all the job's updates and ended with nobody dead,
#                   the workers reconnected to the same psd ("same instance, continuing"), psd took the chief back
#                   ("spoke again"), and nothing was restored.
#   short           --reconnect-wait 4, cut off by the same n1 flap: a worker gives up with the message within
#                   --heartbeat-timeout + --reconnect-wait (+ 2 s of slack) and the job fails (srun's
#                   --kill-on-bad-exit ends the others); its rerun (same command, after the flaps) restores the
#                   newest checkpoint the first run committed and finishes.
# The jobs are started with srun from the controller's namespace (a login node: the flaps do not cut the client
# off). Prints the measured times. Usage: link_flap_test.sh PSRUN (from the repository root, as meson runs it).
# RATE, FLAP, ASYNC_STEPS and SYNC_STEPS may be set in the environment.
set -euo pipefail
LAB_KIND=ns
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
. "$SLURM_TEST_DIR/train_util.sh"
RATE=${RATE:-200} FLAP=${FLAP:-20}
# Steps per job: each job must still be training when the second flap starts, also on a quiet host (async runs
# about twice as fast as sync).
ASYNC_STEPS=${ASYNC_STEPS:-1200} SYNC_STEPS=${SYNC_STEPS:-800}
SHORT_STEPS=800  # it only has to run into the first flap; its rerun does the rest
HB=3 SHORT_WAIT=4
export RATE
lab_start 3
DATA=$(mnist_dir)

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }

# start_job NAME STEPS WAIT [psrun options]: in the background; output in $OUT/NAME.out (srun -l: rank 0 psd,
# 1 chief, 2 worker 1), the srun's PID in PID_<NAME>, the steps in STEPS_<NAME>.
start_job() {
  local name=$1 steps=$2 wait=$3
  shift 3
  "${LAB_EXEC[@]}" timeout 400 srun -J "flap-$name" --kill-on-bad-exit=1 -l -N3 -n3 --ntasks-per-node=1 -c1 \
    --resv-ports=1 -w 'n[1-3]' "$PSRUN" run --ps 1 --placement spread --worker-timeout 6 --reconnect-wait "$wait" \
    "$@" -- --data-dir "$DATA" --model-dir "$OUT/${name%2}.model" --model dls_mlp --batch-size 100 --steps "$steps" \
    --learning-rate 1e-3 --optimizer adam --heartbeat-timeout $HB --checkpoint-secs 3 --eval-every 0 \
    --log-every 50 --threads 1 >"$OUT/$name.out" 2>&1 &
  track_pid $!
  printf -v "PID_$name" %s $!
  printf -v "STEPS_$name" %s "$steps"
}

# wait_until LIMIT CMD...: polls CMD every 0.2 s; fails after LIMIT s.
wait_until() {
  local limit=$1 t0
  t0=$(now)
  shift
  until "$@"; do
    awk -v a="$t0" -v b="$(now)" -v l="$limit" 'BEGIN {exit !(b - a > l)}' && return 1
    sleep 0.2
  done
}
has_line() { grep -Eq -- "$2" "$OUT/$1.out" 2>/dev/null; }
count_lines() { grep -Ec -- "$2" "$OUT/$1.out" 2>/dev/null || true; }

# link_down NODE: takes its link down, FLAP_T0 = when.
link_down() {
  "$LAB_SH" link "$1" down || fail "nslab.sh link $1 down failed"
  FLAP_T0=$(now)
  note "n$1's link down"
}
flap_over() { awk -v a="$FLAP_T0" -v b="$(now)" -v f="$FLAP" 'BEGIN {exit !(b - a >= f)}'; }

T_START=$(now)
start_job async "$ASYNC_STEPS" 40
start_job sync "$SYNC_STEPS" 40 --sync
start_job short "$SHORT_STEPS" $SHORT_WAIT
for j in async sync short; do
  wait_until 150 chief_at $j 50 || job_fail $j "no progress to step 50"
done
wait_until 60 has_line short '^ *1: .*checkpoint at step' || job_fail short "no checkpoint before the flap"
note "steps before the flaps: async $(chief_step async), sync $(chief_step sync), short $(chief_step short)"

# 1. The psd host's link blinks.
link_down 1
short_gave_up=
until flap_over; do
  if [ -z "$short_gave_up" ] && has_line short '^ *[12]: .*did not answer for .*giving up'; then
    short_gave_up=$(since "$FLAP_T0")
  fi
  sleep 0.1
done
"$LAB_SH" link 1 up || fail "nslab.sh link 1 up failed"
note "n1's link up after $(since "$FLAP_T0") s; the short job gave up ${short_gave_up:-never} s after it went down"
[ -n "$short_gave_up" ] || job_fail short "its workers did not give up during a ${FLAP} s flap with --reconnect-wait $SHORT_WAIT"
awk -v t="$short_gave_up" -v l=$((HB + SHORT_WAIT + 2)) 'BEGIN {exit !(t <= l)}' ||
  job_fail short "gave up $short_gave_up s after the link went down: more than --heartbeat-timeout $HB + --reconnect-wait $SHORT_WAIT + 2"
for j in async sync; do
  wait_until 40 has_line $j '^ *2: .*answers again after .*same instance, continuing' ||
    job_fail $j "worker 1 did not reconnect to the same psd within 40 s of n1's link coming back"
done
step_after=$(chief_step async)
wait_until 60 chief_at async $((step_after + 100)) || job_fail async "no progress after n1's flap"

# The short job's every rank ended during the flap: the workers (one gave up, srun's --kill-on-bad-exit ended the
# other) and its psd, which waited --reconnect-wait for them after --worker-timeout. Slurm's own step cleanup can
# take minutes after a node was unreachable (srun waits for n1's slurmstepd): that is Slurm's, so the client is
# stopped here.
wait_until 30 has_line short '^ *0: .*\[psd:0\] exiting with code 1' || job_fail short "its psd did not exit 1"
expect_line short 'srun: error: n2: task 1: Exited with exit code 1' "the short job's chief exited 1"
kill -TERM "$PID_short" 2>/dev/null || true
wait "$PID_short" && fail "the short job exited 0 although its psd was cut off longer than its budget"
"${LAB_EXEC[@]}" timeout 10 scancel -n flap-short 2>/dev/null || true

# 2. A worker host's link blinks (n2: both chiefs).
link_down 2
until flap_over; do sleep 0.1; done
"$LAB_SH" link 2 up || fail "nslab.sh link 2 up failed"
note "n2's link up after $(since "$FLAP_T0") s"

# The short job's rerun resumes from the newest checkpoint its first run committed.
expect_line short "^ *[12]: .*ps 0 \(tcp://[^)]*\) did not answer for [0-9.]+ s \(--heartbeat-timeout $HB s \+ --reconnect-wait $SHORT_WAIT s\): giving up" \
  "the workers' message"
last_ckpt=$(grep -Eo '^ *1: .*checkpoint at step [0-9]+ written' "$OUT/short.out" | sed -E 's/.*step ([0-9]+) .*/\1/' | tail -n 1)
start_job short2 "$SHORT_STEPS" $SHORT_WAIT

rc=0
for j in async sync short2; do
  pid_var=PID_$j
  wait "${!pid_var}" || rc=$?
  [ "$rc" = 0 ] || job_fail $j "srun returned $rc"
  note "$j: srun returned 0, $(since "$T_START") s after the first job started"
  expect_no_task_failure $j
  steps_var=STEPS_$j
  stats=$(grep -E '^ *0: .*\[psd:0\] exiting with code 0 \(' "$OUT/$j.out" | sed 's/^[^(]*(//; s/)$//') ||
    job_fail $j "psd did not exit 0"
  python3 - "$stats" "${!steps_var}" <<'PY' || job_fail $j "psd statistics: $stats"
import json, sys
s, steps = json.loads(sys.argv[1]), int(sys.argv[2])
assert s["step"] == steps, f"psd at step {s['step']}, expected {steps}"
assert s["workers_dead"] == [] and s["nonfinite"] == 0, s
PY
done
expect_line short2 "^ *1: .*restored global step $last_ckpt from " "the rerun restores the first run's newest checkpoint (step $last_ckpt)"

for j in async sync; do
  # Nothing restored: every update psd applied is one of this run's gradients, applied once.
  stats=$(grep -E '^ *0: .*\[psd:0\] exiting with code 0 \(' "$OUT/$j.out" | sed 's/^[^(]*(//; s/)$//')
  steps_var=STEPS_$j
  python3 - "$stats" "${!steps_var}" <<'PY' || job_fail $j "psd did not apply exactly ${!steps_var} updates: $stats"
import json, sys
s, steps = json.loads(sys.argv[1]), int(sys.argv[2])
assert s["applied"] == steps, f"applied {s['applied']} updates, expected {steps}"
PY
  ! has_line $j 'restored|RESTORE' || job_fail $j "something was restored from a checkpoint"
  (($(count_lines $j '^ *1: .*answers again after .*same instance, continuing') >= 2)) ||
    job_fail $j "the chief did not reconnect to the same psd after both flaps"
  expect_line $j '^ *0: .*worker 0 spoke again' "psd took the chief back after n2's flap"
  note "$j: $(grep -Eo '^ *[12]: .*answers again after [0-9.]+ s' "$OUT/$j.out" | sed -E 's/^ *([12]): .*after ([0-9.]+) s/rank \1 after \2 s/' | paste -sd, -)"
  note "$j: psd: $(grep -Eo 'worker [01] spoke again [0-9.]+ s after' "$OUT/$j.out" | paste -sd, -)"
done
note "ok: async ($ASYNC_STEPS steps) and sync ($SYNC_STEPS steps) survived ${FLAP} s flaps of n1 and n2 (every update applied, nothing restored); --reconnect-wait $SHORT_WAIT gave up after $short_gave_up s and the rerun resumed at step $last_ckpt"
