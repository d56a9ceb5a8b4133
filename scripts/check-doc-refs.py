#!/usr/bin/env python3
"""Every file and Rust item the documentation names exists.

The docs point readers at the code and the tests that hold a claim (docs/security.md's table,
"Writing a provider", the test lists). A rename or a folded test file silently turns such a
pointer into a dead end. This check reads the README and docs/*.md and, for each code span that
names one of this repository's files (`providers/vault/src/kv.rs`, `kv.rs`,
`reconciler/tests/e2e/api_cost.rs::name`, `kv.rs::{a, b}`), checks that the file is tracked and that the named
item (a `fn`, type, module or constant) appears in it or in its module directory.

Spans that name another project's files (upstream's `tests/__snapshot__/…`) are not ours to
check: only paths under this repository's top-level directories, and bare `.rs` file names,
are read. A `*` in an item name (`every_*_is_checked`) stands for any characters.

Usage: scripts/check-doc-refs.py   (exit 1, and one line per dead pointer)
"""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SPAN = re.compile(r"`([^`\n]+)`")
REF = re.compile(r"^([\w./-]+\.(?:rs|sh|py|yaml|yml|toml|proto|md|json|tpl))(?:::(\{[\w*:, ]+\}|[\w*:]+))?$")


def tracked_files():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.split()


def candidates(path, files, top_dirs):
    """This repository's files a span's path may mean, or None when it is not ours to check."""
    if "/" in path:
        if path.split("/", 1)[0] not in top_dirs:
            return None
        return [f for f in files if f == path]
    if not path.endswith(".rs"):
        return None
    return [f for f in files if f.rsplit("/", 1)[-1] == path]


def items(item):
    """The items a span names: none, one, or a `{a, b}` list."""
    if not item:
        return []
    return [i.strip() for i in item.strip("{}").split(",") if i.strip()]


def item_found(item, paths):
    """Whether the last segment of `item` appears as a word in one of `paths` or below their
    module directory (`netguard.rs::x` may live in `netguard/kube_target.rs`)."""
    last = item.split("::")[-1]
    word = re.compile(r"\b" + re.escape(last).replace(r"\*", r"\w*") + r"\b")
    for p in paths:
        path = ROOT / p
        sources = [path]
        module_dir = path.with_suffix("")
        if path.suffix == ".rs" and module_dir.is_dir():
            sources += sorted(module_dir.rglob("*.rs"))
        if path.name in ("mod.rs", "main.rs", "lib.rs"):
            sources += sorted(path.parent.rglob("*.rs"))
        if any(word.search(s.read_text(errors="replace")) for s in sources):
            return True
    return False


def dead_pointers():
    files = tracked_files()
    top_dirs = {f.split("/", 1)[0] for f in files if "/" in f}
    docs = ["README.md"] + sorted(f for f in files if f.startswith("docs/") and f.endswith(".md"))
    dead = []
    for doc in docs:
        for lineno, line in enumerate((ROOT / doc).read_text().splitlines(), 1):
            for span in SPAN.finditer(line):
                ref = REF.match(span.group(1))
                if not ref:
                    continue
                path, item = ref.group(1), ref.group(2)
                found = candidates(path, files, top_dirs)
                if found is None:
                    continue
                if not found:
                    dead.append(f"{doc}:{lineno}: `{span.group(1)}`: no tracked file {path}")
                    continue
                for one in items(item):
                    if not item_found(one, found):
                        dead.append(f"{doc}:{lineno}: `{span.group(1)}`: {one} is not in {', '.join(found)}")
    return dead


def main():
    dead = dead_pointers()
    for line in dead:
        print(line)
    if dead:
        print(f"{len(dead)} documentation pointer(s) name code that does not exist", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
