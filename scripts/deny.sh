#!/usr/bin/env bash
# Keyward's dependency policy (deny.toml): licenses, banned crates and sources, by cargo-deny.
# cargo-deny is installed once into the cache (`cargo install --locked`, about 4.5 minutes on two
# busy cores), which is why `make check` runs this and `make test`, what CI runs, does not.
# Arguments are the checks to run (default: licenses bans sources; `advisories` needs the
# network for the RustSec database).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=0.20.2
dir="${KEYWARD_CACHE_DIR:-$HOME/.cache/keyward}/tools/cargo-deny-$version"
mkdir -p "$dir"
exec 9>"$dir.lock"
flock 9
if [[ ! -x "$dir/bin/cargo-deny" ]]; then
  echo "installing cargo-deny $version into $dir (first run only)" >&2
  # Its own build directory: its lock file is not ours and must not touch the shared target.
  build="$(mktemp -d)"
  trap 'rm -rf "$build"' EXIT
  CARGO_TARGET_DIR="$build" nice cargo install --quiet --locked --root "$dir" cargo-deny --version "$version" >&2
fi
exec 9>&-
[[ $# -gt 0 ]] || set -- licenses bans sources
"$dir/bin/cargo-deny" check "$@"
