#!/usr/bin/env bash
# The tree's C++ format (.clang-format): fails naming every file that clang-format-14 would change,
# and how to fix it. Pinned to clang-format-14 (Debian 12's): another version formats differently.
# Skipped (exit 77) where clang-format-14 is not installed (jobs/setup.sh installs it).
# Usage: test/format_check.sh SOURCE_ROOT
set -uo pipefail
cd "${1:?usage: format_check.sh SOURCE_ROOT}"
command -v clang-format-14 >/dev/null || { echo "format: clang-format-14 not installed: skipped"; exit 77; }

if [ -d .git ] && command -v git >/dev/null; then
  mapfile -t files < <(git ls-files -- '*.cpp' '*.h')
else
  mapfile -t files < <(find common launcher psd workerd test bench \( -name '*.cpp' -o -name '*.h' \) 2>/dev/null | sort)
fi
((${#files[@]})) || { echo "format: no C++ files found under $PWD"; exit 1; }

# One clang-format per 100 files; each file that would change is named in its
# "FILE:LINE:COL: error: code should be clang-formatted" lines.
out=$(printf '%s\0' "${files[@]}" | xargs -0 -n 100 clang-format-14 --dry-run --Werror 2>&1)
rc=$?
mapfile -t bad < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$out" | sort -u)
if ((rc != 0 && ${#bad[@]} == 0)); then
  echo "format: clang-format-14 failed (exit $rc) without naming a file to format:"
  head -20 <<<"$out"
  exit 1
fi
if ((${#bad[@]})); then
  echo "format: ${#bad[@]} of ${#files[@]} files differ from .clang-format:"
  printf '  %s\n' "${bad[@]}"
  echo "fix: clang-format-14 -i FILE (or git clang-format --binary clang-format-14 for changed lines)"
  exit 1
fi
echo "format: ${#files[@]} files as .clang-format says"
