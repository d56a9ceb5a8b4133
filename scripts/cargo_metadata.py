"""The workspace as `cargo metadata --no-deps` describes it, for the checks that compare the
docs and the layout with it (scripts/check-architecture.py, scripts/check-module-cycles.py).
Offline and without building: it reads the manifests only."""

import json
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent


def metadata():
    """`cargo metadata --no-deps --format-version 1`, parsed."""
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)
