#!/usr/bin/env bash
# Runs the checkpoint "disk full" test with a 1 MiB tmpfs in a private mount namespace (the mount
# vanishes with the namespace). Usage: disk_full.sh TEST_BINARY. Exits 77 (skipped) when mount
# namespaces are not available (not root, or no CAP_SYS_ADMIN).
set -euo pipefail
bin=$1
dir=$(mktemp -d /tmp/psrun-diskfull-XXXXXX)
trap 'rm -rf "$dir"' EXIT
if ! timeout 10 unshare -m --propagation private true 2>/dev/null; then
  echo "unshare -m is not permitted here: skipping"; exit 77
fi
timeout 60 unshare -m --propagation private bash -c '
  mount -t tmpfs -o size=1m psrun-diskfull "$1" || exit 77
  PSRUN_TEST_TMPFS="$1" exec "$2" "[diskfull]"' _ "$dir" "$bin"
