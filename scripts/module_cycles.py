#!/usr/bin/env python3
"""Fails when modules of a crate import each other in a cycle, at any depth.

Layering within a crate (ARCHITECTURE.md says which way shoal-transfer's
imports go) decays one convenient `use` at a time; a cycle is the first
sign, and nothing in the compiler objects to it. This reads every path
that names a module of the same crate (`crate::a::b`, `super::x`,
`self::y`, brace groups such as `use super::{a, b::c}` expanded) outside
comments and `#[cfg(test)]` code, and resolves it to the deepest module
it names. Each use between two modules that are not one inside the other
becomes an edge between the siblings that contain them under their
nearest common parent (`cmd::cp` naming `cmd::stdio::f` is the edge
cp -> stdio inside `cmd`; `a::x` naming `b::y` is a -> b at the top).
A parent's own code using its children, and children using their parent,
are not edges: that is how Rust modules share a helper. Each cycle is
listed with its parent. scripts/test.sh runs it.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

HEAD = re.compile(r"\b(crate|self|super)\b((?:\s*::\s*(?:super|\w+))*)(\s*::\s*\{)?")


def module_of(src, path):
    """A source file's module path, as a tuple (the crate root is ())."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def group_items(code, start):
    """The comma-separated items of the brace group opening at `start`
    (just after `{`), and where the group ends."""
    depth, items, cur, i = 1, [], "", start
    while i < len(code) and depth:
        c = code[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                break
        if c == "," and depth == 1:
            items.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    items.append(cur)
    return [x.strip() for x in items if x.strip()], i


def expand(item):
    """Paths (lists of segments) a `use` item names: `a::b`, `a::{b, c}`."""
    m = re.match(r"((?:\w+\s*::\s*)*)(\w+|\*)?\s*(\{)?", item)
    head = [s for s in re.split(r"\s*::\s*", m.group(1)) if s]
    if m.group(3):
        inner, _ = group_items(item, m.end())
        return [head + rest for x in inner for rest in expand(x)]
    tail = [m.group(2)] if m.group(2) and m.group(2) not in ("*", "self") else []
    return [head + tail]


def references(code, here):
    """Every module path of the crate that `code` (of module `here`) names."""
    out = []
    for m in HEAD.finditer(code):
        base = {"crate": (), "self": here, "super": here[:-1]}[m.group(1)]
        segs = [s for s in re.split(r"\s*::\s*", m.group(2)) if s]
        while segs and segs[0] == "super":
            base, segs = base[:-1], segs[1:]
        paths = [segs]
        if m.group(3):
            inner, _ = group_items(code, m.end())
            paths = [segs + rest for x in inner for rest in expand(x)]
        out.extend(base + tuple(p) for p in paths)
    return out


def deepest(path, modules):
    """The deepest module that `path` starts with."""
    for n in range(len(path), -1, -1):
        if path[:n] in modules:
            return path[:n]
    return ()


def module_graphs(src):
    """Parent module -> {child -> the siblings it names}, over the crate."""
    files = {module_of(src, p): p for p in src.rglob("*.rs")}
    modules = {m for m in files if not (m and m[-1] == "tests")}
    graphs = {}
    for here in sorted(modules):
        text = files[here].read_text()
        cut = text.find("#[cfg(test)]")
        if cut >= 0:
            text = text[:cut]
        code = "\n".join(line for line in text.split("\n") if not line.strip().startswith("//"))
        for path in references(code, here):
            there = deepest(path, modules)
            n = 0
            while n < min(len(here), len(there)) and here[n] == there[n]:
                n += 1
            if n == len(here) or n == len(there):
                continue  # one inside the other
            parent = here[:n]
            graphs.setdefault(parent, {}).setdefault(here[n], set()).add(there[n])
    return graphs


def cycles(graph):
    """Each cycle once, as the list of its modules from its smallest name."""
    found = set()

    def walk(node, stack):
        for nxt in graph.get(node, ()):
            if nxt in stack:
                ring = stack[stack.index(nxt) :]
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
            for parent, graph in sorted(module_graphs(crate / "src").items()):
                where = "::".join(parent) or "crate"
                for ring in cycles(graph):
                    bad.append(f"{crate.name} (in {where}): " + " -> ".join(ring + (ring[0],)))
    for line in bad:
        print(f"module_cycles: {line}", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
