#!/usr/bin/env bash
# jobs/setup.sh's build modes: an unknown option exits 2 before anything is installed, and the
# targets of --binaries (what jobs/train-local.sh builds) are psrun, psd and workerd of this build
# graph, so a renamed target fails here rather than on a user's first run.
# Usage: setup_test.sh <source dir> <build dir>
set -u
src=$1
build=$2
fail=0
. "$(dirname "$0")/support/check.sh"  # check(), require_mnist()

out=$("$src/jobs/setup.sh" --bogus 2>&1)
rc=$?
check "setup.sh --bogus exits 2 (rc=$rc)" test "$rc" -eq 2
check "... naming the option and the choices" grep -q "unknown option '--bogus' (use --binaries, --no-build or nothing)" <<<"$out"
check "... before the package check" test "$(grep -c "installing" <<<"$out")" -eq 0

line=$(grep -E '^\[ "\$mode" = "--binaries" \] && targets=\(' "$src/jobs/setup.sh")
check "setup.sh names the --binaries targets in one line" test -n "$line"
targets=$(sed -E 's/.*targets=\((.*)\).*/\1/' <<<"$line")
check "... three of them" test "$(wc -w <<<"$targets")" -eq 3
for t in $targets; do
  ninja -C "$build" -t query "$t" >/dev/null 2>&1
  check "target $t is in the build graph" test $? -eq 0
  check "... and is the program $(basename "$t")" test -x "$build/$t"
done
grep -q -- "jobs/setup.sh --binaries" "$src/jobs/train-local.sh"
check "jobs/train-local.sh builds with --binaries" test $? -eq 0
exit $fail
