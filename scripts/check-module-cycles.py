#!/usr/bin/env python3
"""No crate's files import each other in a loop of more than two files, and no crate depends
on one laid out above it.

A file that uses a module which, through others, uses the file again ties them into one knot:
none can be read, tested or moved without the rest. Two files that use each other (a module
and its `tests.rs`, a parent and the child it re-exports) are allowed; three or more are not.

Each crate's files are read for the paths they name: `use crate::a::b::{C, d::E}`, paths in
code (`crate::a::f()`), and `super::` and `self::` paths, resolved from the file's module (an
indented `use super::` is taken to sit in an inline `mod tests`, one level deeper). A path
names the file of its longest module prefix, followed through re-exports (`pub use a::B` in
lib.rs: `crate::B` names a.rs, not lib.rs; after `pub use other_crate::C`, `crate::C` names no
file of this crate). The file graph then has an import cycle of more
than two files exactly when one of its strongly connected components has an edge that is not
answered by the opposite edge, or its two-way edges close a loop; one such cycle is printed.

Crates are laid out in layers (LAYERS, by directory): the shared ground (API types, templates,
the wire contract, process plumbing, certificates, the test harness), then providers/ (the
provider runtime and its client side, the provider binaries), then the components (reconciler,
webhook), then what ships or tests them all (cli, charts). A crate's dependencies (not its
dev-dependencies, which Cargo lets point anywhere) lie in lower layers, or in its own one under
providers/, from `cargo metadata --no-deps --offline`.

The CLI reaches each component library through its one entry point (ENTRY_POINTS:
`keyward_reconciler::offline`, `keyward_webhook::offline`), never through other module paths.

Crates in KNOWN_KNOTS still have cycles to open: they are printed, and fail nothing.

Usage: scripts/check-module-cycles.py [CRATE_DIR...]   (default: every workspace member;
exit 1, and one line per cycle)
       scripts/check-module-cycles.py --self-test      (the fixture crates under
scripts/testdata/module-cycles/: `knot` must be found, `tree` must not; a made-up
workspace whose layering and CLI paths are wrong must be caught)
"""

import pathlib
import re
import sys
from collections import deque

from cargo_metadata import metadata

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "scripts" / "testdata" / "module-cycles"

# Directory -> layer, lowest first; the longest matching directory prefix wins.
LAYERS = {
    "crds": 0,
    "template": 0,
    "providers/proto": 0,
    "process": 1,
    "e2e": 1,
    "certs": 2,
    "providers": 3,
    "reconciler": 4,
    "webhook": 4,
    "cli": 5,
    "charts": 5,
}
# Same-layer dependencies are allowed only among these (the provider runtime, its client side,
# the registry and the provider crates use each other).
SHARED_LAYERS = {"providers"}
# The one module of each component library the CLI may name.
ENTRY_POINTS = {"keyward_reconciler": "offline", "keyward_webhook": "offline"}
ENTRY_USERS = ["cli"]
KNOWN_KNOTS = {"crds"}

COMMENT = re.compile(r"//[^\n]*")
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
USE = re.compile(r"^([ \t]*)(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)
INLINE = re.compile(r"\b(crate(?:::\w+)+)")


def members():
    """The workspace's member directories, from the root Cargo.toml."""
    text = (ROOT / "Cargo.toml").read_text()
    block = re.search(r"members\s*=\s*\[(.*?)\]", text, re.S)
    return [ROOT / m for m in re.findall(r'"([^"]+)"', block.group(1))] if block else []


def module_files(src):
    """Module path (a tuple, the crate root is ()) of every file under `src`."""
    files = {}
    for path in sorted(src.rglob("*.rs")):
        parts = path.relative_to(src).with_suffix("").parts
        # src/bin/ and a main.rs beside lib.rs are other crates: they reach the library by name.
        if parts[0] == "bin" or (parts == ("main",) and (src / "lib.rs").exists()):
            continue
        if parts in (("lib",), ("main",)):
            parts = ()
        elif parts[-1] == "mod":
            parts = parts[:-1]
        files.setdefault(parts, path)
    return files


def expand(tree):
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    tree = re.sub(r"\s+", " ", tree).strip()
    depth, start = 0, None
    for i, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                prefix, inner, rest = tree[:start], tree[start + 1 : i], tree[i + 1 :]
                out, depth2, last = [], 0, 0
                for j, c in enumerate(inner + ","):
                    if c in "{":
                        depth2 += 1
                    elif c == "}":
                        depth2 -= 1
                    elif c == "," and depth2 == 0:
                        part = inner[last:j].strip()
                        last = j + 1
                        if part:
                            out += expand(prefix + part + rest)
                return out
    path, _, alias = tree.partition(" as ")
    path = path.replace(" ", "")
    if path.endswith("::self"):
        path = path[: -len("::self")]
    return [path + (" as " + alias.strip() if alias else "")]


def absolute(path, module, depth, files):
    """`path` as a module path from the crate root, or None if it names another crate."""
    parts = [p for p in path.split("::") if p]
    if not parts:
        return None
    here = list(module) + ["<inline>"] * depth
    if parts[0] == "crate":
        return parts[1:]
    if parts[0] in ("self", "super"):
        while parts and parts[0] in ("self", "super"):
            if parts.pop(0) == "super":
                if not here:
                    return None
                here.pop()
        if "<inline>" in here:
            return None
        return here + parts
    # `use child::Item` in the file that declares `mod child` (depth 0: not from inline tests).
    if depth == 0 and tuple(module) + (parts[0],) in files:
        return list(module) + parts
    return None


def read(path):
    return STRING.sub('""', COMMENT.sub("", path.read_text()))


def uses(path, module, files):
    """(is it `pub use`, module path or None, the name it brings in) of each `use` in a file."""
    out = []
    for m in USE.finditer(read(path)):
        depth = 1 if m.group(1) else 0
        for item in expand(m.group(3)):
            target, _, alias = item.partition(" as ")
            parts = absolute(target, module, depth, files)
            out.append((bool(m.group(2)) and depth == 0, parts, alias or target.split("::")[-1]))
    return out


def reexports(files):
    """What each module re-exports: {(module, name): path} and {module: [glob paths]}."""
    named, globs = {}, {}
    for module, path in files.items():
        for public, parts, name in uses(path, module, files):
            if not public:
                continue
            if parts is None:
                # Another crate's item (`pub use keyward_proto::ProviderError`): no file here.
                named[(module, name)] = None
            elif name == "*":
                globs.setdefault(module, []).append(parts[:-1])
            else:
                named[(module, name)] = parts
    return named, globs


def file_of(parts, files, named, globs, hops=0):
    """The file that defines what `parts` names: the longest module prefix, followed through
    re-exports (`pub use a::B` in lib.rs, then `crate::B` names a.rs)."""
    for n in range(len(parts), -1, -1):
        module = tuple(parts[:n])
        target = files.get(module)
        if target is None:
            continue
        if n < len(parts) and hops < 8:
            name = parts[n]
            if (module, name) in named:
                if named[(module, name)] is None:
                    return None
                return file_of(named[(module, name)] + parts[n + 1 :], files, named, globs, hops + 1)
            for glob in globs.get(module, []):
                if defines(files.get(tuple(glob)), name) or (tuple(glob), name) in named:
                    return file_of(glob + parts[n:], files, named, globs, hops + 1)
        return target
    return None


def defines(path, name):
    if path is None:
        return False
    item = r"\b(?:fn|struct|enum|trait|type|const|static|mod|union|macro_rules!)\s+" + re.escape(name) + r"\b"
    return re.search(item, read(path)) is not None


def edges_of(path, module, files, named, globs):
    """The files `path` (one Rust file at `module`) names."""
    found = [parts for _, parts, _ in uses(path, module, files)]
    found += [absolute(p, module, 0, files) for p in INLINE.findall(USE.sub("", read(path)))]
    out = set()
    for parts in found:
        if parts is not None:
            target = file_of(parts, files, named, globs)
            if target is not None and target != path:
                out.add(target)
    return out


def graph(crate_dir):
    src = crate_dir / "src"
    files = module_files(src) if src.is_dir() else {}
    named, globs = reexports(files)
    return {p: edges_of(p, m, files, named, globs) for m, p in files.items()}


def components(g):
    """Strongly connected components (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in g:
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(comp)
    return out


def shortest(g, start, goal, allowed):
    prev, queue = {start: None}, deque([start])
    while queue:
        v = queue.popleft()
        if v == goal:
            path = []
            while v is not None:
                path.append(v)
                v = prev[v]
            return path[::-1]
        for w in sorted(g[v]):
            if w in allowed and w not in prev:
                prev[w] = v
                queue.append(w)
    return None


def long_cycle(g, comp):
    """A cycle of three or more files inside one strongly connected component, or None."""
    inside = set(comp)
    for u in sorted(comp):
        for v in sorted(g[u] & inside):
            if u not in g[v]:
                # v reaches u, not directly: that path and u -> v close a simple cycle.
                return [u] + shortest(g, v, u, inside)[:-1]
    # Every edge is two-way: a longer cycle exists iff the undirected graph has a loop.
    parent = {}
    for root in sorted(comp):
        if root in parent:
            continue
        parent[root] = None
        todo = [root]
        while todo:
            v = todo.pop()
            for w in sorted(g[v] & inside):
                if w == parent[v]:
                    continue
                if w in parent:
                    a, b, up_a, up_b = v, w, [v], [w]
                    seen_a = {v}
                    x = v
                    while parent[x] is not None:
                        x = parent[x]
                        up_a.append(x)
                        seen_a.add(x)
                    y = w
                    while y not in seen_a:
                        y = parent[y]
                        up_b.append(y)
                    meet = up_a.index(y)
                    cycle = up_a[: meet + 1] + up_b[-2::-1]
                    if len(cycle) >= 3:
                        return cycle
                    continue
                parent[w] = v
                todo.append(w)
    return None


def cycles(crate_dir):
    g = graph(crate_dir)
    found = []
    for comp in components(g):
        if len(comp) > 2:
            cycle = long_cycle(g, comp)
            if cycle:
                found.append((sorted(comp), cycle))
    return found


def report(crate_dir):
    bad = 0
    for comp, cycle in cycles(crate_dir):
        bad += 1
        names = [str(p.relative_to(ROOT)) for p in cycle]
        print(f"{crate_dir.relative_to(ROOT)}: import cycle of {len(cycle)} files "
              f"({len(comp)} tied together): {' -> '.join(names)} -> {names[0]}")
    return bad


def self_test():
    knot = cycles(FIXTURES / "knot")
    tree = cycles(FIXTURES / "tree")
    ok = len(knot) == 1 and len(knot[0][1]) == 3 and not tree
    if not ok:
        print(f"self-test failed: knot {knot}, tree {tree}")

    def package(name, path, *deps):
        return {
            "name": name,
            "manifest_path": str(ROOT / path / "Cargo.toml"),
            "dependencies": [{"name": d, "kind": k} for d, k in deps],
        }

    meta = {
        "packages": [
            package("client", "providers/client", ("runtime", None), ("crds", None), ("reconciler", "dev")),
            package("runtime", "providers/runtime", ("reconciler", None)),
            package("reconciler", "reconciler", ("client", None), ("webhook", None)),
            package("webhook", "webhook", ("crds", None)),
            package("crds", "crds"),
        ]
    }
    found = layering(meta)
    expected = ["providers/runtime (layer 3) depends on reconciler", "reconciler (layer 4) depends on webhook"]
    if len(found) != 2 or not all(any(line.startswith(e) for line in found) for e in expected):
        print(f"self-test failed: layering found {found}")
        ok = False
    misses = entry_point_misses(
        "use keyward_reconciler::offline::Cli;\n// keyward_webhook::cache in a comment\n"
        "use keyward_webhook::{cache::State, offline};\nlet h = keyward_reconciler::externalsecret::target::h;"
    )
    if misses != ["keyward_reconciler::externalsecret", "keyward_webhook::{cache::State, offline}"]:
        print(f"self-test failed: entry points found {misses}")
        ok = False
    return 0 if ok else 1


def layer(rel):
    best = max((d for d in LAYERS if rel == d or rel.startswith(d + "/")), key=len, default=None)
    return best, LAYERS.get(best)


def layering(meta):
    """One line per dependency on a crate laid out at or above the dependent's layer."""
    dirs = {p["name"]: pathlib.Path(p["manifest_path"]).parent.relative_to(ROOT).as_posix() for p in meta["packages"]}
    bad = []
    for p in meta["packages"]:
        here = dirs[p["name"]]
        group, level = layer(here)
        for d in p["dependencies"]:
            if d["name"] not in dirs or d["kind"] == "dev":
                continue
            there = dirs[d["name"]]
            other, other_level = layer(there)
            if level is None or other_level is None:
                bad.append(f"{here} -> {there}: a directory LAYERS does not place")
            elif other_level > level or (other_level == level and not (group == other and group in SHARED_LAYERS)):
                bad.append(f"{here} (layer {level}) depends on {there} (layer {other_level}), laid out above it")
    return bad


def entry_point_misses(text):
    """The paths in `text` that reach a component library other than through its entry point."""
    text = STRING.sub('""', COMMENT.sub("", text))
    out = []
    for lib, entry in ENTRY_POINTS.items():
        for m in re.finditer(rf"\b{lib}::(\{{[^}}]*\}}|\w+)", text):
            if m.group(1) != entry:
                out.append(m.group(0))
    return out


def entry_points():
    bad = []
    for user in ENTRY_USERS:
        for path in sorted((ROOT / user).rglob("*.rs")):
            for miss in entry_point_misses(path.read_text()):
                bad.append(f"{path.relative_to(ROOT)}: {miss} (use its entry point)")
    return bad


def main(args):
    if args == ["--self-test"]:
        return self_test()
    if args:
        return 1 if sum(report(pathlib.Path(a).resolve()) for a in args) else 0
    failed = 0
    for d in members():
        rel = d.relative_to(ROOT).as_posix()
        if rel in KNOWN_KNOTS:
            for comp, cycle in cycles(d):
                print(f"{rel}: still knotted ({len(comp)} files), e.g. "
                      f"{' -> '.join(p.relative_to(d).as_posix() for p in cycle)}")
        else:
            failed += report(d)
    for line in layering(metadata()) + entry_points():
        print(line)
        failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
