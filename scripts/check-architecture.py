#!/usr/bin/env python3
"""docs/architecture.md's crate table names every workspace package, and only those.

The table (`| crate | path | job |`) is where a reader finds which crate does what; a crate
added to the workspace without a row, or moved without its row following, leaves the map wrong.
This reads the workspace's packages from `cargo metadata --no-deps --format-version 1` (names
and manifest directories, no build, no network) and checks that each has exactly one row naming
it as `` `name` `` with its directory as `` `path/` ``, and that no row names a package the
workspace does not have.

Usage: scripts/check-architecture.py [DOC]   (DOC defaults to docs/architecture.md; exit 1, and
one line per missing, misplaced or stale row)
"""

import pathlib
import re
import sys

from cargo_metadata import metadata

ROOT = pathlib.Path(__file__).resolve().parent.parent
HEADER = re.compile(r"^\|\s*crate\s*\|\s*path\s*\|")
ROW = re.compile(r"^\|\s*`([\w-]+)`\s*\|\s*`([^`]+)`\s*\|")


def workspace_packages():
    """Each workspace package's name and directory relative to the root, as `dir/`."""
    meta = metadata()
    members = set(meta["workspace_members"])
    packages = {}
    for p in meta["packages"]:
        if p["id"] in members:
            rel = pathlib.Path(p["manifest_path"]).parent.relative_to(ROOT)
            packages[p["name"]] = f"{rel.as_posix()}/"
    return packages


def table_rows(doc_text):
    """The crate table's rows, (crate, path, line number): the table under the header
    `| crate | path | job |`, up to its first line that is not a table row."""
    rows = []
    inside = False
    for n, line in enumerate(doc_text.splitlines(), 1):
        if HEADER.match(line):
            inside = True
        elif inside and not line.startswith("|"):
            break
        elif inside and (m := ROW.match(line)):
            rows.append((m.group(1), m.group(2), n))
    return rows


def problems(packages, doc_name, doc_text):
    rows = table_rows(doc_text)
    found = []
    named = {}
    for crate, path, line in rows:
        named.setdefault(crate, []).append((path, line))
    for name, path in sorted(packages.items()):
        entries = named.get(name, [])
        if not entries:
            found.append(f"{doc_name}: workspace package `{name}` ({path}) has no row in the crate table")
        elif len(entries) > 1:
            found.append(f"{doc_name}: `{name}` has {len(entries)} rows (lines {', '.join(str(l) for _, l in entries)})")
        elif entries[0][0] != path:
            found.append(f"{doc_name}:{entries[0][1]}: `{name}` is at `{path}`, the row says `{entries[0][0]}`")
    for crate, entries in sorted(named.items()):
        if crate not in packages:
            found.append(f"{doc_name}:{entries[0][1]}: row `{crate}` is not a workspace package")
    if not rows:
        found.append(f"{doc_name}: no crate table (a `| crate | path | job |` header) found")
    return found


def main():
    doc = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "architecture.md"
    found = problems(workspace_packages(), str(doc.relative_to(ROOT) if doc.is_absolute() else doc), doc.read_text())
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} problem(s) in the crate table: add, move or remove its rows", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
