"""Charts for REPORT.md, drawn with matplotlib in the bench venv.

usage: charts.py RESULTS.json OUT_DIR   (prints one "key file.png" line per chart)

One PNG per scenario: a panel per (server, profile), one bar per tool. Byte
scenarios show MiB/s (longer is better; the zstd stream: decompressed
MiB/s), listings show milliseconds (shorter is better). shoal's bar is the
dark one; failed runs are drawn red and say FAILED; tools without a result
are named with the reason.
"""

import json
import statistics
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SHOAL, PEER, BAD = "#1f4e79", "#8fb3d9", "#c0392b"


def main() -> None:
    data = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2])
    for sc in data["scenarios"]:
        if sc["not_yet"] or not any(r["runs"] for r in sc["rows"]):
            continue
        groups = {}
        for r in sc["rows"]:
            if r["status"] == "n/a":
                continue
            groups.setdefault((r["target"], r["profile"]), []).append(r)
        groups = {k: v for k, v in groups.items() if any(r["runs"] or r["status"] == "not yet" for r in v)}
        n = len(groups)
        height = sum(max(2, len(v)) * 0.42 + 0.9 for v in groups.values())
        fig, axes = plt.subplots(n, 1, figsize=(10, height), squeeze=False)
        by_bytes = sc["unit"] in ("bytes", "stream")  # stream: decompressed bytes
        for ax, ((target, profile), rows) in zip(axes[:, 0], groups.items(), strict=True):
            names, vals, colors, labels = [], [], [], []
            for r in rows:
                runs = r["runs"]
                names.append(r["tool"])
                if not runs:
                    vals.append(0)
                    colors.append(PEER)
                    labels.append(f"{r['status']}" + (f": {r['reason'][:60]}" if r["reason"] else ""))
                    continue
                wall = statistics.median(x["wall"] for x in runs)
                failed = any(x["check"] != "ok" for x in runs)
                if by_bytes:
                    nbytes = max(x["bytes"] for x in runs)
                    v = 0 if failed else nbytes / (1 << 20) / wall
                    lab = "FAILED" if failed else f"{v:,.0f} MiB/s  ({wall:.2f} s)"
                else:
                    v = wall * 1000
                    lab = ("FAILED  " if failed else "") + f"{v:,.0f} ms"
                vals.append(v)
                colors.append(BAD if failed else SHOAL if r["tool"] == "shoal" else PEER)
                labels.append(lab)
            y = range(len(names))
            ax.barh(list(y), vals, color=colors)
            ax.set_yticks(list(y), names)
            ax.invert_yaxis()
            top = max(vals) if max(vals) > 0 else 1
            for i, (v, lab, c) in enumerate(zip(vals, labels, colors, strict=True)):
                ax.text(v + top * 0.01, i, lab, va="center", fontsize=8, color=BAD if c == BAD else "black")
            ax.set_xlim(0, top * 1.45)
            ax.set_title(f"{target}, {profile}", fontsize=10, loc="left")
            ax.set_xlabel("MiB/s (higher is better)" if by_bytes else "wall time, ms (lower is better)", fontsize=8)
            ax.spines[["top", "right"]].set_visible(False)
        fig.suptitle(sc["title"], fontsize=12, x=0.01, ha="left", fontweight="bold")
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / height))  # room for the title above the first panel
        name = f"{sc['key']}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        print(sc["key"], name)


if __name__ == "__main__":
    main()
