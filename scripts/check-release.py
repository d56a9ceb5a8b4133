#!/usr/bin/env python3
"""Checks a release directory written by scripts/release.sh: its artifacts agree with each other
and with the tree, so a release cannot ship a chart whose image tag names another version, a
krew manifest whose checksum is stale, or an SBOM that misses what the image carries.

- SHA256SUMS: every artifact listed, every sum right.
- image: OCI labels (version, revision, source, licenses) with the workspace's values, dpkg
  status entries and an os-release for scanners, name `<chart image.repository>:<version>`.
- chart: version = appVersion = the release version; its image tag is the appVersion (empty) or
  that version; its repository is the image's.
- SBOMs: CycloneDX 1.5 for that version; each image binary's package is an application
  component; each crate component matches Cargo.lock (version, checksum) and carries a license;
  each Debian package in the image is a component with a pkg:deb purl; the CLI's SBOM has the
  CLI package.
- krew manifest: version v<version>, sha256 and file name of the CLI archive, whose
  kubectl-keyward binary it runs and which prints that version.

Usage: scripts/check-release.py DIR   (exit 1 with one line per disagreement)
"""

import hashlib
import json
import pathlib
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "image"))
from sbom import dpkg_entries, image_contents  # noqa: E402  (the SBOM's own reading of the image)

problems = []


def expect(ok, message):
    if not ok:
        problems.append(message)


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main():
    out = pathlib.Path(sys.argv[1])
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]
    version = cargo["version"]
    lock = {(p["name"], p["version"]): p.get("checksum") for p in tomllib.loads((ROOT / "Cargo.lock").read_text())["package"]}
    archive = f"keyward-{version}-linux-amd64.tar.gz"
    artifacts = ["keyward-image.tar", "keyward-image.cdx.json", f"keyward-{version}.tgz", archive,
                 "keyward-cli.cdx.json", "keyward-krew.yaml"]

    sums = dict(reversed(line.split(None, 1)) for line in (out / "SHA256SUMS").read_text().splitlines())
    for a in artifacts:
        expect(a in sums, f"SHA256SUMS does not list {a}")
        expect(a not in sums or sums[a] == sha256(out / a), f"SHA256SUMS has a wrong sum for {a}")

    name, _, labels, bins, statuses, os_release = image_contents(out / "keyward-image.tar")
    for key, want in [("version", version), ("source", cargo["repository"]), ("licenses", cargo["license"])]:
        got = labels.get(f"org.opencontainers.image.{key}")
        expect(got == want, f"image label org.opencontainers.image.{key} is {got!r}, not {want!r}")
    expect(re.fullmatch(r"[0-9a-f]{40}|unknown", labels.get("org.opencontainers.image.revision", "")),
           "image label org.opencontainers.image.revision is not a commit")
    debs = sorted(e["Package"] for e in dpkg_entries(statuses))
    expect(debs, "the image holds no dpkg status entries (var/lib/dpkg/status.d/)")
    expect("ID=" in os_release, "the image holds no etc/os-release")

    with tarfile.open(out / f"keyward-{version}.tgz") as chart:
        meta = yaml.safe_load(chart.extractfile("keyward/Chart.yaml"))
        values = yaml.safe_load(chart.extractfile("keyward/values.yaml"))
    expect(meta["version"] == version and str(meta["appVersion"]) == version,
           f"chart version {meta['version']} / appVersion {meta['appVersion']} is not {version}")
    tag = values["image"].get("tag") or str(meta["appVersion"])
    expect(f"{values['image']['repository']}:{tag}" == name,
           f"the chart's default image {values['image']['repository']}:{tag} is not the image {name}")

    for sbom_file, subject_version, apps in [("keyward-image.cdx.json", version, bins), ("keyward-cli.cdx.json", version, ["keyward-cli"])]:
        try:
            sbom = json.loads((out / sbom_file).read_text())
        except ValueError as e:
            expect(False, f"{sbom_file} is not JSON: {e}")
            continue
        expect(sbom.get("bomFormat") == "CycloneDX" and sbom.get("specVersion") == "1.5", f"{sbom_file} is not CycloneDX 1.5")
        expect(sbom["metadata"]["component"]["version"] == subject_version, f"{sbom_file} describes version {sbom['metadata']['component']['version']}")
        comps = sbom["components"]
        app_names = {c["name"] for c in comps if c["type"] == "application"}
        for b in apps:
            expect(b in app_names, f"{sbom_file} has no application component for {b}")
        crates = [c for c in comps if c.get("purl", "").startswith("pkg:cargo/")]
        expect(len(crates) > 100, f"{sbom_file} lists only {len(crates)} crates")
        for c in crates:
            key = (c["name"], c["version"])
            expect(key in lock, f"{sbom_file}: {c['name']} {c['version']} is not in Cargo.lock")
            expect(key not in lock or [h["content"] for h in c.get("hashes", [])] == [lock[key]],
                   f"{sbom_file}: {c['name']} {c['version']} has not Cargo.lock's checksum")
            expect(c.get("licenses"), f"{sbom_file}: {c['name']} has no license")
        if sbom_file == "keyward-image.cdx.json":
            listed = {c["name"] for c in comps if c.get("purl", "").startswith("pkg:deb/")}
            for d in debs:
                expect(d in listed, f"{sbom_file} does not list the image's Debian package {d}")

    krew = yaml.safe_load((out / "keyward-krew.yaml").read_text())
    expect(krew["spec"]["version"] == f"v{version}", f"krew manifest version {krew['spec']['version']}")
    platform = krew["spec"]["platforms"][0]
    expect(platform["sha256"] == sha256(out / archive), "krew manifest sha256 is not the CLI archive's")
    expect(platform["uri"].endswith(f"/{archive}"), f"krew manifest uri {platform['uri']} does not name {archive}")
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(out / archive) as tar:
        tar.extractall(tmp, filter="data")
        exe = pathlib.Path(tmp) / platform["bin"]
        expect(exe.is_file(), f"the CLI archive has no {platform['bin']}")
        if exe.is_file():
            said = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout.split()
            expect(said[-1:] == [version], f"{platform['bin']} --version says {' '.join(said)!r}, not {version}")

    for p in problems:
        print(f"release {out}: {p}", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
