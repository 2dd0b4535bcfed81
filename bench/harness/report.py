"""REPORT.md: one table per scenario, medians, ratios against shoal."""

from __future__ import annotations

from pathlib import Path

from .scenarios import GiB, Row, Scenario

MiB = 1 << 20


def _mib(v: float) -> str:
    return "—" if v != v else f"{v:,.0f}"  # NaN: not known (a run killed at its timeout)


def _ratio(row: Row, shoal: Row | None, attr: str = "wall") -> str:
    if row.tool == "shoal" or not shoal or shoal.status != "measured" or shoal.failed or not row.runs:
        return "—" if row.tool != "shoal" else "1.00"
    base, v = shoal.median(attr), row.median(attr)
    return f"{v / base:.2f}" if base > 0 and v == v else "—"


def _check(row: Row) -> str:
    bad = [r.check for r in row.runs if r.check != "ok"]
    if bad:
        return f"**FAILED** ({len(bad)}/{len(row.runs)}): {bad[0].removeprefix('FAILED: ')[:160]}"
    note = next((r.detail for r in row.runs if r.detail), "")
    return f"ok ({len(row.runs)}/{len(row.runs)})" + (f"; {note}" if note else "")


def table(sc: Scenario) -> list[str]:
    out = []
    if sc.unit == "keys":
        out.append(
            "| server | profile | tool | wall s (median) | keys/s | peer time ÷ shoal time | client CPU s per M keys "
            "| CPU ÷ shoal | peak RSS MiB | RSS ÷ shoal | check |"
        )
        out.append("|---|---|---|--:|--:|--:|--:|--:|--:|--:|---|")
    elif sc.unit == "stream":
        out.append(
            "| source | profile | tool | wall s (median) | decompressed MB/s | compressed MB/s | peer time ÷ shoal "
            "time "
            "| client CPU s | compressed MB/s per CPU s | peak RSS MiB | check |"
        )
        out.append("|---|---|---|--:|--:|--:|--:|--:|--:|--:|---|")
    elif sc.unit == "bytes":
        out.append(
            "| server | profile | tool | wall s (median) | MiB/s | peer time ÷ shoal time | client CPU s/GiB | peak "
            "RSS MiB | check |"
        )
        out.append("|---|---|---|--:|--:|--:|--:|--:|---|")
    else:
        out.append(
            "| server | profile | tool | wall s (median) | objects | peer time ÷ shoal time | client CPU s | peak RSS "
            "MiB | check |"
        )
        out.append("|---|---|---|--:|--:|--:|--:|--:|---|")
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in sc.rows:
        groups.setdefault((r.target, r.profile), []).append(r)
    for (target, profile), rows in groups.items():
        shoal = next((r for r in rows if r.tool == "shoal"), None)
        for r in rows:
            name = f"**{r.tool}**" if r.tool == "shoal" else r.tool
            if r.status == "n/a":
                continue  # the protocol or operation is not the tool's; said once in the Tools table
            if r.status != "measured" or not r.runs:
                why = r.status + (f": {r.reason}" if r.reason else "")
                blanks = "| " * (7 if sc.unit in ("keys", "stream") else 5)
                out.append(f"| {target} | {profile} | {name} {blanks}| {why} |")
                continue
            wall = r.median("wall")
            rss = r.median("rss_mib")
            ratio = _ratio(r, shoal)
            if sc.unit == "keys":
                keys = max(x.objects for x in r.runs)
                rate = f"{keys / wall:,.0f}" if keys and not r.failed else ""
                per_m = f"{r.median('cpu') / (keys / 1e6):.2f}" if keys else ""
                out.append(
                    f"| {target} | {profile} | {name} | {wall:.2f} | {rate} | {ratio} | {per_m} | "
                    f"{_ratio(r, shoal, 'cpu')} | {_mib(rss)} | {_ratio(r, shoal, 'rss_mib')} | {_check(r)} |"
                )
            elif sc.unit == "stream":
                comp = sc.meta.get("compressed", 0)
                dec = max(x.bytes for x in r.runs)
                ok = not r.failed
                cpu = r.median("cpu")
                out.append(
                    f"| {target} | {profile} | {name} | {wall:.2f} | {dec / 1e6 / wall if ok else 0:,.0f} | "
                    f"{comp / 1e6 / wall if ok else 0:,.0f} | {ratio} | {cpu:.2f} | "
                    f"{comp / 1e6 / cpu if ok and cpu > 0 else 0:,.0f} | {_mib(rss)} | {_check(r)} |"
                )
            elif sc.unit == "bytes":
                nbytes = max(x.bytes for x in r.runs)
                mibs = f"{nbytes / MiB / wall:,.0f}" if nbytes and not r.failed else ""
                cpu = f"{r.median('cpu') / (nbytes / GiB):.2f}" if nbytes else f"{r.median('cpu'):.2f} s"
                out.append(
                    f"| {target} | {profile} | {name} | {wall:.2f} | {mibs} | {ratio} | {cpu} | {_mib(rss)} | "
                    f"{_check(r)} |"
                )
            else:
                objs = max(x.objects for x in r.runs)
                out.append(
                    f"| {target} | {profile} | {name} | {wall:.3f} | {objs:,} | {ratio} | {r.median('cpu'):.2f} | "
                    f"{_mib(rss)} | {_check(r)} |"
                )
    return out


def section(sc: Scenario, charts: dict[str, str]) -> list[str]:
    lines = [f"## {sc.title}", ""]
    if sc.not_yet:
        return lines + [f"Not yet: {sc.not_yet}", ""]
    lines += [f"- {n}" for n in sc.notes]
    if sc.notes:
        lines.append("")
    if sc.key in charts:
        lines += [f"![{sc.title}]({charts[sc.key]})", ""]
    return lines + table(sc) + [""]


def write(
    path: Path, scenarios: list[Scenario], header: list[str], tools_table: list[str], charts: dict[str, str]
) -> None:
    lines = [*header, "", "## Tools", "", *tools_table, ""]
    for sc in scenarios:
        lines += section(sc, charts)
    path.write_text("\n".join(lines))


def splice(path: Path, scenarios: list[Scenario], measured: str, charts: dict[str, str]) -> None:
    """Replaces, in the report at `path`, the sections of `scenarios` (by
    title) and the line saying when it was measured; a section it lacks is
    added at the end."""
    text = path.read_text().split("\n")
    head, parts = [], []  # parts: [title, lines]
    for line in text:
        if line.startswith("## "):
            parts.append([line[3:], [line]])
        elif parts:
            parts[-1][1].append(line)
        else:
            head.append(line)
    head[2] = measured
    new = {sc.title: section(sc, charts) for sc in scenarios}
    for p in parts:
        if p[0] in new:
            p[1] = new.pop(p[0])
    parts += [[t, ls] for t, ls in new.items()]
    path.write_text("\n".join(head + [ln for _, ls in parts for ln in ls]))
