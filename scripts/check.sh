#!/usr/bin/env bash
# The everyday command: everything that runs in-process, without root, Go or a control plane.
# `make test` is the whole suite (it adds the end-to-end and installed tiers); CI runs that.
set -euo pipefail
source "$(dirname "$0")/common.sh"

step "rustfmt"
cargo fmt --all -- --check

# docs/flags.md, the other generated file, runs every binary: `make test` checks it after its
# build of them, and `make generate-check` builds them to check it; here it would add that build.
step "generated CRD YAML and chart partials are up to date"
make -s crds-check

step "the documentation names files and items that exist"
python3 scripts/check-doc-refs.py

step "module graph: no import cycle of more than two files, crates in their layers, the CLI through one entry point"
python3 scripts/check-module-cycles.py --self-test
python3 scripts/check-module-cycles.py

step "docs/architecture.md's crate table names every workspace package"
python3 scripts/check-architecture.py

# Not in scripts/test.sh: installing cargo-deny costs a cold CI machine about 4.5 minutes.
step "dependency policy: licenses, banned crates, sources (deny.toml)"
bash scripts/deny.sh

step "clippy"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "unit tests of every crate"
cargo test --workspace --all-features --lib --bins

# Integration tests that need nothing but the process they run in (no API server, no store
# server, no root): the template engine's suites, the CRD drift check, the provider runtime's
# mTLS server, the webhook's garbage reviews.
step "in-process integration tests"
cargo test --all-features -p keyward-template --tests
cargo test --all-features -p keyward-crds --test drift
cargo test --all-features -p keyward-provider-runtime --test server
# The webhook's one integration-test binary also holds its end-to-end and load tests: only the
# garbage module's tests run here.
cargo test --all-features -p keyward-webhook --test webhook garbage::
