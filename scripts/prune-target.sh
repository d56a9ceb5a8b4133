#!/usr/bin/env bash
# Keeps room on the disk for the installed tier. The one-node cluster's kubelet taints its node
# (DiskPressure) when the disk runs low, and then no Pod of a `helm install` is scheduled: the
# tests fail far from the cause. What grows without bound here is the shared Cargo target
# directory, mostly test and bench executables of earlier builds. When less than
# KEYWARD_MIN_FREE_GIB (default 20) is free, the executables nothing rebuilt or ran in a day go
# (Cargo relinks any it needs again), and so does the unused incremental cache. Below half of
# that afterwards, the run stops here, saying so.
set -euo pipefail
target="${CARGO_TARGET_DIR:-$HOME/.cache/keyward/target}"
need="${KEYWARD_MIN_FREE_GIB:-20}"
mkdir -p "$target"

free_gib() { df -Pk "$target" | awk 'NR == 2 { print int($4 / 1048576) }'; }

free="$(free_gib)"
if (( free >= need )); then
  echo "disk: $free GiB free"
  exit 0
fi
find "$target" -mindepth 3 -maxdepth 3 -path '*/deps/*' -type f -executable ! -name '*.so' -mmin +1440 -delete
rm -rf "$target"/*/incremental
after="$(free_gib)"
echo "disk: $free GiB free, $after GiB after removing stale test executables from $target"
if (( after < need / 2 )); then
  echo "disk: only $after GiB free; the one-node cluster's kubelet stops scheduling Pods when the disk runs low. Free some space (or set KEYWARD_MIN_FREE_GIB) and run again." >&2
  exit 1
fi
