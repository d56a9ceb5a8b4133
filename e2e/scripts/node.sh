# shellcheck shell=bash
# The one-node mode of Keyward's local cluster (`cluster.sh up` with NODE=1), sourced by
# cluster.sh: kube-scheduler, kube-proxy (iptables), CoreDNS and a kubelet on containerd + runc
# with a bridge CNI, so Pods really run. Root only; Debian packages are installed when missing.
#
# The host is borrowed, not changed: containerd, the kubelet and every container run in a
# private mount + PID namespace (`unshare`) where /run and /var/log are fresh tmpfs and the
# kernel sysctls the kubelet insists on are read-only files with the value it wants. Killing
# that namespace's first process ends every container. What lives in the host's network
# namespace (the bridge, iptables rules, ip_forward, bridge-nf-call-iptables) and the kubelet's
# cgroups are recorded before and restored by `node_down`.

node_name=keyward-node
node_ip=10.244.0.1
pod_cidr=10.244.0.0/24
cluster_dns=10.0.0.10
bridge=kw-br0
# One node per machine: the data directory of the node that holds the bridge and the host
# changes. Written before the host is touched, removed once `down` has restored it.
node_record=/run/keyward-node
pause_image=keyward.local/pause:3.10
probe_image=keyward.local/probe:1
# skopeo is not the node's: the installed tests read the image archive with it, as a second
# implementation of both formats the archive claims.
node_packages=(containerd runc containernetworking-plugins iptables nftables conntrack gcc libc6-dev skopeo)

# Host settings the node changes, restored by node_down.
node_sysctls=(net/ipv4/ip_forward net/bridge/bridge-nf-call-iptables net/bridge/bridge-nf-call-ip6tables)

node_require() {
  if [[ "$(id -u)" != 0 ]]; then
    log "NODE=1 runs a kubelet and containerd: run it as root"
    return 1
  fi
  if ! iptables -V 2>/dev/null | grep -q nf_tables && command -v iptables >/dev/null; then
    log "the node saves and restores the host's firewall with nft: iptables must be the nf_tables flavour"
    return 1
  fi
  local missing=()
  for p in "${node_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    log "installing ${missing[*]} (first run only)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  fi
}

# The client certificate of one of the cluster's identities: gen_client name CN O
gen_client() {
  local pki="$dir/pki" name="$1" cn="$2" org="$3"
  openssl req -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -out "$pki/$name.csr" -subj "/O=$org/CN=$cn" 2>/dev/null
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -out "$pki/$name.crt" -days 7 -extfile "$pki/client.ext" 2>/dev/null
  write_kubeconfig "$dir/$name.kubeconfig" "$cn" "$pki/$name.crt" "$pki/$name.key"
}

node_certs() {
  local pki="$dir/pki"
  gen_client kubelet "system:node:$node_name" system:nodes
  gen_client kube-scheduler system:kube-scheduler system:kube-scheduler
  gen_client kube-proxy system:kube-proxy system:node-proxier
  # The API server's identity towards the kubelet (logs, exec, port-forward).
  gen_client apiserver-kubelet kube-apiserver-kubelet-client system:masters
  printf 'subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth\n' "$node_ip" "$node_name" >"$pki/kubelet-serving.ext"
  openssl req -newkey rsa:2048 -nodes -keyout "$pki/kubelet-serving.key" -out "$pki/kubelet-serving.csr" \
    -subj "/O=system:nodes/CN=system:node:$node_name" 2>/dev/null
  openssl x509 -req -in "$pki/kubelet-serving.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -out "$pki/kubelet-serving.crt" -days 7 -extfile "$pki/kubelet-serving.ext" 2>/dev/null
}

node_claim_bridge() {
  # A node whose owner has exited is being torn down by its watchdog (a test binary that just
  # finished): wait for it to give the host back. A live node is refused. A record whose node
  # left no saved host state (its `up` died early, or its directory was removed) is stale, and
  # its bridge, if any, is taken back: otherwise every later `up` fails with "File exists".
  local other waited=0 took_over=""
  while [[ -f "$node_record" ]]; do
    other="$(cat "$node_record")"
    [[ "$other" == "$dir" || ! -d "$other/node/host" ]] && break
    if ! node_stopping "$other"; then
      echo "cluster: $bridge belongs to the node in $other; one node per machine (cluster-down there first)" >&2
      return 1
    fi
    if [[ -z "$took_over" ]] && node_abandoned "$other"; then
      took_over=1
      # Nobody is left to finish that teardown (its owner and its watchdog are gone, e.g. both
      # killed together): finish it here rather than wait for a `down` that never comes.
      echo "cluster: the node in $other was left half stopped; tearing it down" >&2
      KEYWARD_CLUSTER_DIR="$other" NODE=1 bash "$self" down || true
      continue
    fi
    if (( waited++ >= 180 )); then
      echo "cluster: the node in $other is still stopping after 180 s; one node per machine" >&2
      return 1
    fi
    sleep 1
  done
  if ip link show "$bridge" >/dev/null 2>&1; then
    echo "cluster: removing $bridge left by a node that did not finish" >&2
    ip link del "$bridge"
  fi
  echo "$dir" >"$node_record"
}

# Whether the node in directory $1 is on its way down: `down` has begun, or the process that
# owns it (KEYWARD_CLUSTER_OWNER) has exited and its watchdog is about to begin.
node_stopping() {
  [[ -e "$1/stopping" ]] && return 0
  [[ -f "$1/owner" ]] && ! kill -0 "$(cat "$1/owner")" 2>/dev/null
}

# Whether the node in directory $1 is on its way down with nobody to take it there: its owner
# has exited (or it had none) and its watchdog, the process that runs `down`, is gone too.
node_abandoned() {
  [[ -f "$1/owner" ]] && kill -0 "$(cat "$1/owner")" 2>/dev/null && return 1
  [[ -f "$1/watchdog.pid" ]] && kill -0 "$(cat "$1/watchdog.pid")" 2>/dev/null && return 1
  return 0
}

# Records what node_down restores, then prepares the host's network namespace.
node_host_prepare() {
  local saved="$dir/node/host"
  mkdir -p "$saved"
  for s in "${node_sysctls[@]}"; do
    [[ -e "/proc/sys/$s" ]] && cat "/proc/sys/$s" >"$saved/$(echo "$s" | tr / .)"
  done
  # iptables here is the nf_tables flavour: the whole ruleset (both families, and which tables
  # exist at all) is what to put back.
  nft list ruleset >"$saved/ruleset"
  for s in "${node_sysctls[@]}"; do
    [[ -e "/proc/sys/$s" ]] && echo 1 >"/proc/sys/$s"
  done
  # The node's address is the bridge's: Pods reach it as their gateway, the host as a local
  # address, and nothing listens on the machine's real interfaces.
  ip link add "$bridge" type bridge
  ip addr add "$node_ip/24" dev "$bridge"
  ip link set "$bridge" up
}

node_host_restore() {
  local saved="$dir/node/host"
  if [[ -d "$saved" ]]; then node_host_put_back "$saved"; fi
  if [[ -f "$node_record" && "$(cat "$node_record")" == "$dir" ]]; then rm -f "$node_record"; fi
}

node_host_put_back() {
  local saved="$1"
  ip link del "$bridge" 2>/dev/null || true
  # Pod network interfaces left by a killed runtime.
  for link in $(ip -o link show type veth 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^veth' || true); do
    ip link del "$link" 2>/dev/null || true
  done
  if [[ -f "$saved/ruleset" ]]; then
    nft flush ruleset
    nft -f "$saved/ruleset"
  fi
  local s f
  for s in "${node_sysctls[@]}"; do
    f="$saved/$(echo "$s" | tr / .)"
    [[ -f "$f" ]] && cat "$f" >"/proc/sys/$s"
  done
  # The kubelet's cgroups (empty once the node namespace is gone), deepest first.
  for root in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [[ -d "$root" ]] && find "$root" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  true
}

# The node's own images, since no registry is reachable: the sandbox (pause) image, and the
# probe the installed tests run as a workload (e2e/node/probe).
node_images() {
  local out="$dir/node/images"
  mkdir -p "$out/pause" "$out/probe"
  gcc -static -Os -o "$out/pause/pause" "$repo/e2e/node/pause.c"
  strip "$out/pause/pause"
  python3 "$repo/image/oci.py" --rootfs "$out/pause" --name "$pause_image" --user 65535:65535 \
    --cmd /pause --out "$out/pause.tar" >/dev/null
  (cd "$repo/e2e/node/probe" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/probe/probe" .)
  python3 "$repo/image/oci.py" --rootfs "$out/probe" --name "$probe_image" --user 65532:65532 \
    --cmd /probe --out "$out/probe.tar" >/dev/null
}

node_configs() {
  local n="$dir/node"
  mkdir -p "$n/cni" "$n/cni-ipam" "$n/containerd" "$n/kubelet" "$n/sysctl"
  cat >"$n/containerd.toml" <<EOF
version = 2
root = "$n/containerd/root"
# /run is a tmpfs of the node namespace: the shims' sockets (hard-coded under /run/containerd)
# never touch the host.
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$n/containerd.sock"
[ttrpc]
  address = "$n/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$n/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$pause_image"
  # The VM's capability bounding set lacks CAP_SYS_RESOURCE: never lower oom_score_adj.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$n/cni"
EOF
  cat >"$n/cni/10-keyward.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "keyward",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$pod_cidr", "gateway": "$node_ip"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$n/cni-ipam"
      }
    }
  ]
}
EOF
  cat >"$n/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The host has cgroup v1 and no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$n/containerd.sock
podLogsDir: /var/log/pods
address: $node_ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
tlsCertFile: $dir/pki/kubelet-serving.crt
tlsPrivateKeyFile: $dir/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization:
  mode: Webhook
clusterDomain: cluster.local
clusterDNS: [$cluster_dns]
resolvConf: $n/resolv.conf
failSwapOn: false
maxPods: 60
serializeImagePulls: false
# A shared machine: do not evict on its disk or memory figures.
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
  # Pods with dnsPolicy Default get no upstream: the machine has no resolver for them.
  : >"$n/resolv.conf"
}

# Inside the node namespace (PID 1 there): private mounts, then containerd and the kubelet.
node_inner() {
  local n="$dir/node" bins="$1"
  mount --make-rprivate /
  mount -t tmpfs -o mode=755 node-run /run
  mount -t tmpfs -o mode=755 node-log /var/log
  # The kubelet sets these kernel tunables unless they already hold the value it wants; here
  # they read as that value and the host's stay untouched.
  local want path
  while read -r path want; do
    if [[ -e "/proc/sys/$path" && "$(cat "/proc/sys/$path")" != "$want" ]]; then
      echo "$want" >"$n/sysctl/$(echo "$path" | tr / .)"
      mount --bind "$n/sysctl/$(echo "$path" | tr / .)" "/proc/sys/$path"
      mount -o remount,bind,ro "/proc/sys/$path"
    fi
  done <<'EOF'
vm/overcommit_memory 1
vm/panic_on_oom 0
kernel/panic 10
kernel/panic_on_oops 1
kernel/keys/root_maxkeys 1000000
kernel/keys/root_maxbytes 25000000
EOF
  mount --make-rshared /
  containerd --config "$n/containerd.toml" >"$dir/containerd.log" 2>&1 &
  local ctr_pid=$!
  for _ in $(seq 1 100); do [[ -S "$n/containerd.sock" ]] && break; sleep 0.1; done
  for image in pause probe; do
    ctr --address "$n/containerd.sock" -n k8s.io images import "$n/images/$image.tar" >>"$dir/containerd.log" 2>&1
  done
  "$bins/kubelet" --config "$n/kubelet.yaml" --kubeconfig "$dir/kubelet.kubeconfig" \
    --hostname-override "$node_name" --node-ip "$node_ip" --root-dir "$n/kubelet" --v=1 >"$dir/kubelet.log" 2>&1 &
  local kubelet_pid=$!
  trap 'kill -TERM $kubelet_pid $ctr_pid 2>/dev/null; wait; exit 0' TERM INT
  # PID 1 of the namespace: when it ends, the kernel ends every container with it.
  wait -n "$kubelet_pid" "$ctr_pid"
  echo "node: containerd or the kubelet exited" >&2
}

node_dns() {
  local bins="$1"
  cat >"$dir/node/Corefile" <<EOF
.:53 {
    bind $node_ip
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $dir/kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 30
}
EOF
  start coredns "$bins/coredns" -conf "$dir/node/Corefile"
  # CoreDNS runs on the node's address; the kube-dns Service points there, as in a cluster.
  kubectl --kubeconfig "$dir/kubeconfig" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system, labels: {k8s-app: kube-dns}}
spec:
  clusterIP: $cluster_dns
  ports:
    - {name: dns, port: 53, protocol: UDP, targetPort: 53}
    - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-node
  namespace: kube-system
  labels: {kubernetes.io/service-name: kube-dns, endpointslice.kubernetes.io/managed-by: keyward-cluster}
addressType: IPv4
endpoints:
  - addresses: [$node_ip]
    conditions: {ready: true}
ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOF
}

node_proxy() {
  local bins="$1"
  cat >"$dir/node/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $dir/kube-proxy.kubeconfig}
hostnameOverride: $node_name
clusterCIDR: $pod_cidr
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:$(free_port)
metricsBindAddress: 127.0.0.1:$(free_port)
# Leave the host's conntrack and route_localnet sysctls alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
nodePortAddresses: [$node_ip/32]
EOF
  start kube-proxy "$bins/kube-proxy" --config "$dir/node/kube-proxy.yaml" --v=1
}

# Starts the node after the control plane is up. $1: the directory of the Kubernetes binaries.
# The certificates and node_host_prepare ran before the API server started.
node_up() {
  local bins="$1"
  node_images
  node_configs
  start kube-scheduler "$bins/kube-scheduler" --kubeconfig "$dir/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig "$dir/kube-scheduler.kubeconfig" --authorization-kubeconfig "$dir/kube-scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 0 --v=1
  start node unshare --mount --pid --fork --mount-proc --kill-child \
    env KEYWARD_CLUSTER_DIR="$dir" bash "$self" node-inner "$bins"
  node_proxy "$bins"
  node_dns "$bins"
  local ready=""
  for _ in $(seq 1 600); do
    if ! alive node; then break; fi
    if kubectl --kubeconfig "$dir/kubeconfig" get node "$node_name" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True; then ready=1; break; fi
    sleep 0.2
  done
  if [[ -z "$ready" ]]; then
    log "the node did not become Ready; last kubelet log lines:"
    tail -n 30 "$dir/kubelet.log" >&2 || true
    return 1
  fi
  # Pods reach the API server and DNS through Service addresses: wait until kube-proxy has
  # programmed both.
  ready=""
  for _ in $(seq 1 300); do
    if ! alive kube-proxy || ! alive coredns; then break; fi
    if iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q "default/kubernetes:https" \
        && iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q "kube-system/kube-dns:dns"; then ready=1; break; fi
    sleep 0.2
  done
  if [[ -z "$ready" ]]; then
    log "kube-proxy did not program the Services; last kube-proxy and CoreDNS log lines:"
    tail -n 15 "$dir/kube-proxy.log" "$dir/coredns.log" >&2 || true
    return 1
  fi
  log "node $node_name Ready ($node_ip); containerd at $dir/node/containerd.sock"
}
