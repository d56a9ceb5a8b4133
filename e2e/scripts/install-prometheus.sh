#!/usr/bin/env bash
# Installs Prometheus (Debian's prometheus package) with apt-get, so the dashboard test can run
# a throwaway Prometheus on loopback that scrapes Keyward's processes and answers the dashboard's
# queries, and the chart's alert rules run through `promtool test rules` (the package ships
# promtool beside prometheus). Needs root the first time; later runs only check. Prints the
# directory holding the prometheus and promtool binaries.
set -euo pipefail
cache_root="${KEYWARD_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keyward}"
mkdir -p "$cache_root/tools"
# Test binaries run in parallel and each may call this script: one installer at a time.
exec 9>"$cache_root/tools/prometheus.lock"
flock 9
find_prometheus() {
  for d in /usr/bin /usr/local/bin /bin; do
    if [[ -x "$d/prometheus" && -x "$d/promtool" ]]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}
if ! find_prometheus >/dev/null; then
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "install-prometheus.sh: prometheus is missing; as root on Debian: apt-get install --no-install-recommends prometheus" >&2
    exit 1
  fi
  echo "installing prometheus with apt-get (first run only)" >&2
  export DEBIAN_FRONTEND=noninteractive
  # Without recommends: the node exporter and other exporters it recommends are not used. The
  # package's own service (started by its postinst where a service manager exists) is not used
  # either: the test starts its own Prometheus on a free port with a temporary configuration.
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends prometheus >&2
fi
find_prometheus
