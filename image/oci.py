#!/usr/bin/env python3
"""Writes a one-layer container image from a root filesystem directory, without a container
engine: a tar archive that is at once a docker-archive (`manifest.json`, what `docker load`
reads) and an OCI image layout (`index.json`, `oci-layout`, `blobs/`, what `ctr images import`
and `skopeo` read), the same shape `docker save` writes since Docker 25.

The output is reproducible: entries are sorted, owned by 0:0 and dated SOURCE_DATE_EPOCH
(default 0), and the layer is gzipped without a timestamp, so the same inputs give the same
image digest.
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import tarfile
import time


def layer_tar(rootfs: str, epoch: int) -> bytes:
    """The root filesystem as an uncompressed tar, in a stable order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = []
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in dirnames + sorted(filenames):
                paths.append(os.path.join(dirpath, name))
        for path in sorted(paths, key=lambda p: os.path.relpath(p, rootfs)):
            info = tar.gettarinfo(path, arcname=os.path.relpath(path, rootfs))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = epoch
            if info.isreg():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rootfs", required=True, help="directory that becomes /")
    ap.add_argument("--name", required=True, help="image reference, e.g. ghcr.io/keyward/keyward:0.1.0")
    ap.add_argument("--out", required=True, help="archive to write")
    ap.add_argument("--user", default="65532:65532")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE (repeatable)")
    ap.add_argument("--cmd", action="append", default=[], help="default command word (repeatable)")
    ap.add_argument("--label", action="append", default=[], help="KEY=VALUE (repeatable)")
    args = ap.parse_args()

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    labels = dict(kv.split("=", 1) for kv in args.label)

    layer = layer_tar(args.rootfs, epoch)
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0, compresslevel=9) as f:
        f.write(layer)
    layer_gz = gz.getvalue()

    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "User": args.user,
            "Env": args.env,
            "Cmd": args.cmd or None,
            "WorkingDir": "/",
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [digest(layer)]},
        "history": [{"created": created, "created_by": "keyward image/build.sh"}],
    }
    config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": digest(config_bytes),
            "size": len(config_bytes),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                "digest": digest(layer_gz),
                "size": len(layer_gz),
            }
        ],
        "annotations": {k: v for k, v in labels.items() if k.startswith("org.opencontainers.image.")},
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    tag = args.name.rsplit(":", 1)[1] if ":" in args.name.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": digest(manifest_bytes),
                "size": len(manifest_bytes),
                "annotations": {
                    "io.containerd.image.name": args.name,
                    "org.opencontainers.image.ref.name": tag,
                },
            }
        ],
    }
    blob = lambda d: "blobs/sha256/" + d.split(":", 1)[1]  # noqa: E731
    docker_manifest = [
        {"Config": blob(digest(config_bytes)), "RepoTags": [args.name], "Layers": [blob(digest(layer_gz))]}
    ]
    files = [
        ("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode()),
        ("index.json", json.dumps(index, sort_keys=True).encode()),
        ("manifest.json", json.dumps(docker_manifest).encode()),
        (blob(digest(config_bytes)), config_bytes),
        (blob(digest(manifest_bytes)), manifest_bytes),
        (blob(digest(layer_gz)), layer_gz),
    ]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, epoch
            tar.addfile(info)
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, epoch
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, args.out)
    print(f"{args.name} {digest(manifest_bytes)} layer {len(layer_gz)} bytes (uncompressed {len(layer)})")


if __name__ == "__main__":
    main()
