#!/usr/bin/env python3
"""The same source builds warning-free for every x86-64 node a cluster has (issue 37).

The build compiles everything for its baseline (meson option march, x86-64-v3 by default). GCC's
warnings (-Werror) can depend on the ISA it targets: vectorised loops, and the stringop-overflow
false positive GCC 12 gave in test/workerd/data_files.h only under Zen 3's tuning. So this check
compiles (never runs) the sources where the ISA matters with each -march below and the build's own
flags, from `meson introspect --targets` (a unity build's sources read from its unity files),
output to /dev/null:

  - every source that uses intrinsics, target attributes or CPU dispatch (found by grep);
  - the optimizer loops (common/optimizer.cpp, lamb.cpp), bf16 conversion (psd/bf16_params.cpp,
    common/wire_precision.cpp) and one test that includes data_files.h.

The whole tree is compiled only for the build's baseline; this is the subset that has differed.
GCC 12 (Debian 12) has no -march=znver4: Zen 4 is given as znver3 plus the AVX-512 extensions
Zen 4 adds. Prints one JSON line; exit 1 naming the source, the -march and GCC's message.

Usage: march_check.py BUILD_DIR [--jobs N]
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

ZEN4_EXTRAS = ["-mavx512f", "-mavx512cd", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx512ifma",
               "-mavx512vbmi", "-mavx512vbmi2", "-mavx512vnni", "-mavx512bitalg", "-mavx512vpopcntdq",
               "-mavx512bf16", "-mgfni", "-mvaes", "-mvpclmulqdq"]
MARCHES = {
    "znver3": ["-march=znver3"],
    "znver4 (znver3 + AVX-512)": ["-march=znver3"] + ZEN4_EXTRAS,
    "sapphirerapids": ["-march=sapphirerapids"],  # x86-64-v4 and more: v4 itself adds nothing
}
ALWAYS = ["common/optimizer.cpp", "common/lamb.cpp", "psd/bf16_params.cpp", "common/wire_precision.cpp",
          "test/workerd/npy_reader_test.cpp"]
ISA_SPECIFIC = re.compile(r"immintrin\.h|__attribute__\(\(target|__builtin_cpu_supports|target_clones")


UNITY_INCLUDE = re.compile(r'^#include\s*[<"](.+\.cpp)[>"]\s*$')


def unity_members(path):
    """The sources a meson unity file (<target>-unity<N>.cpp) includes, as absolute paths."""
    members = []
    with open(path, errors="replace") as f:
        for line in f:
            m = UNITY_INCLUDE.match(line.strip())
            if m:
                members.append(os.path.realpath(os.path.join(os.path.dirname(path), m.group(1))))
    return members


def sources_and_flags(build_dir):
    """{absolute source: compiler argv without the source} for every C++ source of the build.
    A unity build (-Dunity=on, as CI builds) lists a target's generated unity files instead of its
    sources: their #include lines name the sources, compiled with the same flags."""
    out = subprocess.run(["meson", "introspect", build_dir, "--targets"], capture_output=True, text=True,
                         check=True).stdout
    result = {}
    for target in json.loads(out):
        for group in target["target_sources"]:
            if group.get("language") != "cpp":
                continue
            argv = group["compiler"] + group["parameters"]
            sources = [os.path.realpath(s) for s in group.get("sources", [])]
            for generated in group.get("generated_sources", []):
                if re.search(r"-unity\d+\.cpp$", generated) and os.path.exists(generated):
                    sources += unity_members(generated)
            for src in sources:
                result.setdefault(src, argv)
    return result


def chosen(root, sources):
    picked = []
    for src in sorted(sources):
        rel = os.path.relpath(src, root)
        if rel.startswith("..") or not os.path.exists(src):  # outside the tree, or gone since meson last ran
            continue
        if rel in ALWAYS:
            picked.append(src)
            continue
        with open(src, errors="replace") as f:
            if ISA_SPECIFIC.search(f.read()):
                picked.append(src)
    return picked


def compile_one(argv, src, march_flags, cwd):
    args = []
    skip = False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MQ", "-MT"):
            skip = True
            continue
        if a in ("-MD", "-MMD") or a.startswith("-march=") or a.startswith("-mtune="):
            continue
        args.append(a)
    args += march_flags + ["-c", src, "-o", os.devnull]
    r = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    return r.returncode, r.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build_dir")
    ap.add_argument("--jobs", type=int, default=2)
    o = ap.parse_args()
    if o.jobs < 1 or o.jobs > 64:
        print("march_check: --jobs must be in [1, 64]", file=sys.stderr)
        return 2
    build_dir = os.path.realpath(o.build_dir)
    root = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
    sources = sources_and_flags(build_dir)
    picked = chosen(root, sources)
    missing = [s for s in ALWAYS if os.path.join(root, s) not in picked]
    if missing or not any(ISA_SPECIFIC.search(open(s, errors="replace").read()) for s in picked):
        print(f"march_check: the build has no {missing or 'ISA-specific sources'}: is {build_dir} psrun's?",
              file=sys.stderr)
        return 1
    start = time.monotonic()
    failures = []
    with concurrent.futures.ThreadPoolExecutor(o.jobs) as pool:
        jobs = {pool.submit(compile_one, sources[s], s, flags, build_dir): (name, s)
                for name, flags in MARCHES.items() for s in picked}
        for job in concurrent.futures.as_completed(jobs):
            name, src = jobs[job]
            rc, err = job.result()
            if rc != 0:
                failures.append((name, os.path.relpath(src, root), err))
    for name, src, err in failures:
        print(f"FAIL: {src} does not compile warning-free with -march {name}:\n{err[-3000:]}", file=sys.stderr)
    print(json.dumps({"check": "march_compile", "sources": [os.path.relpath(s, root) for s in picked],
                      "marches": list(MARCHES), "compiles": len(picked) * len(MARCHES), "failed": len(failures),
                      "seconds": round(time.monotonic() - start, 1)}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
