#!/usr/bin/env bash
# Writes the sample reviews into fuzz/corpus/review as the fuzzer's starting inputs.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/keyward/target}"
KEYWARD_WRITE_CORPUS="$PWD/fuzz/corpus/review" cargo test -q -p keyward-webhook --test garbage write_seed_corpus -- --ignored
