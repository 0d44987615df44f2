#!/usr/bin/env bash
# Builds the wire-decoder fuzz target with clang's libFuzzer + ASan and runs it for a bounded
# number of inputs on the seed corpus. Usage: fuzz.sh SOURCE_ROOT BUILD_DIR [RUNS]
# Exits 77 (meson: skipped) when clang or libFuzzer is unusable here.
set -euo pipefail
src=$1
out=$2/wire_fuzz
runs=${3:-200000}
cxx=$(command -v clang++ || command -v clang++-14 || true)
[ -n "$cxx" ] || { echo "clang++ not found: skipping"; exit 77; }
if [ ! -x "$out" ] || [ "$out" -ot "$src/common/wire.cpp" ] || [ "$out" -ot "$src/test/psd/wire_fuzz.cpp" ]; then
  probe=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' > "$probe/p.cpp"
  if ! "$cxx" -fsanitize=fuzzer,address "$probe/p.cpp" -o "$probe/p" 2>/dev/null; then
    rm -rf "$probe"
    echo "clang++ cannot link libFuzzer targets here (libclang-rt-dev missing?): skipping"
    exit 77
  fi
  rm -rf "$probe"
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I"$src" \
      "$src/test/psd/wire_fuzz.cpp" "$src/common/wire.cpp" -lz -o "$out"
fi
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp "$src"/test/psd/fuzz_corpus/* "$corpus"/
timeout 300 "$out" -runs="$runs" -max_len=4096 -max_total_time=120 -print_final_stats=1 "$corpus"
