#!/usr/bin/env bash
# Installs moto (a local AWS API server; the AWS Secrets Manager provider tests run it on
# loopback) from PyPI into a virtualenv in the cache, keyed by the pinned requirement, so only the
# first run pays for the install. Prints the virtualenv directory (its bin/ holds moto_server).
set -euo pipefail
req="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tools/moto" && pwd)/requirements.txt"
version="$(sed -n 's/^moto\[server\]==//p' "$req")"
cache_root="${KEYWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keyward}"
venv="$cache_root/tools/moto-${version}"
mkdir -p "$cache_root/tools"
# Test binaries run in parallel and each may call this script: one installer at a time.
exec 9>"$venv.lock"
flock 9
if [[ ! -f "$venv/.installed" ]]; then
  echo "installing moto ${version} into $venv (first run only)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  nice "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
  touch "$venv/.installed"
fi
echo "$venv"
