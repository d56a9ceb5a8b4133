#!/usr/bin/env bash
# Installs Microsoft's Python clients for Key Vault secrets (azure-keyvault-secrets, with
# azure-identity) from PyPI into a virtualenv in the cache, keyed by the pinned requirement, so
# only the first run pays for the install. The Azure provider's tests run them against the Key
# Vault protocol test server. Prints the virtualenv directory.
set -euo pipefail
req="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tools/azure-client" && pwd)/requirements.txt"
version="$(sed -n 's/^azure-keyvault-secrets==//p' "$req")"
cache_root="${KEYWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keyward}"
venv="$cache_root/tools/azure-client-${version}"
mkdir -p "$cache_root/tools"
# Test binaries run in parallel and each may call this script: one installer at a time.
exec 9>"$venv.lock"
flock 9
if [[ ! -f "$venv/.installed" ]]; then
  echo "installing azure-keyvault-secrets ${version} and azure-identity into $venv (first run only)" >&2
  if ! python3 -c 'import venv, ensurepip' 2>/dev/null && [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >&2
  fi
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  nice "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" >&2
  touch "$venv/.installed"
fi
echo "$venv"
