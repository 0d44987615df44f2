#!/usr/bin/env bash
# A paused job is not a dead job (issue 14), on the Slurm lab: a 2-node job (1 psd + 3 workers over tcp with
# CURVE (`--auth curve`, the suite's end-to-end run of that mode), real MNIST, STEPS async steps of batch 100)
# is suspended with `scontrol suspend` (SIGSTOP to every task)
# for PAUSE seconds, longer than every timeout it runs with (--worker-timeout 4, --heartbeat-timeout 3,
# --step-timeout 10, --checkpoint-secs 5), then resumed with `scontrol resume`. Checks: sbatch --wait returns 0;
# no task failed; nobody was declared dead or lost a psd; training went on from the step it was stopped at (no
# restore: steps lost 0); the chief reached the last step; the test accuracy is within 1.5 points of the same
# job run without a pause. Prints the time from `scontrol resume` to the chief's next progress line.
# Then, in a third job, a worker task is SIGKILLed and a replacement is started in the same allocation as a new
# step (`srun --overlap`, the dead task's own workerd command line: same index, model dir and key file); psd
# accepts it and the job ends 0.
# Usage: suspend_resume_test.sh PSRUN   (from the repository root, as meson runs it). STEPS=N, PAUSE=S.
set -euo pipefail
. "$(dirname "$0")/common.sh"
PSRUN=$(realpath "${1:?usage: $0 PSRUN}")
[ -x "$PSRUN" ] || fail "no psrun at $PSRUN"
. "$SLURM_TEST_DIR/train_util.sh"
STEPS=${STEPS:-600} PAUSE=${PAUSE:-14}
lab_start 2
DATA=$(mnist_dir)

# write_job NAME: a job script running 1 psd + 3 workers on n[1-2] with short timeouts, model dir $OUT/NAME.model.
write_job() {
  local name=$1 kill_on_bad=${2:-1}
  cat >"$OUT/$name.sbatch.sh" <<JOB
#!/usr/bin/env bash
set -euo pipefail
RESV=()
scontrol show config 2>/dev/null | grep -Eq '^MpiParams +=.*ports=' && RESV=(--resv-ports=2)
srun --kill-on-bad-exit=$kill_on_bad -l -N2 -n4 --ntasks-per-node=2 -c1 --mem=800M "\${RESV[@]}" \
  "$PSRUN" run --tasks ps,worker,worker,worker --worker-timeout 4 --auth curve -- \
  --data-dir "$DATA" --model-dir "$OUT/$name.model" --batch-size 100 --steps $STEPS --learning-rate 5e-4 \
  --optimizer adam --heartbeat-timeout 3 --step-timeout 10 --checkpoint-secs 5 --eval-every 0 --log-every 10 \
  --threads 1
JOB
}

# submit NAME: sbatch --wait in the background (tracked); sets SB_PID and JOB_ID.
submit() {
  local name=$1 i
  timeout 600 sbatch --wait -N2 --ntasks-per-node=2 -c1 -w 'n[1-2]' --time=10 -o "$OUT/$name.out" \
    "$OUT/$name.sbatch.sh" >"$OUT/$name.sbatch" 2>&1 &
  SB_PID=$!
  track_pid "$SB_PID"
  for i in $(seq 1 100); do
    JOB_ID=$(grep -Eo 'Submitted batch job [0-9]+' "$OUT/$name.sbatch" 2>/dev/null | awk '{print $4}' || true)
    [ -n "$JOB_ID" ] && return 0
    sleep 0.1
  done
  fail "$name: no job id from sbatch: $(cat "$OUT/$name.sbatch")"
}

# wait_step NAME STEP LIMIT: waits until the chief logged a step >= STEP.
wait_step() {
  local t0=$SECONDS
  while [ "$(chief_step "$1")" -lt "$2" ]; do
    ((SECONDS - t0 < $3)) || job_fail "$1" "the chief did not reach step $2 within $3 s"
    sleep 0.2
  done
}

finish() {  # finish NAME: waits for sbatch --wait, sets JOB_RC
  JOB_RC=0
  wait "$SB_PID" || JOB_RC=$?
  note "$1: sbatch --wait returned $JOB_RC"
}

# 1. Suspended job.
write_job paused
submit paused
wait_step paused $((STEPS / 3)) 300
timeout 10 scontrol suspend "$JOB_ID" || fail "scontrol suspend $JOB_ID failed"
paused_at=$(chief_step paused)
state=$(timeout 10 squeue -h -j "$JOB_ID" -o %t)
[ "$state" = S ] || fail "job $JOB_ID is in state '$state' after scontrol suspend, expected S"
note "suspended job $JOB_ID at the chief's step $paused_at for $PAUSE s"
sleep "$PAUSE"
[ "$(chief_step paused)" = "$paused_at" ] || fail "the chief went on while the job was suspended"
timeout 10 scontrol resume "$JOB_ID" || fail "scontrol resume $JOB_ID failed"
t_resume=$(date +%s.%N)
wait_step paused $((paused_at + 1)) 60
resume_s=$(awk -v a="$t_resume" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
finish paused
[ "$JOB_RC" = 0 ] || job_fail paused "sbatch --wait returned $JOB_RC after a ${PAUSE} s suspend"
expect_no_task_failure paused
if grep -E 'declared dead|lost the connection|lost ps|restored (global )?step' "$OUT/paused.out" >&2; then
  job_fail paused "a daemon counted the suspend as a death, or the chief restored a checkpoint (lines above)"
fi
expect_line paused "this process was stopped \(or not scheduled\) for [0-9.]+ s" "the daemons saw their own stop"
expect_psd_done_queue paused 0 3
acc_paused=$(summary_field "$OUT/paused.model" test_accuracy)
step=$(summary_field "$OUT/paused.model" global_step)
[ "$step" = "$STEPS" ] || fail "paused job: summary.json global_step $step, expected $STEPS"

# 2. The same job without a pause.
write_job plain
submit plain
finish plain
[ "$JOB_RC" = 0 ] || job_fail plain "sbatch --wait returned $JOB_RC"
acc_plain=$(summary_field "$OUT/plain.model" test_accuracy)
awk -v a="$acc_paused" -v b="$acc_plain" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= 0.015)}' ||
  fail "test accuracy $acc_paused after the suspend, $acc_plain without: more than 1.5 points apart"
note "suspend ${PAUSE} s at step $paused_at of $STEPS: next step $resume_s s after scontrol resume; steps lost 0;" \
  "accuracy $acc_paused (paused) vs $acc_plain (unpaused)"

# 3. A dead worker task replaced by a new step in the same allocation.
write_job replaced 0
submit replaced
wait_step replaced 100 300
line=$(grep -E '^ *3: .*exec workerd --index 2 ' "$OUT/replaced.out" | head -n 1) ||
  job_fail replaced "no exec line of worker 2 (rank 3)"
read -ra worker_cmd <<<"$(sed -E 's/^ *3: .*exec workerd //' <<<"$line")"
pid=$(timeout 10 srun --overlap --jobid "$JOB_ID" -N1 -n1 -w n2 pgrep -f -- "workerd --index 2 " | head -n 1) ||
  fail "cannot find worker 2's pid on n2"
# The lab's tasks live in its PID namespace: signal the pid there.
timeout 10 srun --overlap --jobid "$JOB_ID" -N1 -n1 -w n2 kill -KILL "$pid" || fail "cannot SIGKILL worker 2 ($pid)"
note "SIGKILLed worker 2 (pid $pid) of job $JOB_ID; starting a replacement step with srun --overlap"
timeout 300 srun --overlap --jobid "$JOB_ID" -N1 -n1 -w n2 --mem=400M \
  "$(dirname "$PSRUN")/../workerd/workerd" "${worker_cmd[@]}" >"$OUT/replacement.out" 2>&1 &
rep=$!
track_pid "$rep"
finish replaced
wait "$rep" || fail "the replacement worker failed: $(tail -n 20 "$OUT/replacement.out")"
# The first step ends non-zero (its rank 3 was SIGKILLed); what matters is psd's and the replacement's end.
grep -Eq 'worker 2 .*(continuing|training from global step)' "$OUT/replacement.out" ||
  fail "the replacement did not join: $(tail -n 20 "$OUT/replacement.out")"
expect_line replaced "^ *0: .*all 3 workers are done" "psd counted the replacement's DONE"
expect_line replaced "^ *0: .*exiting with code 0" "psd exit code 0 with the replacement"
note "ok: replacement worker accepted by psd; job rc $JOB_RC"
