#!/usr/bin/env bash
# `make release`: every artifact a Keyward release publishes, written into dist/ (nothing is
# published; docs/releasing.md says what publishing takes):
#   keyward-image.tar                    the image, an OCI layout archive (image/build.sh)
#   keyward-image.cdx.json               its SBOM: the crates of its binaries and its Debian packages
#   keyward-<v>.tgz                      the Helm chart (`helm package`), version and appVersion <v>
#   keyward-<v>-linux-amd64.tar.gz       the command line, keyward and kubectl-keyward
#   keyward-cli.cdx.json                 the command line's SBOM
#   keyward-krew.yaml                    the kubectl plugin (krew) manifest for that archive
#   SHA256SUMS                           checksums of all of the above
# then checks them against each other (scripts/check-release.py).
#
# <v> is the workspace version; the chart's version and appVersion must equal it (the image is
# tagged with the appVersion, the chart's default image tag). KEYWARD_RELEASE_URL is where the
# archives will be downloaded from (the krew manifest names it). KEYWARD_RELEASE_DIR writes
# elsewhere; KEYWARD_RELEASE_REUSE_BUILD=1 packs the image and binaries already in dist/ instead
# of building them (scripts/test.sh, right after its own image build).
set -euo pipefail
source "$(dirname "$0")/common.sh"

version="$(awk '/^\[workspace.package\]/ {w=1; next} /^\[/ {w=0} w && $1=="version" {gsub(/"/, "", $3); print $3; exit}' Cargo.toml)"
repository="$(awk '/^\[workspace.package\]/ {w=1; next} /^\[/ {w=0} w && $1=="repository" {gsub(/"/, "", $3); print $3; exit}' Cargo.toml)"
chart_version="$(awk '$1=="version:" {print $2; exit}' charts/keyward/Chart.yaml)"
app_version="$(awk '$1=="appVersion:" {gsub(/"/, "", $2); print $2; exit}' charts/keyward/Chart.yaml)"
if [[ "$chart_version" != "$version" || "$app_version" != "$version" ]]; then
  echo "release: Cargo.toml's version is $version but charts/keyward/Chart.yaml has version $chart_version and appVersion $app_version: bump them together" >&2
  exit 1
fi
out="${KEYWARD_RELEASE_DIR:-dist}"
url="${KEYWARD_RELEASE_URL:-$repository/releases/download/v$version}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

if [[ "${KEYWARD_RELEASE_REUSE_BUILD:-}" != 1 ]]; then
  step "image and command line, release build (image/build.sh)"
  bash image/build.sh >/dev/null
fi
for f in keyward-image.tar keyward kubectl-keyward; do
  [[ -f "dist/$f" ]] || { echo "release: dist/$f is missing (image/build.sh writes it)" >&2; exit 1; }
done
[[ "dist" -ef "$out" ]] || cp dist/keyward-image.tar "$out/"

step "SBOMs (CycloneDX)"
python3 image/sbom.py --image "$out/keyward-image.tar" --out "$out/keyward-image.cdx.json"
python3 image/sbom.py --binary keyward --binary kubectl-keyward --name keyward --version "$version" \
  --out "$out/keyward-cli.cdx.json"

step "chart (helm package)"
helm="$(bash e2e/scripts/build-tools.sh)/helm"
rm -f "$out/keyward-$version.tgz"
"$helm" package charts/keyward --version "$version" --app-version "$version" -d "$out" >&2

step "command line archive and its krew manifest"
# Reproducible: sorted names, one owner, the date of the commit.
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
archive="keyward-$version-linux-amd64.tar.gz"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner -C dist -cf - keyward kubectl-keyward \
  | gzip -9n >"$out/$archive"
sha="$(sha256sum "$out/$archive" | cut -d' ' -f1)"
cat >"$out/keyward-krew.yaml" <<EOF
# kubectl plugin manifest for krew (https://krew.sigs.k8s.io): \`kubectl krew install --manifest=keyward-krew.yaml\`.
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: keyward
spec:
  version: v$version
  homepage: $repository
  shortDescription: Explain, sync, render and check External Secrets objects
  description: |
    Shows which store an ExternalSecret or PushSecret resolves to, whether admission accepts it,
    its conditions and its next refresh; forces a sync; renders a target template locally; checks
    manifests against Keyward's admission rules offline; lists what an External Secrets install
    needs before Keyward serves it.
  platforms:
  - selector:
      matchLabels:
        os: linux
        arch: amd64
    uri: $url/$archive
    sha256: $sha
    files:
    - from: kubectl-keyward
      to: .
    bin: kubectl-keyward
EOF

step "checksums"
(cd "$out" && sha256sum keyward-image.tar keyward-image.cdx.json "keyward-$version.tgz" "$archive" \
  keyward-cli.cdx.json keyward-krew.yaml >SHA256SUMS)

step "the artifacts agree with each other (scripts/check-release.py)"
python3 scripts/check-release.py "$out"
echo "release $version written to $out" >&2
