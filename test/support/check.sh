# Shared by the shell tests (source it): a named check that records failure without stopping the
# test, the MNIST skip, a scratch dir, finding a worker by PID, and waiting for a logged step. The
# caller sets fail=0 before its checks and exits with $fail at the end. Their Python checks import
# run_checks.py from $TEST_SUPPORT_DIR.

# The directory of these helpers (and of run_checks.py, for the tests' Python checks).
TEST_SUPPORT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# check <description> <command...>: prints "ok: <description>" or "FAILED: <description>" (fail=1).
check() {
    local what=$1; shift
    if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; fail=1; fi
}

# require_mnist: sets idx to the MNIST dir (PSRUN_MNIST_DIR, else psrun's cache) or skips the
# test (exit 77, meson's "skipped") when it holds no MNIST.
require_mnist() {
    idx=${PSRUN_MNIST_DIR:-$HOME/.cache/psrun/data/mnist}
    [ -f "$idx/train-images-idx3-ubyte" ] || [ -f "$idx/train-images-idx3-ubyte.gz" ] ||
        { echo "no MNIST in $idx (psrun data fetch): skipping"; exit 77; }
}

# scratch_dir PREFIX: sets tmp to a fresh /tmp/PREFIX-XXXXXX and pid to "", and at exit SIGKILLs
# the process whose PID is in $pid then (if any) and removes $tmp. For a test that runs one
# process at a time in the background (psrun local) and keeps its PID in $pid.
scratch_dir() {
    tmp=$(mktemp -d "/tmp/$1-XXXXXX")
    pid=
    trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
}

# worker_pid PID INDEX: the PID of the workerd with --index INDEX among the descendants of PID
# (psrun local, or a shell that runs it); empty when there is none.
worker_pid() {
    local c found
    for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
        if tr '\0' '\n' </proc/"$c"/cmdline 2>/dev/null | head -1 | grep -q 'workerd$' &&
            tr '\0' ' ' </proc/"$c"/cmdline | grep -q -- "--index $2 "; then echo "$c"; return; fi
        found=$(worker_pid "$c" "$2")
        [ -n "$found" ] && { echo "$found"; return; }
    done
}

# logged_step LOG STEPS [WHO]: the last "step N/STEPS" in LOG (psrun local's merged log), from the
# daemon tag WHO when given (e.g. 'workerd:0', the chief); empty before the first.
logged_step() {
    grep -o "${3:+\[$3\].*}step [0-9]*/$2" "$1" 2>/dev/null | tail -1 | sed 's/.*step \([0-9]*\)\/.*/\1/'
}

# wait_step LOG STEPS N SECONDS [WHO]: polls every 0.05 s until logged_step reached N, the process
# whose PID is in $pid is gone, or SECONDS passed; prints the last step seen (0 before the first).
wait_step() {
    local s= t0=$SECONDS
    while ((SECONDS - t0 < $4)); do
        s=$(logged_step "$1" "$2" "${5:-}")
        [ -n "$s" ] && [ "$s" -ge "$3" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    echo "${s:-0}"
}
