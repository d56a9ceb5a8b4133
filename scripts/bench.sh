#!/usr/bin/env bash
# Benchmarks; each prints its figures. `make bench` runs this.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/keyward/target}"

# keyward-webhook: ExternalSecret validation over TLS keep-alive (reviews/s, p50/p99) and cache RSS
# with 10,000 namespaces and 1,000 ClusterProviders.
cargo run --release -q -p keyward-webhook --bin keyward-webhook-bench -- --connections 16 --seconds 5

# keyward-reconciler: N ExternalSecrets on the Fake provider against the local control plane: time to
# first sync next to a plain client creating N Secrets (the API server's ceiling), reconciler peak and
# steady RSS, provider RSS, API requests per sync and per no-change refresh (by verb, from the API
# server's apiserver_request_total), CPU per object of each process, a plain client making the
# same three writes a first sync makes (the second ceiling), and idle CPU over 30 s. Release
# builds. Figures: docs/performance.md.
cargo build --release -q -p keyward-reconciler -p keyward-provider-fake --bins
KEYWARD_RECONCILER_BIN="$CARGO_TARGET_DIR/release/keyward-reconciler" \
KEYWARD_PROVIDER_FAKE_BIN="$CARGO_TARGET_DIR/release/keyward-provider-fake" \
KEYWARD_BENCH_N="${KEYWARD_BENCH_N:-1000,10000}" \
  cargo bench -q -p keyward-reconciler --bench sync

# keyward-reconciler: what the stores see. N ExternalSecrets × 3 entries on the Vault dev server,
# then Secrets Manager and Parameter Store on moto, ten distinct secrets then all distinct: store
# reads of the first sync and of one refresh cycle (Vault's audit log, moto's request recorder),
# first sync time, peak RSS of the reconciler and the provider.
cargo build --release -q -p keyward-reconciler -p keyward-provider-vault -p keyward-provider-aws --bins
KEYWARD_RECONCILER_BIN="$CARGO_TARGET_DIR/release/keyward-reconciler" \
KEYWARD_PROVIDER_VAULT_BIN="$CARGO_TARGET_DIR/release/keyward-provider-vault" \
KEYWARD_PROVIDER_AWS_BIN="$CARGO_TARGET_DIR/release/keyward-provider-aws" \
  cargo bench -q -p keyward-reconciler --bench store_calls

# Providers: GetSecret round trip over one pooled mTLS connection (p50/p99 in µs) and the
# provider's RSS: keyward-provider-fake (10,000 calls), then keyward-provider-vault against
# `vault server -dev` and keyward-provider-aws against moto's server (1,000 calls each, loopback).
cargo bench -q -p keyward-provider-fake --bench get_secret
