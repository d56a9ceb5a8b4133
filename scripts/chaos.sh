#!/usr/bin/env bash
# Faults, measured: a provider outage under N ExternalSecrets and an API server + etcd restart
# under the reconciler, the webhook and the provider, on a control plane of its own. Prints a
# table (scenario, Secrets emptied, processes exited, time to converge, peak RSS). `make chaos`
# runs this; figures and the machine they were taken on: docs/reliability.md.
#
# KEYWARD_CHAOS_N (2000)            ExternalSecrets per scenario
# KEYWARD_CHAOS_OUTAGE (20)         seconds the provider is down
# KEYWARD_CHAOS_API_OUTAGE (30)     seconds kube-apiserver and etcd are down
# KEYWARD_CHAOS_CHURN (120)         seconds of churn (3600 for the full soak)
# KEYWARD_CHAOS_SCENARIOS           which to run (outage,restart,churn: all by default)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/keyward/target}"
export KEYWARD_CACHE_DIR="${KEYWARD_CACHE_DIR:-$HOME/.cache/keyward}"
# The control plane is this run's own: the scenario stops its API server.
unset KEYWARD_TEST_KUBECONFIG

cargo build --release -q -p keyward-reconciler -p keyward-provider-fake -p keyward-webhook --bins
KEYWARD_RECONCILER_BIN="$CARGO_TARGET_DIR/release/keyward-reconciler" \
KEYWARD_PROVIDER_FAKE_BIN="$CARGO_TARGET_DIR/release/keyward-provider-fake" \
KEYWARD_WEBHOOK_BIN="$CARGO_TARGET_DIR/release/keyward-webhook" \
  cargo bench -q -p keyward-reconciler --bench chaos
