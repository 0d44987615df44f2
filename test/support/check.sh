# Shared by the shell tests (source it): a named check that records failure without stopping the
# test, and the MNIST skip. The caller sets fail=0 before its checks and exits with $fail at the end.

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
