#!/usr/bin/env bash
# Builds the tools the chart tests run — helm, from the Go module in e2e/tools/helm — into a cache
# directory keyed by the pinned version, so only the first run pays for the build. Also copies
# cert-manager's CRDs out of its Go module (e2e/tools/cert-manager) for the cert-manager mode tests.
# Prints the directory holding the tools.
set -euo pipefail
tools="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tools" && pwd)"
helm_version="$(awk '$1=="require" && $2=="helm.sh/helm/v4" {print $3; exit}' "$tools/helm/go.mod")"
cm_version="$(awk '$1=="require" && $2=="github.com/cert-manager/cert-manager" {print $3; exit}' "$tools/cert-manager/go.mod")"
cache_root="${KEYWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keyward}"
bin_dir="$cache_root/tools/helm-${helm_version}-cert-manager-${cm_version}"
if [[ -x "$bin_dir/helm" && -d "$bin_dir/cert-manager-crds" ]]; then
  echo "$bin_dir"
  exit 0
fi
rm -rf "$bin_dir.tmp"
mkdir -p "$bin_dir.tmp"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
echo "building helm ${helm_version} into $bin_dir (first run only)" >&2
(cd "$tools/helm" && go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=${helm_version}" \
  -o "$bin_dir.tmp/helm" helm.sh/helm/v4/cmd/helm >&2)
echo "fetching cert-manager ${cm_version} CRDs from its Go module" >&2
cm_dir="$(cd "$tools/cert-manager" && go mod download -json "github.com/cert-manager/cert-manager@${cm_version}" \
  | awk -F'"' '$2=="Dir" {print $4; exit}')"
mkdir -p "$bin_dir.tmp/cert-manager-crds"
cp "$cm_dir"/deploy/crds/*.yaml "$bin_dir.tmp/cert-manager-crds/"
chmod -R u+w "$bin_dir.tmp"
rm -rf "$bin_dir"
mv "$bin_dir.tmp" "$bin_dir"
echo "$bin_dir"
