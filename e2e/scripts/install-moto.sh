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
# A fresh Debian machine may lack python3 or its venv module (ensurepip); as root, install them.
ensure_python_venv() {
  if command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; then
    return 0
  fi
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    echo "installing python3 and python3-venv with apt-get (needed for moto)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >&2
  fi
  command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null || {
    echo "install-moto.sh: python3 with the venv module is required (Debian: apt-get install python3-venv)" >&2
    return 1
  }
}
if [[ ! -f "$venv/.installed" ]]; then
  echo "installing moto ${version} into $venv (first run only)" >&2
  ensure_python_venv
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  nice "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
  touch "$venv/.installed"
fi
echo "$venv"
