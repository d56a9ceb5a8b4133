#!/usr/bin/env bash
# Builds HashiCorp Vault (the server the Vault provider tests run as `vault server -dev`) from the
# Go module pinned in e2e/tools/vault into a cache directory keyed by the pinned version, so only
# the first run pays for the build (about 30 CPU-minutes and 4.7 GB of memory: Vault links every
# builtin plugin; figures in docs/providers/vault.md). Prints the directory holding the binary.
#
# Vault builds against its in-tree sdk (`replace github.com/hashicorp/vault/sdk => ./sdk` in its
# go.mod), which the published module does not contain, so the build uses the published sdk its
# go.mod names (v0.21.0). Three call sites of v1.21.4 disagree with that sdk's signatures
# (framework.Backend.ActivationFunc takes one more argument; keysutil RestorePolicy returns no
# key name); e2e/tools/vault/sdk-v0.21.0.patch adapts them (identity deduplication activation
# and transit key restore, neither used by the tests) and changes nothing else.
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
  export CGO_ENABLED=0 GOFLAGS=-mod=readonly
  mod_dir="$(cd "$here" && go mod download -json "github.com/hashicorp/vault@${version}" | awk -F'"' '$2=="Dir" {print $4; exit}')"
  rm -rf "$bin_dir/src" "$bin_dir/work" "$bin_dir/build.mod" "$bin_dir/build.sum"
  cp -r "$mod_dir" "$bin_dir/src"
  chmod -R u+w "$bin_dir/src"
  patch -s -d "$bin_dir/src" -p1 <"$here/sdk-v0.21.0.patch"
  # The pinned module graph, with Vault's source replaced by the patched copy; built from a copy
  # in the cache so the build does not depend on the checkout staying put.
  mkdir -p "$bin_dir/work"
  cp "$here/go.mod" "$here/go.sum" "$here/tools.go" "$bin_dir/work/"
  echo "replace github.com/hashicorp/vault => $bin_dir/src" >>"$bin_dir/work/go.mod"
  (cd "$bin_dir/work" && nice -n 10 go build -trimpath -ldflags "-s -w" -o "$bin_dir/vault.tmp" \
    github.com/hashicorp/vault >&2)
  mv "$bin_dir/vault.tmp" "$bin_dir/vault"
  rm -rf "$bin_dir/src" "$bin_dir/work"
fi
echo "$bin_dir"
