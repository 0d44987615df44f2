#!/usr/bin/env bash
# Workers that join a running job (issue 38, docs/reliability.md "Workers that join (`psrun join`)") on the Slurm
# lab, the joiners as a second job step of the same job. A 3-node job's first step is `srun psrun run --ps 1
# --placement spread --max-workers 4 --min-workers 2` (psd on n1, the chief on n2, worker 1 on n3; tcp with the
# job key's MAC between the nodes), dls_mlp on real MNIST on data chunks (--data-chunks 60), STEPS async steps
# of batch 100, 1 thread per task. psrun run's ps 0 writes <model-dir>/.psrun/join.json. Once the chief logged
# ~30% of the steps, the test starts the joiners from outside the job as its second step: `srun --overlap
# --jobid JOB -N2 -n2 -w n[2-3] psrun join --threads 1 -- (the same training options)`: each finds psd through
# the join file in the shared model dir (not through the step's own SLURM_* variables), psd 0 hands them slots 2
# and 3. At ~60% the test SIGKILLs the workerd of the step's task 1 by PID; psd drops it (--worker-timeout 3).
# Checks: sbatch --wait returns 0, no task of the first step failed, psd left through its done-queue with exit
# 0; the join file named psd's tcp endpoint, the job's key file and run id slurm-JOB; the surviving joiner
# ended 0 at the last step; summary.json lists both joins after the start and the killed one as dropped; every
# complete epoch counted exactly 60,000 examples, none inexact; the test accuracy is within 1 point of the same
# job run undisturbed first (nobody joins), and both are printed.
# Usage: join_test.sh PSRUN   (from the repository root, as meson runs it). STEPS=N to change the steps.
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
. "$SLURM_TEST_DIR/train_util.sh"
STEPS=${STEPS:-60000}
lab_start 3
DATA=$(mnist_dir)

# train_opts NAME: TRAIN=(the training options of job NAME and of its joiners; psrun join needs the same,
# --data-chunks among them).
train_opts() {
  TRAIN=(--model dls_mlp --data-dir "$DATA" --model-dir "$OUT/$1.model" --batch-size 100 --steps "$STEPS"
         --data-chunks 60 --log-every 500 --eval-every 0 --threads 1)
}

# write_job NAME: the job script: one step, 1 psd + 2 workers with room for 2 more.
write_job() {
  train_opts "$1"
  cat >"$OUT/$1.sbatch.sh" <<JOB
#!/usr/bin/env bash
set -euo pipefail
RESV=()
scontrol show config 2>/dev/null | grep -Eq '^MpiParams +=.*ports=' && RESV=(--resv-ports=1)
srun --kill-on-bad-exit=1 -l -N3 -n3 --ntasks-per-node=1 -c1 --mem=600M "\${RESV[@]}" \\
  "$PSRUN" run --ps 1 --placement spread --max-workers 4 --min-workers 2 --worker-timeout 3 -- ${TRAIN[*]}
JOB
}

# submit NAME: sbatch --wait in the background (tracked); sets SB_PID and JOB_ID.
submit() {
  local name=$1
  write_job "$name"
  timeout 400 sbatch --wait -N3 --ntasks-per-node=1 -c1 --time=10 -o "$OUT/$name.out" \
    "$OUT/$name.sbatch.sh" >"$OUT/$name.sbatch" 2>&1 &
  SB_PID=$!
  track_pid "$SB_PID"
  for _ in $(seq 1 100); do
    JOB_ID=$(grep -Eo 'Submitted batch job [0-9]+' "$OUT/$name.sbatch" 2>/dev/null | awk '{print $4}' || true)
    [ -n "$JOB_ID" ] && return 0
    sleep 0.1
  done
  fail "$name: no job id from sbatch: $(cat "$OUT/$name.sbatch")"
}

# wait_for NAME LIMIT WHAT CMD...: polls CMD every 0.2 s until it succeeds; fails after LIMIT s or when the job's
# sbatch --wait is gone.
wait_for() {
  local name=$1 limit=$2 what=$3 t0=$SECONDS
  shift 3
  until "$@"; do
    kill -0 "$SB_PID" 2>/dev/null || job_fail "$name" "the job ended before $what"
    ((SECONDS - t0 < limit)) || job_fail "$name" "no $what within $limit s"
    sleep 0.2
  done
}

finish() {  # finish NAME: waits for sbatch --wait, checks rc 0, no failed task, psd's done-queue
  JOB_RC=0
  wait "$SB_PID" || JOB_RC=$?
  note "$1: job $JOB_ID: sbatch --wait returned $JOB_RC"
  [ "$JOB_RC" = 0 ] || job_fail "$1" "sbatch --wait returned $JOB_RC"
  expect_no_task_failure "$1"
  expect_line "$1" "^ *0: .*exec psd --index 0 --ps tcp://n1:[0-9]+ --num-workers 2 .*--max-workers 4" \
    "rank 0 execs psd with room for 4 workers"
  expect_line "$1" "^ *0: .*exiting with code 0" "psd (rank 0) exit code"
}

# 1. Undisturbed: nobody joins.
t0=$SECONDS
submit ref
finish ref
expect_psd_done_queue ref 0 2
note "undisturbed run: $((SECONDS - t0)) s"

# 2. Two joiners as the job's second step at ~30%, one SIGKILLed at ~60%.
t0=$SECONDS
submit join
join_file=$OUT/join.model/.psrun/join.json
wait_for join 300 "join file $join_file" test -s "$join_file"
joined_line() { grep -Eq "^ *0: .*room for 2 more workers \(--max-workers 4\): psrun join .*\($join_file\)" "$OUT/join.out"; }
wait_for join 30 "psrun run's line about the join file" joined_line
note "join file: $(tr -d ' \n' <"$join_file")"
python3 - "$join_file" "$JOB_ID" "$OUT/join.model" <<'PY' || job_fail join "the join file is not the job's"
import json, os, re, sys
j, job, model = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
assert re.fullmatch(r"tcp://n1:\d+", j["ps"]), j["ps"]
assert j["num_workers"] == 2 and j["max_workers"] == 4, j
assert j["run_id"] == f"slurm-{job}", j["run_id"]
assert not j["no_auth"] and os.path.isfile(j["key_file"]), j["key_file"]
assert os.path.dirname(j["key_file"]).startswith(model), j["key_file"]  # on the shared model dir
PY
wait_for join 300 "chief step $((STEPS * 3 / 10))" chief_at join $((STEPS * 3 / 10))
joined_at=$(chief_step join)
train_opts join
timeout 300 srun --overlap --jobid "$JOB_ID" -N2 -n2 --ntasks-per-node=1 -w 'n[2-3]' --mem=400M -l \
  "$PSRUN" join --threads 1 -- "${TRAIN[@]}" >"$OUT/joiners.out" 2>&1 &
JOINERS=$!
track_pid "$JOINERS"
note "job $JOB_ID: joiners started as a second step at the chief's step $joined_at of $STEPS"
two_joined() { [ "$(grep -Ec '^ *0: .*join: worker [0-9]+ joined the run' "$OUT/join.out")" -ge 2 ]; }
wait_for join 120 "two joins logged by psd" two_joined

# The workerd of the joiners' task 1 (psrun join exec'd it: its environment is the step's), found in /proc.
joiner_pid() {
  local pid env
  for pid in $(pgrep -f -- 'workerd --join '); do
    env=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null) || continue
    grep -qx "SLURM_JOB_ID=$JOB_ID" <<<"$env" && grep -qx 'SLURM_PROCID=1' <<<"$env" &&
      ! grep -qx 'SLURM_STEP_ID=0' <<<"$env" && { echo "$pid"; return 0; }
  done
  return 1
}
victim_slot=$(grep -Eo '^ *1: .*handed out worker slot [0-9]+' "$OUT/joiners.out" | awk '{print $NF}' | head -n 1)
[ -n "$victim_slot" ] || fail "no slot in the joiners' task 1 output: $(tail -n 20 "$OUT/joiners.out")"
victim=$(joiner_pid) || fail "no workerd --join of job $JOB_ID task 1 in /proc"
wait_for join 300 "chief step $((STEPS * 6 / 10))" chief_at join $((STEPS * 6 / 10))
killed_at=$(chief_step join)
kill -KILL "$victim"
note "SIGKILLed joiner task 1 (workerd pid $victim, worker $victim_slot) at the chief's step $killed_at"
dropped() { grep -Eq "^ *0: .*elastic: worker $victim_slot dropped" "$OUT/join.out"; }
wait_for join 60 "drop of worker $victim_slot" dropped
finish join
expect_line join "^ *0: .*elastic: the run is over with 3 workers \\(--min-workers 2\\); dropped: worker $victim_slot" \
  "psd ends the run with 3 workers and the dropped one"
note "run with joiners: $((SECONDS - t0)) s"
JOINERS_RC=0
wait "$JOINERS" || JOINERS_RC=$?
[ "$JOINERS_RC" != 0 ] || fail "the joiners' step ended 0 although its task 1 was SIGKILLed"
grep -Eq '^ *0: .*done: [0-9]+ steps by this worker .*global step '"$STEPS"';' "$OUT/joiners.out" ||
  fail "the surviving joiner (task 0) did not finish at step $STEPS: $(tail -n 30 "$OUT/joiners.out")"
if grep -E 'srun: error: .*task 0: ' "$OUT/joiners.out" >&2; then fail "the surviving joiner failed"; fi
grep -Eq 'srun: error: .*task 1: Killed' "$OUT/joiners.out" || fail "srun did not report task 1 killed"
grep -Eq '^ *[01]: .*join: the job on .*/join.model \(psd tcp://n1:' "$OUT/joiners.out" ||
  fail "the joiners did not read the join file: $(head -n 20 "$OUT/joiners.out")"
# psrun run's psd is exec'd, so the join file outlives the job: a join after the job ended is refused
# at once (exit 2, the run named as over), not after a 30 s wait for a psd that is gone.
[ -s "$join_file" ] || fail "the join file is gone after the job ($join_file): this check assumes it stays"
late_start=$SECONDS
LATE_RC=0
timeout 60 "$PSRUN" join --threads 1 -- "${TRAIN[@]}" >"$OUT/late.out" 2>&1 || LATE_RC=$?
[ "$LATE_RC" = 2 ] || fail "a join after the job ended: exit $LATE_RC, not 2: $(tail -n 5 "$OUT/late.out")"
[ $((SECONDS - late_start)) -le 5 ] || fail "a join after the job ended took $((SECONDS - late_start)) s"
grep -q "the job that wrote .*join.json (run slurm-$JOB_ID) is over" "$OUT/late.out" ||
  fail "a join after the job ended does not name the run as over: $(tail -n 5 "$OUT/late.out")"
note "a join after the job ended: exit 2 in $((SECONDS - late_start)) s: $(grep -o 'is over: .*' "$OUT/late.out" | cut -c1-120)"

PYTHONPATH="$SLURM_TEST_DIR/../support" python3 - "$OUT/ref.model/summary.json" "$OUT/join.model/summary.json" "$STEPS" "$victim_slot" "$OUT/join.out" <<'PY' ||
import json, sys
from run_checks import Checks, check_chunk_epochs
ref, run, steps, victim = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3]), int(sys.argv[4])
check = Checks()
for name, s in (("undisturbed", ref), ("joined", run)):
    check_chunk_epochs(check, name, s, steps, exact_steps=True)
joined = run["elastic"].get("workers_joined", [])
check(f"joined: workers 2 and 3 joined ({[d['worker'] for d in joined]})", sorted(d["worker"] for d in joined) == [2, 3])
check(f"joined: after the start ({[d['global_step'] for d in joined]})", all(d["global_step"] > 0 for d in joined))
check(f"joined: max_workers 4 ({run['elastic'].get('max_workers')})", run["elastic"].get("max_workers") == 4)
dropped = [d["worker"] for d in run["elastic"].get("workers_dropped", [])]
check(f"joined: worker {victim} dropped ({dropped})", dropped == [victim])
check("undisturbed: nobody joined or dropped",
      ref["elastic"].get("workers_joined") == [] and ref["elastic"].get("workers_dropped", []) == [])
gap = abs(run["test_accuracy"] - ref["test_accuracy"])
check(f"accuracy {100 * run['test_accuracy']:.2f}% within 1 point of the undisturbed "
      f"{100 * ref['test_accuracy']:.2f}% (gap {100 * gap:.2f})", gap <= 0.01)
# psd's last line (its statistics as JSON), which srun -l cuts into pieces of rank 0's output.
rank0 = [l.split(": ", 1)[1] for l in open(sys.argv[5]).read().splitlines() if l.lstrip().startswith("0: ")]
start = next(i for i, l in enumerate(rank0) if "[psd:0] exiting with code 0 (" in l)
text = rank0[start].split("(", 1)[1]
for piece in rank0[start + 1:]:
    if text.endswith(")"):
        try:
            final = json.loads(text[:-1])
            break
        except json.JSONDecodeError:
            pass
    text += piece
else:
    final = json.loads(text[:-1])
epochs = final["data_chunks"]["epochs"]
print(f"psd at exit: {len(epochs)} epochs listed, {final['data_chunks']['epochs_complete']} complete, "
      f"joined {[d['worker'] for d in final['workers_joined']]}, dropped {[d['worker'] for d in final['workers_dropped']]}")
check("psd at exit: every complete epoch 60000 examples, none inexact",
      all(x["examples"] == 60000 for x in epochs if x["complete"]) and final["data_chunks"]["epochs_inexact"] == 0)
check("psd at exit: workers 2 and 3 joined, the killed one dropped",
      sorted(d["worker"] for d in final["workers_joined"]) == [2, 3] and
      [d["worker"] for d in final["workers_dropped"]] == [victim])
check.exit()
PY
  fail "summary figures (lines above)"
grep -hE '^ *0: .*\[psd:0\].*(join:|elastic:)' "$OUT/join.out" || true
note "ok: joiners started at the chief's step $joined_at, worker $victim_slot SIGKILLed at step $killed_at of $STEPS"
