#!/usr/bin/env bash
# `meson install` puts psrun, psd and workerd side by side, and the installed psrun finds the
# installed daemons (not the build tree's). Usage: install_test.sh <build dir>
set -u
build=$1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --no-rebuild --destdir "$dest" >"$dest.log" 2>&1 || { cat "$dest.log"; rm -f "$dest.log"; exit 1; }
rm -f "$dest.log"
bin=$(dirname "$(find "$dest" -name psrun -type f | head -1)")
for exe in psrun psd workerd; do
  [ -x "$bin/$exe" ] || { echo "FAILED: $exe not installed next to psrun ($bin)"; exit 1; }
done
out=$("$bin/psrun" run --dry-run --ps_hosts localhost:1 --worker_hosts localhost:2 --job_name ps --task_index 0 2>&1)
echo "$out"
# The dry run names the program; a real exec needs the installed path, checked through the error
# psrun gives when the daemon is missing from its own directory.
mv "$bin/psd" "$bin/psd.moved"
err=$("$bin/psrun" run --no-auth --ps_hosts localhost:1 --worker_hosts localhost:2 --job_name ps --task_index 0 2>&1)
rc=$?
echo "$err"
[ "$rc" -eq 2 ] || { echo "FAILED: a missing installed psd should exit 2 (rc=$rc)"; exit 1; }
echo "$err" | grep -q "$bin/psd" || { echo "FAILED: psrun did not look for psd next to itself"; exit 1; }
echo "ok: installed psrun, psd and workerd in $bin"
