# Keyward's front door: a newcomer and CI use the same words.
SHELL := /bin/bash
export CARGO_TARGET_DIR ?= $(HOME)/.cache/keyward/target
export KEYWARD_CACHE_DIR ?= $(HOME)/.cache/keyward

.PHONY: help check test generate generate-check crds crds-check flags flags-check release cluster-up cluster-down demo bench chaos controlplane images

help:
	@echo "make demo          run the local demo against a local control plane"
	@echo "make check         the everyday command: fmt, drift, dependency policy, clippy, unit and in-process tests (no root, no Go)"
	@echo "make test          the whole suite (fmt, clippy, unit, integration, e2e, drift)"
	@echo "make generate      regenerate the CRD YAML and the flag reference (docs/flags.md)"
	@echo "make release       write the release artifacts into dist/ (image, SBOM, chart, CLI, krew manifest, checksums)"
	@echo "make cluster-up    start kube-apiserver + etcd on loopback (prints export KUBECONFIG=...)"
	@echo "                   NODE=1: a one-node cluster that runs Pods (root)"
	@echo "make cluster-down  stop it, remove its data, restore the host"
	@echo "make images        build dist/keyward-image.tar (and import it into the node when one is up)"
	@echo "make bench         run the benchmarks and print their figures"
	@echo "make chaos         provider outage and API server restart, measured (a table)"

check:
	bash scripts/check.sh

test:
	bash scripts/test.sh

generate: crds flags

generate-check: crds-check flags-check

crds:
	cargo run -q -p keyward-provider-registry --features generator --bin keyward-crdgen -- crds/yaml --chart charts/keyward/templates/crds

crds-check:
	cargo run -q -p keyward-provider-registry --features generator --bin keyward-crdgen -- --check crds/yaml --chart charts/keyward/templates/crds

# The flag reference runs every binary's --help: the build is the one scripts/test.sh does before
# it checks the page (so there it costs nothing); flags-check comes after that build.
flags:
	cargo build -q --workspace --bins --all-features
	python3 scripts/flags.py --bin-dir "$(CARGO_TARGET_DIR)/debug"

flags-check:
	cargo build -q --workspace --bins --all-features
	python3 scripts/flags.py --check --bin-dir "$(CARGO_TARGET_DIR)/debug"

controlplane:
	bash e2e/scripts/build-controlplane.sh

cluster-up:
	@bash e2e/scripts/cluster.sh up

cluster-down:
	@bash e2e/scripts/cluster.sh down

demo:
	bash scripts/demo.sh

bench:
	bash scripts/bench.sh

chaos:
	bash scripts/chaos.sh

images:
	@bash image/build.sh >/dev/null

release:
	bash scripts/release.sh
