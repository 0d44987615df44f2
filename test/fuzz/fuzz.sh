#!/usr/bin/env bash
# Builds one libFuzzer target (test/fuzz/meson.build) in a clang build of this tree with ASan and
# UBSan ($PSRUN_FUZZ_DIR/clang, configured on first use) and runs it on its seed corpus
# (test/fuzz/corpus/TARGET, dictionary test/fuzz/TARGET.dict when present).
# Usage: test/fuzz/fuzz.sh TARGET [RUNS [libFuzzer options...]]
#        test/fuzz/fuzz.sh list
#   RUNS  inputs to execute (default 50000); e.g. `fuzz.sh hostlist 1000000 -max_total_time=900`
# Environment:
#   PSRUN_FUZZ_DIR   the clang build, grown corpora and crash inputs (default <repo>/build/fuzz)
#   PSRUN_FUZZ_ALL   1: build every target, not only TARGET (what the meson tests ask)
#   PSRUN_FUZZ_KEEP  1: grow the corpus in $PSRUN_FUZZ_DIR/corpus/TARGET across runs
#                    (default: a throw-away copy of the seeds, so CI runs are reproducible)
# Exit: 0 no crash; 1 crash/leak/timeout (the input is saved as $PSRUN_FUZZ_DIR/crash-TARGET-*;
# replay it with `$PSRUN_FUZZ_DIR/clang/test/fuzz/TARGET_fuzz FILE`); 2 usage; 77 (meson: skipped) when clang
# or libFuzzer is unusable here.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)

# The targets are test/fuzz/meson.build's (each linked with the library that holds its parser);
# here only the longest input each takes (libFuzzer's -max_len), 4096 where not listed.
declare -A max_lens=([hostlist]=256 [slurm_lists]=256 [task_list]=256 [slurm_env]=1024 [job_keys]=1024
  [einsum]=1024 [tf_config]=2048 [pgm]=2048 [idx]=8192 [tfrecord]=8192 [npz]=8192 [data_chunks]=8192
  [image]=16384 [onnx]=65536)
targets=$(cd "$src/test/fuzz" && ls ./*_fuzz.cpp | sed -e 's|^\./||' -e 's/_fuzz\.cpp$//')

target=${1:-}
if [ "$target" = list ]; then echo "$targets"; exit 0; fi
if [ -z "$target" ] || ! grep -qx "$target" <<<"$targets"; then
  echo "usage: $0 TARGET [RUNS [libFuzzer options...]]; TARGET is one of:" $targets >&2
  exit 2
fi
runs=${2:-50000}
shift $(( $# >= 2 ? 2 : 1 ))
max_len=${max_lens[$target]:-4096}

out_dir=${PSRUN_FUZZ_DIR:-$src/build/fuzz}
mkdir -p "$out_dir"
build=$out_dir/clang  # a meson build of this tree with clang, the libraries instrumented
exe=$build/test/fuzz/${target}_fuzz

cxx=$(command -v clang++ || command -v clang++-14 || true)
[ -n "$cxx" ] || { echo "clang++ not found: skipping (apt-get install clang libclang-rt-dev)"; exit 77; }

# One build at a time (meson tests run two fuzz targets at once): under the lock, configure the
# clang build if it is not, then let ninja bring the target (or, with PSRUN_FUZZ_ALL=1, every
# target, so the tests waiting on the lock find theirs built) up to date.
(
  flock 9
  if [ ! -f "$build/build.ninja" ]; then
    probe=$(mktemp -d)
    echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' > "$probe/p.cpp"
    if ! "$cxx" -fsanitize=fuzzer,address "$probe/p.cpp" -o "$probe/p" 2>/dev/null; then
      rm -rf "$probe"
      echo "clang++ cannot link libFuzzer targets here (libclang-rt-dev missing?): skipping"
      exit 77
    fi
    rm -rf "$probe"
    rm -rf "$build"
    echo "configuring the clang build $build"
    # -O1 with line tables: fast enough to fuzz, stacks that name lines. Warnings are the GCC
    # build's business (werror there).
    CXX=$cxx meson setup "$build" "$src" -Dfuzz_targets=true -Dtests=disabled -Dwerror=false \
      -Dbuildtype=plain -Doptimization=1 -Db_ndebug=false -Db_sanitize=address,undefined -Db_lundef=false \
      -Dcpp_args='-gline-tables-only -fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined' \
      -Dcpp_link_args=-fno-sanitize-recover=undefined >"$out_dir/configure.log" 2>&1 ||
      { tail -30 "$out_dir/configure.log" >&2; rm -rf "$build"; exit 1; }
  fi
  what=test/fuzz/${target}_fuzz
  [ "${PSRUN_FUZZ_ALL:-0}" = 1 ] && what=fuzz_targets
  echo "building $what in $build"
  ninja -C "$build" -j"$(nproc)" "$what" >"$out_dir/build-$target.log" 2>&1 ||
    { tail -40 "$out_dir/build-$target.log" >&2; exit 1; }
) 9>"$out_dir/build.lock"

if [ "${PSRUN_FUZZ_KEEP:-0}" = 1 ]; then
  corpus=$out_dir/corpus/$target
  mkdir -p "$corpus"
else
  corpus=$(mktemp -d)
  trap 'rm -rf "$corpus"' EXIT
fi
cp "$src/test/fuzz/corpus/$target"/* "$corpus"/
dict=()
[ -f "$src/test/fuzz/$target.dict" ] && dict=(-dict="$src/test/fuzz/$target.dict")
echo "fuzzing $target for $runs runs"
timeout "${PSRUN_FUZZ_TIMEOUT:-3600}" "$exe" -runs="$runs" -max_len="$max_len" -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out_dir/crash-$target-" \
  "${dict[@]}" "$@" "$corpus" && exit 0
# libFuzzer's own exit code for a crash is 77, which meson reads as "skipped": say 1.
rc=$?
echo "fuzz target $target failed (exit $rc): crash, leak, timeout or out-of-memory; the input is in $out_dir/crash-$target-*" >&2
exit 1
