#!/usr/bin/env python3
"""Every numeric option of psrun (each subcommand), psd and workerd, fed nan, inf, -1, 0 and 1e300
(issue 38). Usage: numeric_options_test.py PSRUN PSD WORKERD

Each binary lists its numeric options with the hidden --list-numeric-options (common/option_checks.h):
"<command path> <flag> <type> <range>". An option without a range check is listed as UNCHECKED and
fails the test. Each value is then given as `<command> --flag=VALUE --help`: CLI11 checks values
before it handles --help, so a value outside the stated range must exit 2 naming the flag and the
value, and a value inside it must reach the help text (exit 0). Nothing is started either way.
A crash (exit >= 128, "terminate" on stderr) or a hang (10 s) fails."""
import concurrent.futures
import math
import os
import re
import subprocess
import sys

VALUES = ["nan", "inf", "-1", "0", "1e300"]
# Options the issue named: the listing must hold them (an empty or truncated list would pass otherwise).
MUST_LIST = [
    "psrun local --grace", "psrun local --ps", "psrun run --worker-timeout", "psrun run --reconnect-wait",
    "psrun run --replicas-to-aggregate", "psrun run --max-bad-grads",
    "psd --worker-timeout", "psd --replicas-to-aggregate", "psd --max-bad-grads", "psd --threads",
    "workerd --step-timeout", "workerd --heartbeat-timeout", "workerd --barrier-timeout",
    "workerd --checkpoint-secs", "workerd --seed", "workerd --validation-split", "workerd --learning-rate",
    "workerd --data-threads",
    "psrun local --min-workers", "psrun run --min-workers", "psd --min-workers", "workerd --data-chunks",  # elastic
]


def list_options(binary):
    out = subprocess.run([binary, "--list-numeric-options"], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise SystemExit(f"FAILED: {binary} --list-numeric-options exited {out.returncode}: {out.stderr}")
    rows = []
    for line in out.stdout.splitlines():
        path, flag, kind, rng = line.split("\t")
        rows.append((path or os.path.basename(binary), flag, kind, rng))  # psd's and workerd's apps have no name
    return rows


def in_range(value, kind, rng):
    m = re.fullmatch(r"([\[(])(\S+), (\S+)\]", rng)
    assert m, f"unreadable range {rng!r}"
    lo, hi = float(m.group(2)), float(m.group(3))
    v = float(value)
    if not math.isfinite(v):
        return False
    if kind in ("INT", "UINT") and not re.fullmatch(r"[-+]?\d+", value):
        return False
    return (v > lo if m.group(1) == "(" else v >= lo) and v <= hi


def run_one(binary, path, flag, kind, rng, value):
    argv = [binary] + path.split()[1:] + [f"{flag}={value}", "--help"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        return f"{' '.join(argv[1:])}: hung (10 s)"
    text = p.stdout + p.stderr
    if p.returncode >= 128 or p.returncode < 0 or "terminate" in p.stderr:
        return f"{path} {flag}={value}: crashed (exit {p.returncode}): {p.stderr[-300:]}"
    if in_range(value, kind, rng):
        if p.returncode != 0:
            return f"{path} {flag}={value}: in {rng} but refused (exit {p.returncode}): {p.stderr.strip()[:300]}"
        return None
    if p.returncode != 2:
        return f"{path} {flag}={value}: outside {rng} but exit {p.returncode} (want 2): {text.strip()[:300]}"
    if flag not in p.stderr or value not in p.stderr:
        return f"{path} {flag}={value}: exit 2, but the message does not name the flag and value: {p.stderr.strip()[:300]}"
    return None


def main():
    binaries = sys.argv[1:4]
    rows = []
    for b in binaries:
        rows += [(b,) + r for r in list_options(b)]
    failures = []
    names = {f"{path} {flag}" for _, path, flag, _, _ in rows}
    print(f"{len(rows)} numeric options")
    for must in MUST_LIST:
        if must not in names:
            failures.append(f"{must}: not listed")
    for b, path, flag, kind, rng in rows:
        if rng == "UNCHECKED":
            failures.append(f"{path} {flag} ({kind}): no range check (common/option_checks.h)")
    jobs = [(b, path, flag, kind, rng, v) for b, path, flag, kind, rng in rows if rng != "UNCHECKED" for v in VALUES]
    # Issue 38 item 5: 100000 decoding threads aborted workerd; the ceiling comes from this host.
    p = subprocess.run([binaries[2], "--data-threads=100000", "--help"], capture_output=True, text=True, timeout=10)
    if p.returncode != 2 or "hardware threads of this host" not in p.stderr:
        failures.append(f"workerd --data-threads=100000: exit {p.returncode}: {p.stderr.strip()[:300]}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for result in pool.map(lambda j: run_one(*j), jobs):
            if result:
                failures.append(result)
    print(f"{len(jobs)} option values tried")
    for f in failures:
        print("FAILED:", f)
    if failures:
        return 1
    print("ok: every numeric option refuses nan, inf and out-of-range values with exit 2 naming flag and value")
    return 0


if __name__ == "__main__":
    sys.exit(main())
