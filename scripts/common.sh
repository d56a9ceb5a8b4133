# Sourced by scripts/check.sh and scripts/test.sh: one build directory and one step marker, so
# `make check` and `make test` share their build and read the same.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/keyward/target}"
export KEYWARD_CACHE_DIR="${KEYWARD_CACHE_DIR:-$HOME/.cache/keyward}"
# A fresh clone gains nothing from incremental artifacts; they only fill the disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

step() { printf '\n==> %s (%s)\n' "$*" "$(date -u +%T)"; }
