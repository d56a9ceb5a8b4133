#!/usr/bin/env bash
# Prints the provider binaries the image carries: every workspace package named
# keyward-provider-<name> with a binary of the same name. A new provider crate is picked up
# without an edit here; the chart test checks every provider of the registry is among them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo metadata --no-deps --format-version 1 --offline | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    name = p["name"]
    if name.startswith("keyward-provider-") and any(t["name"] == name and "bin" in t["kind"] for t in p["targets"]):
        print(name)
'
