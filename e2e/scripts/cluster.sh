#!/usr/bin/env bash
# Starts and stops Keyward's local control plane: etcd, kube-apiserver and
# kube-controller-manager on free loopback ports, with generated certificates, RBAC and the
# admission plugins of a real cluster (webhooks included). With NODE=1 it is a one-node cluster
# that runs Pods: kube-scheduler, kube-proxy, CoreDNS and a kubelet on containerd (node.sh).
#
#   cluster.sh up      start (or reuse) and print `export KUBECONFIG=...`
#   cluster.sh down    stop every process, remove the data, restore the host
#   cluster.sh status  print whether it runs
#   cluster.sh node-socket  print the node's containerd socket (fails without a node)
#   cluster.sh node-prepare install the node's Debian packages when missing (root)
#
# NODE=1                 the one-node cluster (root)
# KEYWARD_CLUSTER_DIR    data directory (default: <repo>/.keyward/cluster)
# KEYWARD_CLUSTER_OWNER  a pid; when that process exits the control plane is torn down
#                        (tests use this so a crashed test run leaves nothing behind)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="${KEYWARD_CLUSTER_DIR:-$repo/.keyward/cluster}"
self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"

log() { echo "cluster: $*" >&2; }

# shellcheck source=node.sh
source "$(dirname "$self")/node.sh"

# Ports come from below the kernel's ephemeral range (32768-60999), where every outgoing
# connection takes its local port: one could take a port chosen there before its server binds
# it, or while the API server is stopped in a restart test. 12000-19999 also keeps clear of the
# kubelet's and kube-proxy's ports (10248-10259), the tests' own (20000-29999) and NodePorts.
# Ports already handed out are kept in $dir/ports, so two calls never return the same one.
free_port() {
  python3 - "$dir/ports" <<'PY'
import random, socket, sys
given_file = sys.argv[1]
try:
    given = set(open(given_file).read().split())
except FileNotFoundError:
    given = set()
for _ in range(4000):
    port = random.randint(12000, 19999)
    if str(port) in given:
        continue
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", port))
    except OSError:
        continue
    finally:
        s.close()
    with open(given_file, "a") as f:
        f.write(f"{port}\n")
    print(port)
    break
else:
    sys.exit("cluster: no free port in 12000-19999")
PY
}

alive() { [[ -f "$dir/$1.pid" ]] && kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null; }

down() {
  # Seen by a node waiting to start (node_claim_bridge): this one is on its way out.
  [[ -d "$dir" ]] && touch "$dir/stopping"
  # The node first: its containers must stop before the API server they report to.
  for name in watchdog node kube-proxy coredns kube-scheduler kube-controller-manager kube-apiserver etcd; do
    # The watchdog runs this very function when its owner exits: it must not kill itself.
    if [[ "$name" == watchdog && -n "${KEYWARD_CLUSTER_IN_WATCHDOG:-}" ]]; then continue; fi
    if [[ -f "$dir/$name.pid" ]]; then
      local pid
      pid="$(cat "$dir/$name.pid")"
      # Each process leads its own process group (setsid), so children go too.
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
  done
  node_host_restore
  rm -rf "$dir"
}

# Runs "$@" detached in its own session, logging to $dir/$name.log; records the pid.
start() {
  local name="$1"; shift
  setsid "$@" >"$dir/$name.log" 2>&1 < /dev/null &
  echo $! >"$dir/$name.pid"
}

gen_certs() {
  local pki="$dir/pki"
  mkdir -p "$pki"
  cd "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 7 -subj "/CN=keyward-local-ca" 2>/dev/null
  cat >server.ext <<EXT
subjectAltName=IP:127.0.0.1,IP:$node_ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.0.0.1
extendedKeyUsage=serverAuth
EXT
  openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=kube-apiserver" 2>/dev/null
  openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 7 -extfile server.ext 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' >client.ext
  openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=keyward-admin" 2>/dev/null
  openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 7 -extfile client.ext 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout kcm.key -out kcm.csr -subj "/CN=system:kube-controller-manager" 2>/dev/null
  openssl x509 -req -in kcm.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out kcm.crt -days 7 -extfile client.ext 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  cd - >/dev/null
}

write_kubeconfig() { # file user cert key
  local b64="base64 -w0"
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: keyward-local
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $($b64 <"$dir/pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $($b64 <"$3")
    client-key-data: $($b64 <"$4")
contexts:
- name: keyward-local
  context: {cluster: keyward-local, user: $2}
current-context: keyward-local
KC
}

up() {
  local node="${NODE:-}"
  [[ "$node" == 0 ]] && node=""
  if alive kube-apiserver && alive etcd && { [[ -z "$node" ]] || alive node; }; then
    echo "export KUBECONFIG=$dir/kubeconfig"
    return 0
  fi
  [[ -d "$dir" ]] && down
  local bins
  if [[ -n "$node" ]]; then
    node_require
    bins="$(bash "$repo/e2e/scripts/build-controlplane.sh" node)"
    node_claim_bridge
  else
    bins="$(bash "$repo/e2e/scripts/build-controlplane.sh")"
  fi
  mkdir -p "$dir/etcd"
  trap 'log "interrupted, stopping"; down; exit 130' INT TERM
  gen_certs
  local etcd_port peer_port
  etcd_port="$(free_port)"; peer_port="$(free_port)"; api_port="$(free_port)"
  echo "$api_port" >"$dir/api.port"
  # etcd's default 2 GiB quota can be reached by the benchmark at 100,000 ExternalSecrets (four
  # writes of each plus their revisions until compaction); 8 GiB is its documented maximum.
  start etcd "$bins/etcd" --name keyward --data-dir "$dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
    --initial-cluster "keyward=http://127.0.0.1:$peer_port" --unsafe-no-fsync --quota-backend-bytes 8589934592 --log-level warn
  # A node's Pods reach the API server through the `kubernetes` Service, whose endpoint is the
  # advertised address: the node's, and the server listens there too.
  local node_flags=(--bind-address 127.0.0.1 --advertise-address 127.0.0.1)
  if [[ -n "$node" ]]; then
    node_flags=(--bind-address 0.0.0.0 --advertise-address "$node_ip"
      --kubelet-client-certificate "$dir/pki/apiserver-kubelet.crt" --kubelet-client-key "$dir/pki/apiserver-kubelet.key"
      --kubelet-certificate-authority "$dir/pki/ca.crt" --kubelet-preferred-address-types InternalIP)
    node_certs
    node_host_prepare
  fi
  start kube-apiserver "$bins/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    "${node_flags[@]}" --secure-port "$api_port" \
    --tls-cert-file "$dir/pki/server.crt" --tls-private-key-file "$dir/pki/server.key" \
    --client-ca-file "$dir/pki/ca.crt" \
    --service-account-key-file "$dir/pki/sa.pub" --service-account-signing-key-file "$dir/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --api-audiences https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range 10.0.0.0/24 \
    --authorization-mode Node,RBAC \
    --enable-admission-plugins NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultStorageClass,ResourceQuota,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy \
    --allow-privileged=true --profiling=false --v=1
  write_kubeconfig "$dir/kubeconfig" keyward-admin "$dir/pki/admin.crt" "$dir/pki/admin.key"
  write_kubeconfig "$dir/kcm.kubeconfig" kube-controller-manager "$dir/pki/kcm.crt" "$dir/pki/kcm.key"
  local ready=""
  for _ in $(seq 1 600); do
    if ! alive kube-apiserver; then break; fi
    if curl -fsS --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
        "https://127.0.0.1:$api_port/readyz" >/dev/null 2>&1; then ready=1; break; fi
    sleep 0.1
  done
  if [[ -z "$ready" ]]; then
    log "kube-apiserver did not become ready; last log lines:"
    tail -n 30 "$dir/kube-apiserver.log" >&2 || true
    down
    return 1
  fi
  # The controller manager brings garbage collection (owner references), namespace deletion,
  # the default ServiceAccount of each namespace and Deployments, as in a real cluster; with a
  # node, all of its controllers. Each controller acts as its own ServiceAccount, whose
  # bootstrap roles allow what it does.
  local controllers='garbage-collector-controller,namespace-controller,serviceaccount-controller,serviceaccount-token-controller,deployment-controller,replicaset-controller'
  [[ -n "$node" ]] && controllers='*'
  start kube-controller-manager "$bins/kube-controller-manager" \
    --kubeconfig "$dir/kcm.kubeconfig" --authentication-kubeconfig "$dir/kcm.kubeconfig" \
    --authorization-kubeconfig "$dir/kcm.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false \
    --service-account-private-key-file "$dir/pki/sa.key" --root-ca-file "$dir/pki/ca.crt" \
    --use-service-account-credentials=true \
    --controllers "$controllers" \
    --v=1
  if [[ -n "$node" ]] && ! node_up "$bins"; then
    down
    return 1
  fi
  if [[ -n "${KEYWARD_CLUSTER_OWNER:-}" ]]; then
    echo "$KEYWARD_CLUSTER_OWNER" >"$dir/owner"
    start watchdog bash -c "while kill -0 $KEYWARD_CLUSTER_OWNER 2>/dev/null; do sleep 1; done; KEYWARD_CLUSTER_IN_WATCHDOG=1 KEYWARD_CLUSTER_DIR='$dir' bash '$self' down"
  fi
  trap - INT TERM
  log "ready: kube-apiserver https://127.0.0.1:$api_port (logs in $dir)"
  echo "export KUBECONFIG=$dir/kubeconfig"
}

case "${1:-}" in
  up) up ;;
  node-inner) node_inner "$2" ;;
  node-prepare) node_require ;;
  node-socket) if alive node && [[ -S "$dir/node/containerd.sock" ]]; then echo "$dir/node/containerd.sock"; else exit 1; fi ;;
  down) down; log "stopped" ;;
  status) if alive kube-apiserver; then echo "running: export KUBECONFIG=$dir/kubeconfig"; else echo "not running"; exit 1; fi ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
