#!/usr/bin/env bash
# The whole suite, in the order that fails fastest. `make test` and CI run this.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/keyward/target}"
export KEYWARD_CACHE_DIR="${KEYWARD_CACHE_DIR:-$HOME/.cache/keyward}"

step() { printf '\n==> %s\n' "$*"; }

step "rustfmt"
cargo fmt --all -- --check

step "generated files are up to date"
make -s generate-check

step "local control plane binaries (built once, then cached)"
bash e2e/scripts/build-controlplane.sh

step "chart test tools: helm, cert-manager's CRDs, controller and CA injector (built once, then cached)"
bash e2e/scripts/build-tools.sh

step "store servers for the provider tests: Vault from its Go module, moto from PyPI (once, then cached)"
bash e2e/scripts/build-vault.sh
bash e2e/scripts/install-moto.sh

step "clippy"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "build every binary the end-to-end tests start"
cargo build --workspace --bins --all-features

step "unit, integration and end-to-end tests"
# Each test binary starts its own control plane (about 5 s) unless KEYWARD_TEST_KUBECONFIG
# names a running one; a watchdog stops it when the binary exits.
cargo test --workspace --all-features --no-fail-fast
