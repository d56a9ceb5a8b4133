#!/usr/bin/env bash
# Writes the sample reviews into fuzz/seeds/review (the committed seed set) as the fuzzer's
# starting inputs; `scripts/fuzz.sh --minimise review` then drops those that add no coverage.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/keyward/target}"
KEYWARD_WRITE_CORPUS="$PWD/fuzz/seeds/review" cargo test -q -p keyward-webhook --test webhook garbage::write_seed_corpus -- --ignored
