#!/usr/bin/env bash
# Installs OpenStack Keystone (identity) and Barbican (key manager) from PyPI (the Barbican
# provider tests run both on loopback) into a virtualenv in the cache, keyed by the pinned
# versions and constraints, so only the first run pays for the install. Prints the virtualenv
# directory (its bin/ holds python and keystone-manage; e2e/tools/openstack/serve.py serves both).
set -euo pipefail
tools="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tools/openstack" && pwd)"
keystone="$(sed -n 's/^keystone==//p' "$tools/requirements.txt")"
barbican="$(sed -n 's/^barbican==//p' "$tools/requirements.txt")"
pins="$(cat "$tools/requirements.txt" "$tools/constraints.txt" | sha256sum | cut -c1-8)"
cache_root="${KEYWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keyward}"
venv="$cache_root/tools/openstack-keystone-${keystone}-barbican-${barbican}-${pins}"
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
    echo "installing python3 and python3-venv with apt-get (needed for keystone and barbican)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >&2
  fi
  command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null || {
    echo "install-openstack.sh: python3 with the venv module is required (Debian: apt-get install python3-venv)" >&2
    return 1
  }
}
if [[ ! -f "$venv/.installed" ]]; then
  echo "installing keystone ${keystone} and barbican ${barbican} into $venv (first run only)" >&2
  ensure_python_venv
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  # Wheels where there are: nothing is compiled on the test machine when the Python has them.
  nice "$venv/bin/pip" install --quiet --disable-pip-version-check --prefer-binary \
    -r "$tools/requirements.txt" -c "$tools/constraints.txt" >&2
  touch "$venv/.installed"
fi
echo "$venv"
