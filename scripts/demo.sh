#!/usr/bin/env bash
# `make demo`: Keyward end to end on this machine. Starts a local control plane, runs the
# webhook, the reconciler and the Kubernetes provider as local processes with real
# certificates, applies examples/, shows a Secret synced from another namespace through a
# ClusterProvider and a `kubectl apply` rejected by policy. Exits 0 only if all of it happened.
# KEEP=1 leaves everything running.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/keyward/target}"
demo="$repo/.keyward/demo"
export KEYWARD_CLUSTER_DIR="$demo/cluster"
bin="$CARGO_TARGET_DIR/debug"
pids=()

say() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
ok() { printf '    \033[32mok\033[0m %s\n' "$*"; }
fail() {
  printf '\n\033[31mdemo FAILED:\033[0m %s\n' "$*" >&2
  for log in "$demo"/*.log; do [[ -f "$log" ]] && { echo "--- $log" >&2; tail -n 15 "$log" >&2; }; done
  exit 1
}
cleanup() {
  if [[ "${KEEP:-0}" == 1 ]]; then
    say "KEEP=1: still running. export KUBECONFIG=$KUBECONFIG; logs in $demo; stop with: make cluster-down KEYWARD_CLUSTER_DIR=$KEYWARD_CLUSTER_DIR and kill ${pids[*]:-}"
    return
  fi
  for pid in "${pids[@]:-}"; do [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true; done
  bash e2e/scripts/cluster.sh down >/dev/null 2>&1 || true
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { # url what
  for _ in $(seq 1 300); do curl -fsS "$1" >/dev/null 2>&1 && return 0; sleep 0.2; done
  fail "$2 did not become ready at $1"
}
run_bg() { # name args...
  local name="$1"; shift
  "$@" >"$demo/$name.log" 2>&1 &
  pids+=("$!")
}
subst() { # file: replaces ${VAR} with the exported values below
  python3 -c 'import os,sys,re; t=open(sys.argv[1]).read(); print(re.sub(r"\$\{(\w+)\}", lambda m: os.environ[m.group(1)], t))' "$1"
}

say "Building Keyward (cached after the first run)"
cargo build -q -p keyward-webhook -p keyward-reconciler -p keyward-provider-kubernetes --bins
ok "keyward-webhook, keyward-reconciler, keyward-provider-kubernetes"

say "Starting the local control plane (kube-apiserver + etcd + kube-controller-manager on loopback)"
rm -rf "$demo"; mkdir -p "$demo"
eval "$(bash e2e/scripts/cluster.sh up)"
ok "$(kubectl get --raw /version | python3 -c 'import json,sys; print("Kubernetes", json.load(sys.stdin)["gitVersion"])')"

say "Installing the CRDs"
kubectl apply --server-side -f crds/yaml >/dev/null
kubectl wait --for condition=Established --timeout 60s -f crds/yaml >/dev/null
ok "$(ls crds/yaml | wc -l) CRDs Established"

say "Issuing certificates: a CA, the webhook's serving certificate, provider mTLS server and client"
pki="$demo/pki"; mkdir -p "$pki/webhook" "$pki/provider" "$pki/client"
(
  cd "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 1 -subj "/CN=keyward-demo-ca" 2>/dev/null
  for name in webhook provider; do
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$name.ext"
    openssl req -newkey rsa:2048 -nodes -keyout "$name/tls.key" -out "$name.csr" -subj "/CN=keyward-$name" 2>/dev/null
    openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$name/tls.crt" -days 1 -extfile "$name.ext" 2>/dev/null
    cp ca.crt "$name/ca.crt"
  done
  printf 'extendedKeyUsage=clientAuth\n' >client.ext
  openssl req -newkey rsa:2048 -nodes -keyout client/tls.key -out client.csr -subj "/CN=keyward-reconciler" 2>/dev/null
  openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client/tls.crt -days 1 -extfile client.ext 2>/dev/null
)
ok "certificates in $pki"

say "Starting the Kubernetes provider (gRPC over mTLS)"
provider_port="$(free_port)"; provider_health="$(free_port)"
run_bg provider "$bin/keyward-provider-kubernetes" --listen "127.0.0.1:$provider_port" \
  --health-listen "127.0.0.1:$provider_health" --tls-dir "$pki/provider" --log-format text
wait_http "http://127.0.0.1:$provider_health/readyz" "the Kubernetes provider"
ok "listening on 127.0.0.1:$provider_port"

say "Starting the admission webhook and registering it with the API server"
webhook_port="$(free_port)"; webhook_health="$(free_port)"
run_bg webhook "$bin/keyward-webhook" --listen "127.0.0.1:$webhook_port" \
  --health-listen "127.0.0.1:$webhook_health" --tls-dir "$pki/webhook" --log-format text
wait_http "http://127.0.0.1:$webhook_health/readyz" "the webhook"
export WEBHOOK_URL="https://127.0.0.1:$webhook_port" CA_BUNDLE="$(base64 -w0 <"$pki/ca.crt")"
subst scripts/demo-webhooks.yaml | kubectl apply -f - >/dev/null
ok "webhook at $WEBHOOK_URL, failurePolicy Fail for Keyward kinds"

say "Starting the reconciler"
reconciler_port="$(free_port)"
run_bg reconciler "$bin/keyward-reconciler" --health-listen "127.0.0.1:$reconciler_port" \
  --lease-namespace kube-system --log-format text
wait_http "http://127.0.0.1:$reconciler_port/readyz" "the reconciler"
ok "metrics on 127.0.0.1:$reconciler_port"

say "kubectl apply -f examples/00-namespaces.yaml: a Secret in 'remote', team-a (allowed), team-b"
kubectl apply -f examples/00-namespaces.yaml
kubectl create secret generic keyward-provider-tls -n keyward-system --from-file=ca.crt="$pki/ca.crt" \
  --from-file=tls.crt="$pki/client/tls.crt" --from-file=tls.key="$pki/client/tls.key" >/dev/null
ok "reconciler client certificate stored in keyward-system/keyward-provider-tls"

say "kubectl apply -f examples/01-kubernetes-config.yaml: read 'remote' as ServiceAccount secret-reader"
export API_SERVER_URL="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
export API_SERVER_CA_BASE64="$(kubectl config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')"
subst examples/01-kubernetes-config.yaml | kubectl apply -f -

say "kubectl apply -f examples/02-clusterprovider.yaml: only namespaces labelled keyward.dev/secrets-access=allowed"
export PROVIDER_ADDRESS="127.0.0.1:$provider_port"
subst examples/02-clusterprovider.yaml | kubectl apply -f -
kubectl wait clusterprovider/shared-kubernetes --for condition=Ready --timeout 60s >/dev/null \
  || fail "the ClusterProvider did not become Ready: $(kubectl get clusterprovider shared-kubernetes -o jsonpath='{.status.conditions}')"
kubectl get clusterprovider shared-kubernetes
ok "the provider answered Validate and Capabilities"

say "kubectl apply -f examples/03-externalsecret-allowed.yaml (namespace team-a)"
kubectl apply -f examples/03-externalsecret-allowed.yaml
kubectl wait externalsecret/database -n team-a --for condition=Ready --timeout 60s >/dev/null \
  || fail "team-a/database did not sync: $(kubectl get externalsecret database -n team-a -o jsonpath='{.status.conditions}')"
kubectl get externalsecret database -n team-a
user="$(kubectl get secret database -n team-a -o jsonpath='{.data.username}' | base64 -d)"
[[ "$user" == "app" ]] || fail "team-a/database has username '$user', expected 'app'"
ok "Secret team-a/database synced from remote/database (username=$user, password hidden)"

say "kubectl apply -f examples/04-externalsecret-denied.yaml (namespace team-b, not admitted)"
if out="$(kubectl apply -f examples/04-externalsecret-denied.yaml 2>&1)"; then
  fail "team-b's ExternalSecret was accepted: $out"
fi
echo "$out"
grep -q 'does not allow namespace "team-b"' <<<"$out" || fail "rejected, but not by the namespace policy: $out"
ok "rejected at admission with the policy message"

say "Demo complete"
