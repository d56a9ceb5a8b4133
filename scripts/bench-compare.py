#!/usr/bin/env python3
"""Reads the benchmarks' output on stdin and passes it through; each figure line
(`figure <name> <value> <unit> <lower|higher>`, which way is better) is printed beside its
recorded reference (benches/reference.json) with the ratio, and flagged as a regression when it
is more than 10 % worse. Ends with a summary; exits 1 when a figure regressed.

With --record, the figures of this run become the references (each with the date and machine it
was measured on); figures not in this run keep theirs. Recording is a deliberate step, made
after a run on a quiet machine whose figures go into docs/performance.md.
"""

import datetime
import json
import os
import platform
import sys

TOLERANCE = 0.10


def machine():
    cpus = os.cpu_count()
    model, mem = "", ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
        with open("/proc/meminfo") as f:
            kib = int(next(l.split()[1] for l in f if l.startswith("MemTotal")))
            mem = f"{kib / 1024 / 1024:.0f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{cpus} CPUs ({model}), {mem}, Linux {platform.release()}"


def main():
    args = sys.argv[1:]
    record = "--record" in args
    paths = [a for a in args if not a.startswith("--")]
    path = paths[0] if paths else "benches/reference.json"
    try:
        with open(path) as f:
            reference = json.load(f)
    except FileNotFoundError:
        reference = {}
    figures = reference.setdefault("figures", {})
    seen, regressed = {}, []
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 5 or parts[0] != "figure":
            sys.stdout.write(line)
            sys.stdout.flush()
            continue
        _, name, value, unit, better = parts
        try:
            value = float(value)
        except ValueError:
            sys.stdout.write(line)
            continue
        seen[name] = {"value": value, "unit": unit, "better": better}
        ref = figures.get(name)
        if not ref:
            print(f"  = {name}: {value:g} {unit} (no reference)")
            continue
        was = ref["value"]
        ratio = value / was if was else float("inf") if value else 1.0
        worse = ratio > 1 + TOLERANCE if better == "lower" else ratio < 1 - TOLERANCE
        flag = f"  REGRESSION: more than {TOLERANCE:.0%} worse" if worse else ""
        print(f"  = {name}: {value:g} {unit}; reference {was:g} {unit} ({ref.get('recorded', '?')}): ×{ratio:.2f}{flag}")
        if worse:
            regressed.append(f"{name} {value:g} {unit} against {was:g} (×{ratio:.2f})")
    if record:
        today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
        for name, fig in seen.items():
            figures[name] = {**fig, "recorded": today, "machine": machine()}
        reference["figures"] = dict(sorted(figures.items()))
        with open(path, "w") as f:
            json.dump(reference, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print(f"\n{len(seen)} figures recorded as references in {path}")
        return 0
    print(f"\n{len(seen)} figures compared with {path}: ", end="")
    if not regressed:
        print(f"none more than {TOLERANCE:.0%} worse than its reference")
        return 0
    print(f"{len(regressed)} more than {TOLERANCE:.0%} worse than its reference (times are noisy on a shared machine; memory and request counts are not):")
    for r in regressed:
        print(f"  REGRESSION {r}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
