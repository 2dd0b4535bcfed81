#!/usr/bin/env python3
"""The workspace's crate graph, drawn from Cargo's own metadata.

ARCHITECTURE.md shows this graph between two markers. Drawn by hand, such
a diagram drifts from the manifests without anyone noticing; drawn from
`cargo metadata`, it cannot. `--check` (run by scripts/test.sh) fails when
the document's copy differs from the manifests; `--write` rewrites it.

Each crate is listed with the workspace crates it depends on, lowest layer
first: a crate appears only after everything it depends on.
"""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "ARCHITECTURE.md"
BEGIN = "<!-- crate-graph: scripts/crate_graph.py --write -->"
END = "<!-- /crate-graph -->"


def graph():
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    packages = json.loads(out)["packages"]
    names = {p["name"] for p in packages}
    deps, dev = {}, {}
    for p in packages:
        mine = [d for d in p["dependencies"] if d["name"] in names]
        deps[p["name"]] = sorted({d["name"] for d in mine if d["kind"] is None})
        dev[p["name"]] = sorted({d["name"] for d in mine if d["kind"] == "dev"} - set(deps[p["name"]]))
    return deps, dev


def layers(deps):
    """Crates in dependency order: each layer depends only on earlier ones."""
    placed, order = set(), []
    while len(placed) < len(deps):
        layer = sorted(c for c in deps if c not in placed and set(deps[c]) <= placed)
        if not layer:
            sys.exit("crate_graph: a dependency cycle among " + ", ".join(sorted(set(deps) - placed)))
        order.append(layer)
        placed.update(layer)
    return order


def render():
    deps, dev = graph()
    width = max(len(c) for c in deps)
    lines = ["```"]
    for layer in layers(deps):
        for crate in layer:
            line = crate.ljust(width)
            if deps[crate]:
                line += " ──► " + ", ".join(deps[crate])
            if dev[crate]:
                line += ("   " if deps[crate] else "      ") + "(tests: " + ", ".join(dev[crate]) + ")"
            lines.append(line.rstrip())
    lines.append("```")
    return "\n".join(lines)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--print"
    block = render()
    if mode == "--print":
        print(block)
        return
    text = DOC.read_text()
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        sys.exit(f"crate_graph: {DOC.name} has no {BEGIN} ... {END} block")
    current = text[start + len(BEGIN) : end].strip("\n")
    if mode == "--check":
        if current != block:
            sys.exit(
                f"crate_graph: the crate graph in {DOC.name} differs from the manifests; "
                "run scripts/crate_graph.py --write"
            )
        return
    if mode == "--write":
        DOC.write_text(text[: start + len(BEGIN)] + "\n" + block + "\n" + text[end:])
        return
    sys.exit(f"crate_graph: unknown option {mode}; use --print, --check or --write")


if __name__ == "__main__":
    main()
