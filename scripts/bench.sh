#!/usr/bin/env bash
# Benchmarks; each prints its figures, and each figure is printed beside its recorded reference
# (benches/reference.json) with the ratio, flagged when more than 10 % worse
# (scripts/bench-compare.py; the run exits 1 when one is). `make bench` runs this.
#
#   scripts/bench.sh [--record] [webhook] [sync] [shards] [store-calls] [get-secret]
#
# Names pick benchmarks (all when none is named); KEYWARD_BENCH_N picks the sizes of `sync`
# (default 1000,10000) and of `shards` (default 3000). --record makes this run's figures the
# references: a deliberate step, documented in docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/keyward/target}"

record=()
picked=()
for arg in "$@"; do
  case "$arg" in
    --record) record=(--record) ;;
    webhook | sync | shards | store-calls | get-secret) picked+=("$arg") ;;
    *) echo "unknown argument $arg (--record, webhook, sync, shards, store-calls, get-secret)" >&2; exit 2 ;;
  esac
done
wanted() { [[ ${#picked[@]} -eq 0 || " ${picked[*]} " == *" $1 "* ]]; }

benches() {

# keyward-webhook: ExternalSecret validation over TLS keep-alive (reviews/s, p50/p99) and cache RSS
# with 10,000 namespaces and 1,000 ClusterProviders.
wanted webhook && cargo run --release -q -p keyward-webhook --bin keyward-webhook-bench -- --connections 16 --seconds 5

# keyward-reconciler: N ExternalSecrets on the Fake provider against the local control plane: time to
# first sync next to a plain client creating N Secrets (the API server's ceiling), reconciler peak and
# steady RSS, provider RSS, API requests per sync and per no-change refresh (by verb, from the API
# server's apiserver_request_total), CPU per object of each process, a plain client making the
# same three writes a first sync makes (the second ceiling), and idle CPU over 30 s. Release
# builds. Figures: docs/performance.md.
wanted sync && cargo build --release -q -p keyward-reconciler -p keyward-provider-fake --bins &&
KEYWARD_RECONCILER_BIN="$CARGO_TARGET_DIR/release/keyward-reconciler" \
KEYWARD_PROVIDER_FAKE_BIN="$CARGO_TARGET_DIR/release/keyward-provider-fake" \
KEYWARD_BENCH_N="${KEYWARD_BENCH_N:-1000,10000}" \
  cargo bench -q -p keyward-reconciler --bench sync

# keyward-reconciler: first sync of N ExternalSecrets over 30 namespaces by three sharded
# replicas (--shard) against one reconciler, one after the other in this run, and the ratio.
# Release builds. Figures: docs/performance.md.
wanted shards && cargo build --release -q -p keyward-reconciler -p keyward-provider-fake --bins &&
KEYWARD_RECONCILER_BIN="$CARGO_TARGET_DIR/release/keyward-reconciler" \
KEYWARD_PROVIDER_FAKE_BIN="$CARGO_TARGET_DIR/release/keyward-provider-fake" \
KEYWARD_BENCH_N="${KEYWARD_BENCH_N:-3000}" \
  cargo bench -q -p keyward-reconciler --bench shards

# keyward-reconciler: what the stores see. N ExternalSecrets × 3 entries on the Vault dev server,
# then Secrets Manager and Parameter Store on moto, ten distinct secrets then all distinct: store
# reads of the first sync and of one refresh cycle (Vault's audit log, moto's request recorder),
# first sync time, peak RSS of the reconciler and the provider.
wanted store-calls && cargo build --release -q -p keyward-reconciler -p keyward-provider-vault -p keyward-provider-aws --bins &&
KEYWARD_RECONCILER_BIN="$CARGO_TARGET_DIR/release/keyward-reconciler" \
KEYWARD_PROVIDER_VAULT_BIN="$CARGO_TARGET_DIR/release/keyward-provider-vault" \
KEYWARD_PROVIDER_AWS_BIN="$CARGO_TARGET_DIR/release/keyward-provider-aws" \
  cargo bench -q -p keyward-reconciler --bench store_calls

# Providers: GetSecret round trip over one pooled mTLS connection (p50/p99 in µs) and the
# provider's RSS: keyward-provider-fake (10,000 calls), then keyward-provider-vault against
# `vault server -dev` and keyward-provider-aws against moto's server (1,000 calls each, loopback).
wanted get-secret && cargo bench -q -p keyward-provider-fake --bench get_secret
return 0
}

benches 2>&1 | python3 scripts/bench-compare.py "${record[@]}" benches/reference.json
