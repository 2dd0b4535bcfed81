"""REPORT.md: one table per scenario, medians, ratios against shoal."""
from __future__ import annotations

from pathlib import Path

from .scenarios import GiB, Row, Scenario

MiB = 1 << 20


def _ratio(row: Row, shoal: Row | None) -> str:
    if row.tool == "shoal" or not shoal or shoal.status != "measured" or shoal.failed or not row.runs:
        return "—" if row.tool != "shoal" else "1.00"
    return f"{row.median('wall') / shoal.median('wall'):.2f}"


def _check(row: Row) -> str:
    bad = [r.check for r in row.runs if r.check != "ok"]
    if bad:
        return f"**FAILED** ({len(bad)}/{len(row.runs)}): {bad[0].removeprefix('FAILED: ')[:160]}"
    note = next((r.detail for r in row.runs if r.detail), "")
    return f"ok ({len(row.runs)}/{len(row.runs)})" + (f"; {note}" if note else "")


def table(sc: Scenario) -> list[str]:
    out = []
    if sc.unit == "bytes":
        out.append("| server | profile | tool | wall s (median) | MiB/s | peer time ÷ shoal time | client CPU s/GiB | peak RSS MiB | check |")
        out.append("|---|---|---|--:|--:|--:|--:|--:|---|")
    else:
        out.append("| server | profile | tool | wall s (median) | objects | peer time ÷ shoal time | client CPU s | peak RSS MiB | check |")
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
                out.append(f"| {target} | {profile} | {name} | | | | | | {why} |")
                continue
            wall = r.median("wall")
            rss = r.median("rss_mib")
            ratio = _ratio(r, shoal)
            if sc.unit == "bytes":
                nbytes = max(x.bytes for x in r.runs)
                mibs = f"{nbytes / MiB / wall:,.0f}" if nbytes and not r.failed else ""
                cpu = f"{r.median('cpu') / (nbytes / GiB):.2f}" if nbytes else f"{r.median('cpu'):.2f} s"
                out.append(f"| {target} | {profile} | {name} | {wall:.2f} | {mibs} | {ratio} | {cpu} | {rss:,.0f} | {_check(r)} |")
            else:
                objs = max(x.objects for x in r.runs)
                out.append(f"| {target} | {profile} | {name} | {wall:.3f} | {objs:,} | {ratio} | {r.median('cpu'):.2f} | {rss:,.0f} | {_check(r)} |")
    return out


def write(path: Path, scenarios: list[Scenario], header: list[str], tools_table: list[str], charts: dict[str, str]) -> None:
    lines = [*header, "", "## Tools", "", *tools_table, ""]
    for sc in scenarios:
        lines += [f"## {sc.title}", ""]
        if sc.not_yet:
            lines += [f"Not yet: {sc.not_yet}", ""]
            continue
        lines += [f"- {n}" for n in sc.notes]
        if sc.notes:
            lines.append("")
        if sc.key in charts:
            lines += [f"![{sc.title}]({charts[sc.key]})", ""]
        lines += table(sc) + [""]
    path.write_text("\n".join(lines))
