#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go module in e2e/controlplane into a cache directory
# keyed by the pinned versions, so only the first run pays for the build.
# Prints the directory holding the binaries.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../controlplane" && pwd)"
k8s_version="$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")"
etcd_version="$(awk '$1=="go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")"
cache_root="${KEYWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keyward}"
bin_dir="$cache_root/controlplane/kube-${k8s_version}-etcd-${etcd_version}"
if [[ -x "$bin_dir/kube-apiserver" && -x "$bin_dir/kube-controller-manager" && -x "$bin_dir/etcd" ]]; then
  echo "$bin_dir"
  exit 0
fi
mkdir -p "$bin_dir.tmp"
echo "building kube-apiserver, kube-controller-manager ${k8s_version} and etcd ${etcd_version} into $bin_dir (first run only)" >&2
cd "$here"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${k8s_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$k8s_version" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"
go build -trimpath -ldflags "$ldflags" -o "$bin_dir.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
go build -trimpath -ldflags "$ldflags" -o "$bin_dir.tmp/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager >&2
go build -trimpath -ldflags "-s -w" -o "$bin_dir.tmp/etcd" go.etcd.io/etcd/server/v3 >&2
rm -rf "$bin_dir"
mv "$bin_dir.tmp" "$bin_dir"
echo "$bin_dir"
