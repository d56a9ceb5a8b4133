#!/usr/bin/env python3
"""Writes a CycloneDX 1.5 JSON SBOM of Keyward's image (or of a set of Keyward binaries).

Two sources, read rather than guessed:
- the Rust crates: every package the binaries' own packages reach through normal (not build
  or dev) dependencies in `cargo metadata`'s resolve for Linux, with the version, license and
  crates.io checksum Cargo.lock records. The resolve is the workspace's unified one, so a crate
  a feature of another Keyward package pulls in may be listed though compiled out.
- the base layer: the Debian packages whose dpkg status entries image/build.sh keeps in the
  image (var/lib/dpkg/status.d/), read out of the image archive itself, with the Debian release
  named by its os-release.

Which binaries: with --image, those in the image's usr/local/bin; with --binary, the named ones.

Usage: image/sbom.py (--image dist/keyward-image.tar | --binary NAME ...) --out FILE
"""

import argparse
import gzip
import io
import json
import pathlib
import subprocess
import sys
import tarfile
import tomllib
import urllib.parse
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent
TARGET = "x86_64-unknown-linux-gnu"


def image_contents(path):
    """The image's labels, the names in usr/local/bin, its dpkg status entries and os-release."""
    with tarfile.open(path) as outer:
        read = lambda name: outer.extractfile(name).read()  # noqa: E731
        index = json.loads(read("index.json"))
        blob = lambda d: "blobs/sha256/" + d.split(":", 1)[1]  # noqa: E731
        manifest_digest = index["manifests"][0]["digest"]
        manifest = json.loads(read(blob(manifest_digest)))
        config = json.loads(read(blob(manifest["config"]["digest"])))
        layer = gzip.decompress(read(blob(manifest["layers"][0]["digest"])))
    name = index["manifests"][0]["annotations"]["io.containerd.image.name"]
    binaries, statuses, os_release = [], [], ""
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.startswith("usr/local/bin/"):
                binaries.append(m.name.rsplit("/", 1)[1])
            elif m.isfile() and m.name.startswith("var/lib/dpkg/status.d/"):
                statuses.append(tar.extractfile(m).read().decode())
            elif m.name == "etc/os-release":
                os_release = tar.extractfile(m).read().decode()
    return name, manifest_digest, config["config"].get("Labels") or {}, sorted(binaries), statuses, os_release


def dpkg_entries(statuses):
    """Fields of each dpkg status paragraph (continuation lines dropped: none are needed)."""
    out = []
    for text in statuses:
        for para in text.strip().split("\n\n"):
            fields = {}
            for line in para.splitlines():
                if line and not line[0].isspace() and ":" in line:
                    k, v = line.split(":", 1)
                    fields[k] = v.strip()
            if "Package" in fields:
                out.append(fields)
    return out


def os_fields(text):
    return {k: v.strip('"') for k, v in (line.split("=", 1) for line in text.splitlines() if "=" in line)}


def spdx(license_field):
    """Cargo's license field as an SPDX expression ("MIT/Apache-2.0" is the old spelling of OR)."""
    if not license_field:
        return None
    return " OR ".join(part.strip() for part in license_field.split("/")) if "/" in license_field else license_field


def cargo_components(binaries):
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", TARGET],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout
    )
    lock = tomllib.loads((ROOT / "Cargo.lock").read_text())
    checksums = {(p["name"], p["version"]): p.get("checksum") for p in lock["package"]}
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    roots = []
    for b in binaries:
        owners = [p["id"] for p in meta["packages"] if p["id"] in meta["workspace_members"]
                  and any(t["name"] == b and "bin" in t["kind"] for t in p["targets"])]
        if not owners:
            sys.exit(f"no workspace package has a binary named {b}")
        roots.extend(owners)
    seen, stack, edges = set(), list(dict.fromkeys(roots)), {}
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        deps = [d["pkg"] for d in nodes[pid]["deps"] if any(k["kind"] is None for k in d["dep_kinds"])]
        edges[pid] = sorted(set(deps))
        stack.extend(deps)
    ref = lambda pid: f"{packages[pid]['name']}@{packages[pid]['version']}"  # noqa: E731
    components = []
    for pid in sorted(seen, key=ref):
        p = packages[pid]
        c = {"type": "application" if pid in roots else "library", "bom-ref": ref(pid),
             "name": p["name"], "version": p["version"]}
        if (p.get("source") or "").startswith("registry+"):
            c["purl"] = f"pkg:cargo/{p['name']}@{p['version']}"
            if checksums.get((p["name"], p["version"])):
                c["hashes"] = [{"alg": "SHA-256", "content": checksums[(p["name"], p["version"])]}]
        if spdx(p.get("license")):
            c["licenses"] = [{"expression": spdx(p["license"])}]
        components.append(c)
    dependencies = [{"ref": ref(pid), "dependsOn": [ref(d) for d in edges[pid]]} for pid in sorted(seen, key=ref)]
    return components, dependencies


def deb_components(entries, os_release):
    osr = os_fields(os_release)
    distro = f"{osr.get('ID', 'debian')}-{osr.get('VERSION_ID', '')}".rstrip("-")
    comps = []
    if osr:
        comps.append({"type": "operating-system", "bom-ref": f"os:{distro}", "name": osr.get("ID", "debian"),
                      "version": osr.get("VERSION_ID", ""), "description": osr.get("PRETTY_NAME", "")})
    for e in sorted(entries, key=lambda e: e["Package"]):
        version = urllib.parse.quote(e["Version"], safe="")
        purl = f"pkg:deb/{osr.get('ID', 'debian')}/{e['Package']}@{version}?arch={e.get('Architecture', 'all')}&distro={distro}"
        c = {"type": "library", "bom-ref": purl, "name": e["Package"], "version": e["Version"], "purl": purl,
             "properties": [{"name": "keyward:copyright", "value": f"/usr/share/doc/{e['Package']}/copyright"}]}
        if "Source" in e:
            c["properties"].append({"name": "deb:source", "value": e["Source"]})
        comps.append(c)
    return comps


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--image", type=pathlib.Path, help="image archive written by image/build.sh")
    what.add_argument("--binary", action="append", help="a Keyward binary (repeatable)")
    ap.add_argument("--name", help="name of the subject when --binary is used")
    ap.add_argument("--version", help="version of the subject when --binary is used")
    ap.add_argument("--out", required=True, type=pathlib.Path)
    args = ap.parse_args()

    if args.image:
        name, manifest_digest, labels, binaries, statuses, os_release = image_contents(args.image)
        entries = dpkg_entries(statuses)
        if not entries:
            sys.exit(f"{args.image} holds no dpkg status entries: build it on Debian (image/build.sh)")
        repository, version = name.rsplit(":", 1)
        subject = {"type": "container", "bom-ref": name, "name": repository, "version": version,
                   "hashes": [{"alg": "SHA-256", "content": manifest_digest.split(":", 1)[1]}],
                   "properties": [{"name": k, "value": v} for k, v in sorted(labels.items())]}
        serial = uuid.uuid5(uuid.NAMESPACE_URL, f"{name}@{manifest_digest}")
    else:
        binaries, entries, os_release = args.binary, [], ""
        subject = {"type": "application", "bom-ref": args.name or binaries[0], "name": args.name or binaries[0],
                   "version": args.version or ""}
        serial = uuid.uuid5(uuid.NAMESPACE_URL, f"{subject['name']}@{subject['version']}")

    crates, dependencies = cargo_components(binaries)
    debs = deb_components(entries, os_release)
    top = [c["bom-ref"] for c in crates if c["type"] == "application"] + [c["bom-ref"] for c in debs]
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {"component": subject, "tools": {"components": [{"type": "application", "name": "keyward image/sbom.py"}]}},
        "components": crates + debs,
        "dependencies": [{"ref": subject["bom-ref"], "dependsOn": top}] + dependencies,
    }
    args.out.write_text(json.dumps(bom, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {len(crates)} crates, {len(debs)} base-layer components", file=sys.stderr)


if __name__ == "__main__":
    main()
