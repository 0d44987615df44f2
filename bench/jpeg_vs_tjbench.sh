#!/usr/bin/env bash
# JPEG decoding: psrun's reader against libjpeg-turbo's own tjbench on the same file, interleaved
# rounds on one core, medians (docs/benchmarks.md "Data"). tjbench comes with Debian's
# libjpeg-turbo-progs (jobs/setup.sh).
# Usage: bench/jpeg_vs_tjbench.sh PSRUN [ROUNDS] [SHAPE]
#   writes a synthetic SHAPE (default 3x64x64) JPEG with `psrun bench data --save-samples`, then
#   ROUNDS (default 15) times: tjbench -rgb on it, psrun bench data --image on it (1 s each);
#   prints one JSON line: the medians in images/s and their ratios. On a shared host both run
#   under SCHED_FIFO (chrt -f 10, as root) so that other processes do not split the core between
#   them: each run is a single thread for about a second.
set -euo pipefail
psrun=$1
rounds=${2:-15}
shape=${3:-3x64x64}
command -v tjbench >/dev/null || { echo "tjbench not found (apt-get install libjpeg-turbo-progs)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$psrun" bench data --shape "$shape" --formats jpeg --seconds 0.2 --save-samples "$tmp" >/dev/null
fifo=()
[ "$(id -u)" = 0 ] && command -v chrt >/dev/null && fifo=(chrt -f 10)
for ((i = 0; i < rounds; i++)); do
    "${fifo[@]}" tjbench "$tmp/sample.jpg" -rgb -benchtime 1 -warmup 0.2 -nowrite |
        awk '/Frame rate/ { print "tj", $(NF-1) }' >>"$tmp/rates"
    "${fifo[@]}" "$psrun" bench data --image "$tmp/sample.jpg" --shape "$shape" --seconds 1 |
        python3 -c 'import json, sys
for line in sys.stdin:
    j = json.loads(line)
    print(j["format"], j["images_per_sec"])' >>"$tmp/rates"
done
python3 - "$tmp/rates" "$shape" "$(nproc)" "$(uptime | sed 's/.*load average: //')" "$(( ${#fifo[@]} > 0 ))" <<'PY'
import json, statistics, sys
rates = {}
for line in open(sys.argv[1]):
    name, value = line.split()
    rates.setdefault(name, []).append(float(value))
med = {k: statistics.median(v) for k, v in rates.items()}
print(json.dumps({"shape": sys.argv[2], "rounds": len(rates["tj"]), "fifo": sys.argv[5] == "1", "tjbench_fps": med["tj"],
                  "psrun_decode_fps": med["JPEG-file-decode"], "psrun_reader_fps": med["JPEG-file"],
                  "decode_vs_tjbench": med["JPEG-file-decode"] / med["tj"],
                  "reader_vs_tjbench": med["JPEG-file"] / med["tj"], "cores": int(sys.argv[3]),
                  "load_after": sys.argv[4]}))
PY
