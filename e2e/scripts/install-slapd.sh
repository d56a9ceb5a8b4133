#!/usr/bin/env bash
# Installs OpenLDAP's server and client tools (Debian's slapd and ldap-utils) with apt-get, so the
# Vault provider's LDAP login test can run a throwaway slapd on loopback. Needs root the first
# time; later runs only check. Prints the directory holding the slapd binary.
set -euo pipefail
cache_root="${KEYWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keyward}"
mkdir -p "$cache_root/tools"
# Test binaries run in parallel and each may call this script: one installer at a time.
exec 9>"$cache_root/tools/slapd.lock"
flock 9
find_slapd() {
  for d in /usr/sbin /usr/local/sbin /sbin; do
    if [[ -x "$d/slapd" ]] && command -v ldapsearch >/dev/null; then
      echo "$d"
      return 0
    fi
  done
  return 1
}
if ! find_slapd >/dev/null; then
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "install-slapd.sh: slapd and ldap-utils are missing; as root on Debian: apt-get install slapd ldap-utils" >&2
    exit 1
  fi
  echo "installing slapd and ldap-utils with apt-get (first run only)" >&2
  export DEBIAN_FRONTEND=noninteractive
  # The package's own slapd (started by its postinst where a service manager exists) is not used:
  # the tests start their own on a free port with a temporary configuration.
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends slapd ldap-utils >&2
fi
find_slapd
