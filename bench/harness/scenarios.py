"""Scenarios: what is moved, against which servers, by which tools, checked how.

Runs are interleaved: run i of every tool happens before run i+1 of any, in
an order rotated each round, so drift (page cache, thermal, a neighbour's
build) hits all tools alike. A scenario whose shoal capability does not exist
yet still runs its peers, and shoal's row says "not yet".
"""

from __future__ import annotations

import fcntl
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import measure
from .tools import Job, Target, Tool
from .workload import (
    GLOB,
    GLOB_PREFIX,
    Workload,
    gcs_delete,
    gcs_meta,
    gcs_object_sha,
    s3_head_crc,
    s3_helper,
    tree_digest,
)

GiB = 1 << 30


@dataclass
class Run:
    scenario: str
    tool: str
    target: str
    profile: str
    run: int
    wall: float
    cpu: float
    rss_mib: float
    rc: int
    bytes: int
    objects: int
    check: str  # "ok", "FAILED: …"
    detail: str = ""
    # Counted by a ConnCounter in front of the server (-1: not counted).
    connections: int = -1
    tls_full: int = -1
    tls_resumed: int = -1
    tls_other: int = -1  # closed before a ServerHello passed


@dataclass
class Row:
    """One (scenario, target, profile, tool): its runs, or why it has none."""

    scenario: str
    tool: str
    target: str
    profile: str
    status: str  # "measured", "not yet", "n/a", "not installed"
    reason: str = ""
    runs: list[Run] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.runs)

    @property
    def failed(self) -> bool:
        return any(r.check != "ok" for r in self.runs)


@dataclass
class Scenario:
    key: str
    title: str
    unit: str  # "bytes" | "objects"
    notes: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    not_yet: str = ""  # the whole scenario waits for a capability
    meta: dict = field(default_factory=dict)  # scenario facts the report needs (e.g. compressed bytes)


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def _tail(s: str, n: int = 240) -> str:
    s = " ".join(s.split())
    return s[-n:]


class Runner:
    def __init__(self, wl: Workload, runs: int, shoal_caps: dict[str, str]):
        self.wl = wl
        self.runs = runs
        # capability -> "" if present, else why not (for "not yet" rows)
        self.shoal_caps = shoal_caps
        self.timeout = 300  # a stalled client is a failure, not a stalled benchmark

    def run_matrix(
        self,
        sc: Scenario,
        targets: list[Target],
        tools: list[Tool],
        make_job: Callable[[Tool, Target, int], Job | None],
        check: Callable[[Tool, Target, int, measure.Proc, Job], tuple[str, int, int, str]],
        needs_cap: str | None = None,
        before: Callable[[], None] | None = None,
        counter=None,
    ) -> None:
        """`counter`: a tls.ConnCounter the targets are reached through; each
        run records the connections and TLS handshakes it counted."""
        for t in targets:
            rows: dict[str, Row] = {}
            live: list[Tool] = []
            for tool in tools:
                row = Row(sc.key, tool.name, t.label, t.profile, "measured")
                rows[tool.name] = row
                sc.rows.append(row)
                if not tool.supports(t):  # another protocol: said once in the Tools table
                    row.status, row.reason = "n/a", f"no {t.proto} support"
                elif not tool.ok:
                    row.status, row.reason = "not installed", tool.reason
                elif tool.supports(t) and tool.skip_why(sc.key, t):
                    row.status, row.reason = "skipped", tool.skip_why(sc.key, t)
                elif not tool.supports(t) or make_job(tool, t, 0) is None:
                    if tool.name == "shoal" and needs_cap and self.shoal_caps.get(needs_cap):
                        row.status, row.reason = "not yet", self.shoal_caps[needs_cap]
                    elif tool.supports(t) and getattr(tool, "skip_reason", {}).get((sc.key.split("-")[0], t.server)):
                        row.status, row.reason = "skipped", tool.skip_reason[(sc.key.split("-")[0], t.server)]
                    else:
                        row.status, row.reason = (
                            "n/a",
                            f"no {t.proto} support" if not tool.supports(t) else "operation not offered",
                        )
                else:
                    live.append(tool)
            for i in range(self.runs):
                order = live[i % len(live) :] + live[: i % len(live)] if live else []
                for tool in order:
                    if before:
                        before()
                    job = make_job(tool, t, i)
                    log(f"{sc.key} | {t.label} {t.profile} | {tool.name} | run {i + 1}/{self.runs}")
                    if counter:
                        counter.take()
                    p = self.measure(job)
                    counts = counter.take() if counter else None
                    if p.rc != 0:
                        res = (f"FAILED: exit {p.rc}: {_tail(p.stderr)}", 0, 0, "")
                    else:
                        try:
                            res = check(tool, t, i, p, job)
                        except Exception as e:  # a check that cannot read back is a failure
                            res = (f"FAILED: check: {_tail(str(e))}", 0, 0, "")
                    check_s, nbytes, nobj, detail = res
                    if check_s != "ok":
                        log(f"  {check_s}")
                    run = Run(
                        sc.key,
                        tool.name,
                        t.label,
                        t.profile,
                        i + 1,
                        p.wall,
                        p.cpu,
                        p.rss_mib,
                        p.rc,
                        nbytes,
                        nobj,
                        check_s,
                        detail or job.note,
                    )
                    if counts:
                        run.connections, run.tls_full, run.tls_resumed, run.tls_other = (
                            counts.connections,
                            counts.full,
                            counts.resumed,
                            counts.other,
                        )
                    rows[tool.name].runs.append(run)

    def measure(self, job: Job) -> measure.Proc:
        """One run. A `digest` job's stdout goes to `shoal-benchserver crc32c -`
        (a process of its own, so its CPU is not the client's), and the
        run's stdout becomes that checker's answer: "CRC32C BYTES"."""
        if not job.digest:
            return measure.run(job.argv, env=job.env, timeout=self.timeout)
        sink = subprocess.Popen(
            [str(self.wl.benchserver), "crc32c", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:  # a 1 MiB pipe (Linux): fewer wake-ups for writer and checker than 64 KiB
            fcntl.fcntl(sink.stdin.fileno(), 1031, 1 << 20)  # F_SETPIPE_SZ
        except OSError:
            pass
        try:
            p = measure.run(job.argv, env=job.env, timeout=self.timeout, stdout_fd=sink.stdin.fileno())
        finally:
            sink.stdin.close()
        p.stdout = sink.stdout.read().decode().strip()
        sink.wait()
        return p

    # ---- scenarios -------------------------------------------------------

    def download_big(self, sc: Scenario, targets: list[Target], tools: list[Tool]) -> None:
        wl = self.wl
        dest = wl.dst / "big.bin"

        def key(t: Target) -> str:
            return f"size-{wl.sizes.big}" if t.server == "benchserver" else "big/big.bin"

        def job(tool, t, i):
            return tool.download(t, key(t), dest)

        def check(tool, t, i, p, j):
            if not dest.exists():
                return ("FAILED: no file written", 0, 0, "")
            from .workload import sha256_file

            want = wl.pattern_sha if t.server == "benchserver" else wl.big_sha
            got = sha256_file(dest)
            size = dest.stat().st_size
            ok = "ok" if got == want else f"FAILED: sha256 {got[:12]}…, expected {want[:12]}… ({size} bytes)"
            return (ok, size, 1, "")

        self.run_matrix(sc, targets, tools, job, check, before=wl.clean_dst)

    def upload_big(self, sc: Scenario, targets: list[Target], tools: list[Tool]) -> None:
        wl = self.wl

        def key(tool, t, i):
            slug = "".join(c if c.isalnum() else "-" for c in tool.name)
            return f"up/{slug}-{i}-size-{wl.sizes.big}.bin"

        def job(tool, t, i):
            return tool.upload(t, wl.big, key(tool, t, i))

        def check(tool, t, i, p, j):
            k = key(tool, t, i)
            if t.server == "benchserver":
                if t.proto == "gcs":
                    m = gcs_meta(t, k)
                    import base64

                    size, crc = int(m["size"]), base64.b64decode(m["crc32c"]).hex()
                else:
                    size, crc = s3_head_crc(t, k)
                ok = (
                    "ok"
                    if (size, crc) == (wl.sizes.big, wl.big_crc)
                    else f"FAILED: server received {size} bytes, CRC32C {crc}, expected {wl.big_crc}"
                )
                return (ok, size, 1, "checked: CRC32C the server computed over the bytes received")
            if t.proto == "gcs":
                size, sha = gcs_object_sha(t, k)
                gcs_delete(t, k)
            else:
                r = s3_helper(t.check_endpoint, t.bucket, "object", k)
                size, sha = r["size"], r["sha256"]
                s3_helper(t.check_endpoint, t.bucket, "delete", k)
            ok = "ok" if sha == wl.big_sha else f"FAILED: read back sha256 {sha[:12]}… ({size} bytes)"
            return (ok, size, 1, "")

        self.run_matrix(sc, targets, tools, job, check)

    def _tree(self, name: str) -> tuple[Path, tuple[int, str], int]:
        """A file set by name ("small", "mid"): its folder, (count, digest), bytes per file."""
        wl = self.wl
        if name == "small":
            return wl.small, wl.small_tree, wl.sizes.small_size
        return wl.mid, wl.mid_tree, wl.sizes.mid_size

    def download_tree(self, sc: Scenario, targets: list[Target], tools: list[Tool], name: str, counter=None) -> None:
        """Every object below `name/` into a local folder, checked file by file."""
        wl = self.wl
        dest = wl.dst / name
        _src, want, size = self._tree(name)

        def job(tool, t, i):
            dest.mkdir(parents=True, exist_ok=True)
            return tool.download_tree(t, f"{name}/", dest)

        def check(tool, t, i, p, j):
            n, d = tree_digest(dest)
            ok = "ok" if (n, d) == want else f"FAILED: {n} files (expected {want[0]}), content digest differs"
            return (ok, n * size, n, "")

        def before():
            wl.clean_dst()
            dest.mkdir(parents=True)

        self.run_matrix(sc, targets, tools, job, check, needs_cap="recursive", before=before, counter=counter)

    def upload_tree(self, sc: Scenario, targets: list[Target], tools: list[Tool], name: str) -> None:
        """A local folder up below a fresh prefix, read back object by object."""
        src, want, _size = self._tree(name)

        def prefix(tool, i):
            slug = "".join(c if c.isalnum() else "-" for c in tool.name)
            return f"{name}up/{slug}-{i}/"

        def job(tool, t, i):
            return tool.upload_tree(t, src, prefix(tool, i))

        def check(tool, t, i, p, j):
            pre = prefix(tool, i)
            r = s3_helper(t.check_endpoint, t.bucket, "tree", pre)
            s3_helper(t.check_endpoint, t.bucket, "delete", pre)
            ok = (
                "ok"
                if (r["count"], r["digest"]) == want
                else f"FAILED: read back {r['count']} objects (expected {want[0]}), content digest differs"
            )
            return (ok, r.get("bytes", 0), r["count"], "")

        self.run_matrix(sc, targets, tools, job, check, needs_cap="recursive")

    def ls_glob(self, sc: Scenario, targets: list[Target], tools: list[Tool]) -> None:
        want = self.wl.sizes.glob_match

        def job(tool, t, i):
            if tool.name == "shoal" and self.shoal_caps.get("glob"):
                return None
            return tool.ls_glob(t, GLOB_PREFIX, GLOB)

        def check(tool, t, i, p, j):
            n = j.count(p.stdout) if j.count else -1
            if tool.name.startswith("curl"):
                # One request is a floor, not an answer, where the server ignores matchGlob.
                return (
                    "ok",
                    0,
                    n,
                    f"{n} of {want} matches in one unpaged answer (server-side glob "
                    f"{'honoured' if n == want else 'ignored or paged'})",
                )
            ok = "ok" if n == want else f"FAILED: {n} names match, expected {want}"
            return (ok, 0, n, "")

        self.run_matrix(sc, targets, tools, job, check, needs_cap="glob")

    def ls_full(self, sc: Scenario, targets: list[Target], tools: list[Tool]) -> None:
        """Every key of a `list-N` bucket; the check is the number of keys
        printed and how many of them still carry their bytes above 0x7F."""

        def job(tool, t, i):
            return tool.ls_all(t)

        def check(tool, t, i, p, j):
            n_want = int(t.bucket.removeprefix("list-"))
            u_want = self.wl.list_nonascii[n_want]
            n = j.count(p.stdout)
            u = sum(1 for line in p.stdout.splitlines() if not line.isascii())
            if n != n_want:
                return (f"FAILED: {n:,} keys printed, expected {n_want:,}", 0, n, "")
            if u != u_want:
                return (f"FAILED: {u:,} lines with bytes above 0x7F, expected {u_want:,} (names mangled?)", 0, n, "")
            return ("ok", 0, n, "")

        self.run_matrix(sc, targets, tools, job, check)

    def stream_zstd(self, sc: Scenario, targets: list[Target], tools: list[Tool], prefix: str) -> None:
        """The zstd dataset read and decompressed to stdout, checked by the
        CRC32C and byte count of that stream (`shoal bench read` writes
        nothing: its own object and byte counts are its check)."""
        m = self.wl.zstd

        def job(tool, t, i):
            return tool.cat_zstd(t, prefix)

        def check(tool, t, i, p, j):
            if not j.digest:
                r = json.loads(p.stdout.strip().splitlines()[-1])
                got = (r["objects"], r["decompressed_bytes"])
                ok = (
                    "ok"
                    if got == (m["objects"], m["bytes"])
                    else f"FAILED: read {got[0]} objects, {got[1]:,} bytes; expected {m['objects']}, {m['bytes']:,}"
                )
                return (ok, r["decompressed_bytes"], r["objects"], "")
            crc, n = p.stdout.split()
            ok = (
                "ok"
                if (crc, int(n)) == (m["crc32c"], m["bytes"])
                else f"FAILED: stream of {int(n):,} bytes, CRC32C {crc}; expected {m['bytes']:,} bytes, {m['crc32c']}"
            )
            return (ok, int(n), m["objects"], "")

        self.run_matrix(sc, targets, tools, job, check)


def to_json(scenarios: list[Scenario]) -> list[dict]:
    return [asdict(s) for s in scenarios]


def from_json(items: list[dict]) -> list[Scenario]:
    """Scenarios back from a raw results file (to merge a partial run)."""
    out = []
    for d in items:
        rows = [Row(**{**r, "runs": [Run(**x) for x in r["runs"]]}) for r in d["rows"]]
        out.append(Scenario(**{**d, "rows": rows}))
    return out


def now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z")
