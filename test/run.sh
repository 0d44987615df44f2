#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite. Prints the meson summary and
# ends with one plain line "N passed, N failed" (counted from meson's testlog.json).
# Extra arguments go to `meson test` (e.g. a suite name: test/run.sh --suite unit).
set -uo pipefail
cd "$(dirname "$0")/.."

jobs/setup.sh || { echo "0 passed, 1 failed"; exit 1; }

# Real MNIST for the workerd tests, into the default data dir (a no-op when already verified).
timeout 300 build/launcher/psrun data fetch --dataset mnist || echo "warning: MNIST fetch failed; the MNIST tests will fail"

meson test -C build --print-errorlogs --num-processes 2 "$@"
rc=$?

python3 - build/meson-logs/testlog.json <<'PY'
import json, sys
passed = failed = skipped = 0
reasons = []  # why each failed test failed, repeated here where a log's tail is all one may see
try:
    with open(sys.argv[1]) as f:
        for line in f:
            if not line.strip():
                continue
            test = json.loads(line)
            r = test["result"]
            if r in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif r == "SKIP":
                skipped += 1
            else:
                failed += 1
                out = (test.get("stdout") or "").splitlines()
                said = [l for l in out if "FAIL" in l or "error" in l.lower()] or out
                reasons.append((test["name"], r, said[-8:]))
except FileNotFoundError:
    failed = 1
for name, r, lines in reasons:
    print(f"failed: {name} ({r})")
    for l in lines:
        print(f"    {l[:400]}")
if skipped:
    print(f"{skipped} skipped (see the meson summary above)")
print(f"{passed} passed, {failed} failed")
PY
exit $rc
