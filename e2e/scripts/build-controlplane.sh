#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go module in e2e/controlplane into a cache directory
# keyed by the pinned versions, so only the first run pays for the build. With the argument
# `node`, also the node's binaries: kube-scheduler, kubelet, kube-proxy, and CoreDNS (from its
# own module in e2e/tools/coredns, so its client libraries do not meet Kubernetes' pins).
# Prints the directory holding the binaries.
set -euo pipefail
# Absolute, so the script can run itself again after it changes directory.
self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../controlplane" && pwd)"
k8s_version="$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")"
etcd_version="$(awk '$1=="go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")"
cache_root="${KEYWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keyward}"
mkdir -p "$cache_root/controlplane"
# One build at a time: test binaries started together all ask for the binaries.
exec 9>"$cache_root/controlplane/.build.lock"
flock 9
bin_dir="$cache_root/controlplane/kube-${k8s_version}-etcd-${etcd_version}"
coredns_mod="$(cd "$here/../tools/coredns" && pwd)"
coredns_version="$(awk '$1=="require" && $2=="github.com/coredns/coredns" {print $3; exit}' "$coredns_mod/go.mod")"
node_dir="$cache_root/controlplane/node-kube-${k8s_version}-coredns-${coredns_version}"
export CGO_ENABLED=0 GOFLAGS=-mod=readonly
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${k8s_version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$k8s_version" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"

# The node's binaries live in their own directory, next to links to the control plane's.
build_node() {
  if [[ -x "$node_dir/kubelet" && -x "$node_dir/kube-proxy" && -x "$node_dir/kube-scheduler" && -x "$node_dir/coredns" ]]; then
    return 0
  fi
  rm -rf "$node_dir.tmp"
  mkdir -p "$node_dir.tmp"
  echo "building kube-scheduler, kubelet, kube-proxy ${k8s_version} and CoreDNS ${coredns_version} into $node_dir (first run only)" >&2
  (cd "$here" && for cmd in kube-scheduler kubelet kube-proxy; do
    go build -trimpath -ldflags "$ldflags" -o "$node_dir.tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd" >&2
  done)
  (cd "$coredns_mod" && go build -trimpath -ldflags "-s -w" -o "$node_dir.tmp/coredns" github.com/coredns/coredns >&2)
  rm -rf "$node_dir"
  mv "$node_dir.tmp" "$node_dir"
}

if [[ -x "$bin_dir/kube-apiserver" && -x "$bin_dir/kube-controller-manager" && -x "$bin_dir/etcd" ]]; then
  if [[ "${1:-}" == node ]]; then
    build_node
    for b in kube-apiserver kube-controller-manager etcd; do ln -sf "$bin_dir/$b" "$node_dir/$b"; done
    echo "$node_dir"
  else
    echo "$bin_dir"
  fi
  exit 0
fi
mkdir -p "$bin_dir.tmp"
echo "building kube-apiserver, kube-controller-manager ${k8s_version} and etcd ${etcd_version} into $bin_dir (first run only)" >&2
cd "$here"
go build -trimpath -ldflags "$ldflags" -o "$bin_dir.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
go build -trimpath -ldflags "$ldflags" -o "$bin_dir.tmp/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager >&2
go build -trimpath -ldflags "-s -w" -o "$bin_dir.tmp/etcd" go.etcd.io/etcd/server/v3 >&2
rm -rf "$bin_dir"
mv "$bin_dir.tmp" "$bin_dir"
exec bash "$self" "$@"
