#!/usr/bin/env bash
# Builds HashiCorp Vault (the server the Vault provider tests run as `vault server -dev`) from the
# Go module in e2e/tools/vault into a cache directory keyed by the pinned version, so only the
# first run pays for the build (several minutes: Vault links every builtin plugin).
# Prints the directory holding the binary.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tools/vault" && pwd)"
version="$(awk '$1=="require" && $2=="github.com/hashicorp/vault" {print $3; exit}' "$here/go.mod")"
cache_root="${KEYWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keyward}"
bin_dir="$cache_root/tools/vault-${version}"
mkdir -p "$bin_dir"
# Test binaries run in parallel and each may call this script: one builder at a time.
exec 9>"$bin_dir.lock"
flock 9
if [[ ! -x "$bin_dir/vault" ]]; then
  echo "building vault ${version} into $bin_dir (first run only)" >&2
  (cd "$here" && CGO_ENABLED=0 GOFLAGS=-mod=readonly nice -n 10 go build -trimpath -ldflags "-s -w" \
    -o "$bin_dir/vault.tmp" github.com/hashicorp/vault >&2)
  mv "$bin_dir/vault.tmp" "$bin_dir/vault"
fi
echo "$bin_dir"
