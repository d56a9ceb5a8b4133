#!/usr/bin/env bash
# Builds Keyward's container image without a container engine and without a base image: the
# release binaries and the few shared libraries they link (glibc, libgcc) in an otherwise empty
# root filesystem, written by image/oci.py to dist/keyward-image.tar (an archive that both
# `docker load` and `ctr images import` read). When the local one-node cluster is up
# (`make cluster-up NODE=1`), the image is imported into its containerd too. The `keyward`
# command-line tool is built as well and left in dist/ (it is not part of the image).
#
# The image name is the chart's default: image.repository and the chart's appVersion.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/keyward/target}"
# Each binary is its package's own; the providers are every provider crate of the workspace.
mapfile -t providers < <(bash image/provider-binaries.sh)
binaries=(keyward-webhook keyward-reconciler keyward-certs "${providers[@]}")
packages=("${binaries[@]}")

repository="$(awk '$1=="repository:" {print $2; exit}' charts/keyward/values.yaml)"
version="$(awk '$1=="appVersion:" {gsub(/"/, "", $2); print $2; exit}' charts/keyward/Chart.yaml)"
name="${KEYWARD_IMAGE:-$repository:$version}"

echo "==> release build of ${binaries[*]}" >&2
args=()
for p in "${packages[@]}"; do args+=(-p "$p"); done
for b in "${binaries[@]}"; do args+=(--bin "$b"); done
cargo build --release --locked "${args[@]}" >&2

rootfs="$repo/dist/rootfs"
rm -rf "$rootfs"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
for b in "${binaries[@]}"; do
  install -m 0755 "$CARGO_TARGET_DIR/release/$b" "$rootfs/usr/local/bin/$b"
done
# The shared libraries the binaries link, at the paths the dynamic loader looks them up.
mapfile -t libs < <(for b in "${binaries[@]}"; do ldd "$rootfs/usr/local/bin/$b"; done | awk '$2=="=>" {print $3} $1 ~ /^\// {print $1}' | sort -u)
for lib in "${libs[@]}"; do
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
done
# Users by number only; the names make `ps` and logs readable.
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
# Public CAs, for providers that reach stores on the internet.
cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
# Debian's record of what the image carries, where scanners (Trivy, Syft, Grype) read it as they
# do in distroless images: the dpkg status entry of each package a copied library belongs to and
# of ca-certificates (the CA bundle), their copyright files and the os-release they come from.
# The SBOM (image/sbom.py) lists the same entries.
if command -v dpkg-query >/dev/null; then
  mapfile -t debs < <({ for lib in "${libs[@]}"; do dpkg -S "$lib" | cut -d: -f1; done; echo ca-certificates; } | sort -u)
  mkdir -p "$rootfs/var/lib/dpkg/status.d"
  for p in "${debs[@]}"; do
    dpkg-query -s "$p" >"$rootfs/var/lib/dpkg/status.d/$p"
    mkdir -p "$rootfs/usr/share/doc/$p"
    cp -L "/usr/share/doc/$p/copyright" "$rootfs/usr/share/doc/$p/copyright"
  done
  cp -L /etc/os-release "$rootfs/etc/os-release"
else
  echo "warning: no dpkg-query on this host: the image carries no package records (make release refuses it)" >&2
fi

revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
python3 image/oci.py --rootfs "$rootfs" --name "$name" --out "$repo/dist/keyward-image.tar" \
  --user 65532:65532 --env PATH=/usr/local/bin --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --cmd keyward-reconciler --cmd=--help \
  --label "org.opencontainers.image.title=keyward" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.source=https://github.com/keyward/keyward" \
  --label "org.opencontainers.image.licenses=Apache-2.0" >&2
rm -rf "$rootfs"
size="$(du -h "$repo/dist/keyward-image.tar" | cut -f1)"
echo "wrote dist/keyward-image.tar ($name, $size)" >&2

# The keyward command-line tool is for people and CI, not for the image: built on its own (so the
# image's binaries keep their own feature set) and left next to the image as dist/keyward.
echo "==> release build of keyward (command line, not in the image)" >&2
cargo build --release --locked -p keyward-cli --bin keyward --bin kubectl-keyward >&2
install -m 0755 "$CARGO_TARGET_DIR/release/keyward" "$repo/dist/keyward"
install -m 0755 "$CARGO_TARGET_DIR/release/kubectl-keyward" "$repo/dist/kubectl-keyward"
echo "wrote dist/keyward and dist/kubectl-keyward" >&2

if sock="$(bash e2e/scripts/cluster.sh node-socket 2>/dev/null)"; then
  ctr --address "$sock" -n k8s.io images import "$repo/dist/keyward-image.tar" >&2
  echo "imported $name into the node's containerd" >&2
fi
echo "$name"
