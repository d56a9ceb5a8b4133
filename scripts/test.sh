#!/usr/bin/env bash
# The whole suite, in the order that fails fastest. `make test` and CI run this.
set -euo pipefail
source "$(dirname "$0")/common.sh"

step "rustfmt"
cargo fmt --all -- --check

step "generated CRD YAML and chart partials are up to date"
make -s crds-check

step "the documentation names files and items that exist"
python3 scripts/check-doc-refs.py

step "docs/architecture.md's crate table names every workspace package"
python3 scripts/check-architecture.py

step "disk room for the one-node cluster (stale test executables pruned when short)"
bash scripts/prune-target.sh

step "local control plane and node binaries (built once, then cached)"
bash e2e/scripts/build-controlplane.sh node

step "the one-node cluster's Debian packages (installed once; needs root)"
bash e2e/scripts/cluster.sh node-prepare

step "chart test tools: helm, cert-manager's CRDs, controller and CA injector (built once, then cached)"
bash e2e/scripts/build-tools.sh

step "store servers for the provider tests: Vault from its Go module, moto, Keystone and Barbican, Google's Secret Manager client and Microsoft's Key Vault clients from PyPI, slapd from Debian; Prometheus and promtool from Debian for the dashboard and alert-rule tests (once, then cached)"
bash e2e/scripts/build-vault.sh
bash e2e/scripts/install-moto.sh
bash e2e/scripts/install-openstack.sh
bash e2e/scripts/install-gcp-client.sh
bash e2e/scripts/install-azure-client.sh
bash e2e/scripts/install-slapd.sh
bash e2e/scripts/install-prometheus.sh

step "clippy"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "build every binary the end-to-end tests start"
cargo build --workspace --bins --all-features

# After the build above, whose binaries it runs (so it adds seconds, not a build).
step "generated flag reference (docs/flags.md) is up to date"
make -s flags-check

step "release build and container image (make images)"
bash image/build.sh >/dev/null

# make release's packing and checks on the image just built (no second release build): seconds.
step "release artifacts agree: SBOMs, chart, command-line archive, krew manifest, checksums"
release_dir="$(mktemp -d)"
KEYWARD_RELEASE_REUSE_BUILD=1 KEYWARD_RELEASE_DIR="$release_dir" bash scripts/release.sh
rm -rf "$release_dir"

step "unit, integration, end-to-end and installed tests"
# Each test binary starts its own control plane (about 5 s) unless KEYWARD_TEST_KUBECONFIG
# names a running one; a watchdog stops it when the binary exits. The installed tier
# (charts/tests/installed.rs) starts the one-node cluster and installs the image with Helm.
cargo test --workspace --all-features --no-fail-fast
