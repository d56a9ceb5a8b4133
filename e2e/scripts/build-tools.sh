#!/usr/bin/env bash
# Builds the tools the chart tests run into a cache directory keyed by the pinned versions, so
# only the first run pays for each build:
#   helm                     from the Go module in e2e/tools/helm
#   cert-manager-crds/       copied out of the cert-manager Go module (e2e/tools/cert-manager)
#   cert-manager-controller  our mains in e2e/tools/cert-manager/cmd, wiring the exported
#   cert-manager-cainjector  packages of that same module (rebuilt when those sources change)
# Prints the directory holding the tools.
set -euo pipefail
tools="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tools" && pwd)"
helm_version="$(awk '$1=="require" && $2=="helm.sh/helm/v4" {print $3; exit}' "$tools/helm/go.mod")"
# cert-manager is required inside a `require ( … )` block (the mains need more requirements).
cm_version="$(awk '$1=="github.com/cert-manager/cert-manager" {print $2; exit}' "$tools/cert-manager/go.mod")"
cache_root="${KEYWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keyward}"
bin_dir="$cache_root/tools/helm-${helm_version}-cert-manager-${cm_version}"
mkdir -p "$bin_dir"
# Test binaries run in parallel and each may call this script: one builder at a time.
exec 9>"$bin_dir.lock"
flock 9
export CGO_ENABLED=0 GOFLAGS=-mod=readonly

if [[ ! -x "$bin_dir/helm" ]]; then
  echo "building helm ${helm_version} into $bin_dir (first run only)" >&2
  (cd "$tools/helm" && nice go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=${helm_version}" \
    -o "$bin_dir/helm.tmp" helm.sh/helm/v4/cmd/helm >&2)
  mv "$bin_dir/helm.tmp" "$bin_dir/helm"
fi

if [[ ! -d "$bin_dir/cert-manager-crds" ]]; then
  echo "fetching cert-manager ${cm_version} CRDs from its Go module" >&2
  cm_dir="$(cd "$tools/cert-manager" && go mod download -json "github.com/cert-manager/cert-manager@${cm_version}" \
    | awk -F'"' '$2=="Dir" {print $4; exit}')"
  rm -rf "$bin_dir/cert-manager-crds.tmp"
  mkdir -p "$bin_dir/cert-manager-crds.tmp"
  cp "$cm_dir"/deploy/crds/*.yaml "$bin_dir/cert-manager-crds.tmp/"
  chmod -R u+w "$bin_dir/cert-manager-crds.tmp"
  mv "$bin_dir/cert-manager-crds.tmp" "$bin_dir/cert-manager-crds"
fi

# The binaries depend on our mains as well as on the pinned module: key them by those sources.
sources="$(cd "$tools/cert-manager" && find go.mod go.sum cmd -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)"
if [[ "$(cat "$bin_dir/cert-manager.sources" 2>/dev/null)" != "$sources" \
  || ! -x "$bin_dir/cert-manager-controller" || ! -x "$bin_dir/cert-manager-cainjector" ]]; then
  echo "building cert-manager ${cm_version} controller and cainjector into $bin_dir (first run only)" >&2
  rm -rf "$bin_dir/cert-manager.tmp"
  (cd "$tools/cert-manager" && nice go build -trimpath \
    -ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=${cm_version}" \
    -o "$bin_dir/cert-manager.tmp/" ./cmd/controller ./cmd/cainjector >&2)
  mv "$bin_dir/cert-manager.tmp/controller" "$bin_dir/cert-manager-controller"
  mv "$bin_dir/cert-manager.tmp/cainjector" "$bin_dir/cert-manager-cainjector"
  rmdir "$bin_dir/cert-manager.tmp"
  echo "$sources" >"$bin_dir/cert-manager.sources"
fi
echo "$bin_dir"
