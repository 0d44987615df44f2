# shellcheck shell=bash
# Helpers of the Slurm lab training tests (train_*_test.sh): real MNIST, real jobs/ scripts, real psd/workerd.
# Sourced after common.sh; needs PSRUN (the psrun binary) and OUT (set by lab_start).

JOBS_DIR=$(realpath "$SLURM_TEST_DIR/../../jobs")

# Prints the MNIST directory, fetching it first when missing (`psrun data fetch` is a no-op once it is cached).
mnist_dir() {
  local dir=${XDG_CACHE_HOME:-$HOME/.cache}/psrun/data/mnist
  timeout 300 "$PSRUN" data fetch >"$OUT/fetch.log" 2>&1 || {
    cat "$OUT/fetch.log" >&2
    fail "psrun data fetch failed"
  }
  [ -s "$dir/train-images-idx3-ubyte" ] || fail "no MNIST in $dir after psrun data fetch"
  echo "$dir"
}

# run_job NAME LIMIT_SECONDS [sbatch options] SCRIPT: `sbatch --wait` bounded by `timeout`, in the background so
# that a killed test still ends it (track_pid). Output (stdout and stderr of every task) in $OUT/NAME.out.
# Sets JOB_RC (sbatch's exit code, i.e. the job script's) and JOB_SECONDS (wall time of the whole submission).
run_job() {
  local name=$1 limit=$2 t0 pid
  shift 2
  t0=$(date +%s.%N)
  "${LAB_EXEC[@]}" timeout "$limit" sbatch --wait -o "$OUT/$name.out" "$@" >"$OUT/$name.sbatch" 2>&1 &
  pid=$!
  track_pid "$pid"
  JOB_RC=0
  wait "$pid" || JOB_RC=$?
  JOB_SECONDS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  note "$name: sbatch --wait returned $JOB_RC after $JOB_SECONDS s"
}

# Shows the job's output and fails.
job_fail() {
  local name=$1
  shift
  echo "----- $OUT/$name.sbatch" >&2
  cat "$OUT/$name.sbatch" >&2 || true
  echo "----- last 80 lines of $OUT/$name.out" >&2
  tail -n 80 "$OUT/$name.out" >&2 || true
  fail "$name: $*"
}

# expect_line NAME REGEX WHAT: the job output has a line matching the extended REGEX.
expect_line() {
  grep -Eq -- "$2" "$OUT/$1.out" || job_fail "$1" "no line matching /$2/ in the job output ($3)"
}

# No task of any step failed: srun reports every non-zero task exit as "srun: error: ...: task N: Exited".
expect_no_task_failure() {
  if grep -E 'srun: error: .*(Exited with exit code|Killed|Terminated)|CANCELLED|step aborted' "$OUT/$1.out" >&2; then
    job_fail "$1" "a task of the job failed (lines above)"
  fi
}

# The psd of rank RANK (srun -l prefix) left through its done-queue: every one of WORKERS workers sent DONE,
# then it exited with code 0.
expect_psd_done_queue() {
  local name=$1 rank=$2 workers=$3
  expect_line "$name" "^ *$rank: .*all $workers workers are done" "psd (rank $rank) done-queue"
  expect_line "$name" "^ *$rank: .*exiting with code 0" "psd (rank $rank) exit code"
}

# test_accuracy from MODEL_DIR/summary.json (the chief writes it at the end).
summary_field() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1/summary.json" "$2" \
    || fail "cannot read $2 from $1/summary.json"
}

# ge A B: A >= B for decimals.
ge() { awk -v a="$1" -v b="$2" 'BEGIN {exit !(a >= b)}'; }

# The chief's outputs in MODEL_DIR: checkpoints (ckpt-<step>/ with a manifest, the `checkpoint` state file naming
# one of them as "latest", in LATEST_CKPT), metrics.jsonl, a TensorBoard event file, curves.png (a PNG) and summary.json.
expect_model_dir() {
  local dir=$1 newest
  compgen -G "$dir/ckpt-*/manifest.json" >/dev/null || fail "no ckpt-*/manifest.json in $dir: $(ls -A "$dir")"
  [ -s "$dir/checkpoint" ] || fail "no checkpoint state file in $dir"
  newest=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["latest"])' "$dir/checkpoint") \
    || fail "$dir/checkpoint is not the JSON state file: $(cat "$dir/checkpoint")"
  [ -n "$newest" ] && [ -f "$dir/$newest/manifest.json" ] || fail "$dir/checkpoint names '$newest' as the latest, not a checkpoint"
  LATEST_CKPT=$newest
  [ -s "$dir/metrics.jsonl" ] || fail "no metrics.jsonl in $dir"
  python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$dir/metrics.jsonl" \
    || fail "$dir/metrics.jsonl is not JSON lines"
  compgen -G "$dir/events.out.tfevents.*" >/dev/null || fail "no events.out.tfevents.* in $dir"
  [ "$(head -c 8 "$dir/curves.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] \
    || fail "$dir/curves.png missing or not a PNG"
  [ -s "$dir/summary.json" ] || fail "no summary.json in $dir"
}

# chief_step NAME: in $OUT/NAME.out of a step run with srun -l where rank 1 is the chief (worker 0),
# the highest "step N/STEPS" it logged so far (0 before the first).
chief_step() {
  { grep -Eo '^ *1: .*step [0-9]+/[0-9]+' "$OUT/$1.out" 2>/dev/null || true; } |
    sed -E 's#.*step ([0-9]+)/.*#\1#' | sort -n | tail -n 1 | grep . || echo 0
}

# chief_at NAME STEP: the chief of NAME logged step STEP or later.
chief_at() { (($(chief_step "$1") >= $2)); }
