#!/usr/bin/env python3
"""Fails when a crate's top-level modules import each other in a cycle.

Layering within a crate (ARCHITECTURE.md says which way each crate's
imports go) decays one convenient `use` at a time; a cycle is the first
sign, and nothing in the compiler objects to it. This reads every
`crate::module` path outside comments and `#[cfg(test)]` code, draws the
graph between top-level modules, and lists each cycle it finds.
scripts/test.sh runs it.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def module_graph(src):
    """Top-level module -> the top-level modules of the same crate it names."""
    names = {}
    for path in src.rglob("*.rs"):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        if not parts or parts[-1] == "tests":
            continue
        text = path.read_text()
        cut = text.find("#[cfg(test)]")
        if cut >= 0:
            text = text[:cut]
        code = "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))
        names.setdefault(parts[0], set()).update(set(re.findall(r"\bcrate::(\w+)", code)) - {parts[0]})
    return {m: {d for d in ds if d in names} for m, ds in names.items()}


def cycles(graph):
    """Each cycle once, as the list of its modules from its smallest name."""
    found = set()

    def walk(node, stack):
        for nxt in graph.get(node, ()):
            if nxt in stack:
                ring = stack[stack.index(nxt):]
                i = ring.index(min(ring))
                found.add(tuple(ring[i:] + ring[:i]))
            elif len(stack) < len(graph):
                walk(nxt, stack + [nxt])

    for m in sorted(graph):
        walk(m, [m])
    return sorted(found)


def main():
    bad = []
    for crate in sorted((ROOT / "crates").iterdir()):
        if (crate / "src").is_dir():
            for ring in cycles(module_graph(crate / "src")):
                bad.append(f"{crate.name}: " + " -> ".join(ring + (ring[0],)))
    for line in bad:
        print(f"module_cycles: {line}", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
