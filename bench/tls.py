#!/usr/bin/env python3
"""Downloads over TLS from MinIO with a private CA: shoal against its peers.

    bench/tls.py            # 1 GiB on loopback; 5,000 × 16 KiB at +10 ms each way; 3 runs each
    bench/tls.py --smoke    # 8 MiB and 50 × 16 KiB, 1 run (< 30 s warm; bench/test_smoke.py)

Each run makes a CA and a server certificate with openssl in its run dir and
starts a MinIO of its own serving HTTPS with them (port SHOAL_BENCH_PORT_BASE
+ 12), plus toxiproxy for the latency. Every client is told the CA the way
its users would: `AWS_CA_BUNDLE` (shoal, s5cmd, boto3 classic; the CRT
client gets it as `verify=`), rclone `--ca-cert`, obstore `SSL_CERT_FILE`.
The small-object downloads go through a counting TCP forwarder
(harness/tls.py) in front of toxiproxy: connections opened and TLS
handshakes (full / resumed) per 1,000 objects come from there.

Writes its tables as TLS.md to --out (default bench/results/raw/tls, or
raw/smoke-tls; not committed: bench/results/TLS.md holds a run's tables with
the method and what bounds each row) and the raw runs to bench/results/raw/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import install  # noqa: E402
from harness.env import RAW, ports  # noqa: E402
from harness.scenarios import GiB, Row, Runner, Scenario, log, now, to_json  # noqa: E402
from harness.servers import Servers  # noqa: E402
from harness.tls import ConnCounter, make_ca  # noqa: E402
from harness.tools import PyPeer, Rclone, S5cmd, Shoal, Target  # noqa: E402
from harness.workload import FULL, SMOKE, Workload, s3_helper  # noqa: E402
from run import build  # noqa: E402

LATENCY_MS = 10


def best_peer(rows: list[Row], attr: str) -> Row | None:
    ok = [r for r in rows if r.tool != "shoal" and r.status == "measured" and r.runs and not r.failed]
    return min(ok, key=lambda r: r.median(attr)) if ok else None


def table(sc: Scenario, per_object: bool) -> list[str]:
    """Medians; each ratio is against the best peer (lowest median) on that
    column: > 1 for shoal means shoal beat it, < 1 for a peer means it trails it."""
    rows = sc.rows
    bw, bc = best_peer(rows, "wall"), best_peer(rows, "cpu")
    head = (
        "| tool | wall s | best peer's wall ÷ this | client CPU s"
        + ("" if per_object else "/GiB")
        + " | best peer's CPU ÷ this | peak RSS MiB |"
    )
    line = "|---|--:|--:|--:|--:|--:|"
    if per_object:
        head += (
            " connections per 1,000 objects | TLS handshakes per 1,000 (full + resumed) | closed before a ServerHello |"
        )
        line += "--:|--:|--:|"
    out = [head + " check |", line + "---|"]
    for r in rows:
        name = f"**{r.tool}**" if r.tool == "shoal" else r.tool
        if r.status != "measured" or not r.runs:
            out.append("| " + " | ".join([name, f"{r.status}: {r.reason}"] + [""] * (8 if per_object else 5)) + " |")
            continue
        bad = [x.check for x in r.runs if x.check != "ok"]
        check = f"**FAILED** ({len(bad)}/{len(r.runs)}): {bad[0][:160]}" if bad else f"ok ({len(r.runs)}/{len(r.runs)})"
        wall, cpu = r.median("wall"), r.median("cpu")
        nbytes = max(x.bytes for x in r.runs)
        cpu_s = f"{cpu:.2f}" if per_object else (f"{cpu / (nbytes / GiB):.2f}" if nbytes else "—")
        rw = f"{bw.median('wall') / wall:.2f}" if bw and not bad else "—"
        rc = f"{bc.median('cpu') / cpu:.2f}" if bc and not bad and cpu > 0 else "—"
        cells = [name, f"{wall:.2f}", rw, cpu_s, rc, f"{r.median('rss_mib'):,.0f}"]
        if per_object:
            n = max(x.objects for x in r.runs) or 1
            conns = r.median("connections")
            hs = f"{r.median('tls_full') * 1000 / n:,.1f} + {r.median('tls_resumed') * 1000 / n:,.1f}"
            cells += [f"{conns * 1000 / n:,.1f} ({conns:,.0f} in all)", hs, f"{r.median('tls_other'):,.0f}"]
        out.append("| " + " | ".join(cells + [check]) + " |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, 1 run")
    ap.add_argument("--runs", type=int, help="runs per tool (default 3; 1 with --smoke)")
    ap.add_argument("--out", help="folder for TLS.md")
    ap.add_argument("--shoal-bin", help="use this shoal binary instead of building one")
    ap.add_argument("--benchserver-bin", help="use this shoal-benchserver binary instead of building one")
    ap.add_argument("--no-build", action="store_true", help="do not run cargo; use target/release")
    ap.add_argument(
        "--only",
        action="append",
        metavar="TOOL",
        help="run only this tool (repeatable; as named in the tables: shoal, s5cmd, ...)",
    )
    ap.add_argument(
        "--also-shoal",
        metavar="BIN",
        help="a second shoal build, measured beside the first and interleaved with it "
        "(its row is named 'shoal BIN'), e.g. the build before a change",
    )
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = SMOKE if args.smoke else FULL
    runs = args.runs or sizes.runs
    out = Path(args.out) if args.out else RAW / ("smoke-tls" if args.smoke else "tls")
    out.mkdir(parents=True, exist_ok=True)
    RAW.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    shoal_bin, bserver_bin = build(args)

    py = install.venv(full=False)
    s5p, rcp = install.s5cmd(), install.rclone(build=False)  # rclone: the cached binary, if built before

    def st(p: install.Peer) -> dict:
        return dict(ok=p.ok, reason=p.reason, version=p.version)

    shoal = Shoal(
        shoal_bin,
        has_recursive=True,
        version=subprocess.run([str(shoal_bin), "--version"], capture_output=True, text=True).stdout.strip(),
    )
    s5 = S5cmd(s5p.extra.get("exe", "s5cmd"), **st(s5p))
    rc = Rclone(rcp.extra.get("exe", "rclone"), **st(rcp))
    boto = PyPeer("boto3 (s3transfer classic)", "boto3_classic.py", ("s3",), **st(py["boto3"]))
    crt = PyPeer(
        "boto3 (s3transfer CRT)", "boto3_crt.py", ("s3",), ops=("download", "download_tree"), **st(py["awscrt"])
    )
    obst = PyPeer(
        "obstore",
        "obstore_peer.py",
        ("s3",),
        ops=("download",),
        **(
            st(py["obstore"])
            if py["obstore"].ok
            else dict(ok=False, reason="not in the bench venv (`bench/run.py` without --smoke installs it)")
        ),
    )
    tools = [shoal, s5, rc, boto, crt, obst]
    if args.also_shoal:
        other = Shoal(
            Path(args.also_shoal),
            has_recursive=True,
            version=subprocess.run([args.also_shoal, "--version"], capture_output=True, text=True).stdout.strip(),
        )
        other.name = f"shoal {args.also_shoal}"
        tools.insert(1, other)
    if args.only:
        tools = [t for t in tools if t.name in args.only or t.name.startswith("shoal ")]

    with tempfile.TemporaryDirectory(
        prefix="shoal-bench-tls-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None
    ) as w:
        work = Path(w)
        wl = Workload(work, sizes, bserver_bin)
        log(f"making the workload in {work}")
        wl.make_transfer()
        ca = make_ca(work / "tls")
        srv = Servers(ports(), work)
        counter = None
        try:
            srv.start_toxiproxy()
            endpoint = srv.start_tls_minio(work / "tls" / "certs", ca)
            log(f"seeding {endpoint}")
            s3_helper(endpoint, "bench", "mb", "-", ca=str(ca))
            s3_helper(endpoint, "bench", "seed", "big/", str(wl.big), ca=str(ca))
            s3_helper(endpoint, "bench", "seed", "small/", *sorted(str(p) for p in wl.small.iterdir()), ca=str(ca))
            # client -> counter -> toxiproxy (+latency each way) -> MinIO (TLS end to end)
            counter = ConnCounter(srv.proxy("minio-tls", ports().s3_tls, LATENCY_MS))
            lat = f"+{LATENCY_MS} ms each way"
            direct = Target("minio (https)", "s3", endpoint, "bench", "loopback", ca=str(ca))
            latent = Target("minio (https)", "s3", f"https://127.0.0.1:{counter.port}", "bench", lat, ca=str(ca))
            runner = Runner(wl, runs, {})
            big = "1 GiB" if sizes.big == 1 << 30 else f"{sizes.big >> 20} MiB"
            small = f"{sizes.small_n:,} × {sizes.small_size >> 10} KiB"
            sc_big = Scenario("tls-download-big", f"TLS: download one {big} object, loopback", "bytes")
            runner.download_big(sc_big, [direct], tools)
            sc_small = Scenario(
                "tls-download-small", f"TLS: download {small} objects, +{LATENCY_MS} ms each way", "objects"
            )
            runner.download_tree(sc_small, [latent], tools, "small", counter=counter)
        finally:
            if counter:
                counter.close()
            srv.stop()

    elapsed = time.monotonic() - t_start
    stamp = time.strftime("%Y%m%d-%H%M%S")
    raw_path = RAW / f"{stamp}-tls{'-smoke' if args.smoke else ''}.json"
    raw = {
        "when": now(),
        "args": sys.argv[1:],
        "elapsed_s": elapsed,
        "sizes": sizes.__dict__,
        "runs": runs,
        "scenarios": to_json([sc_big, sc_small]),
    }
    raw_path.write_text(json.dumps(raw, indent=1))
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    versions = "; ".join(
        t.version if t.version.startswith(t.name) else f"{t.name} {t.version}" for t in tools if t.ok and t.version
    )
    lines = [
        "# shoal over TLS" + (" (smoke)" if args.smoke else ""),
        "",
        f"Measured {now()} by `bench/tls.py {' '.join(sys.argv[1:])}` in {elapsed / 60:.1f} min "
        f"(raw runs: `bench/results/raw/{raw_path.name}`, not committed). {runs} run(s) per tool, interleaved "
        "round-robin; medians.",
        "",
        f"- Machine: {os.cpu_count()} cores, {mem:.0f} GiB, {platform.system()} {platform.release()}; MinIO, "
        "toxiproxy, "
        "the counting forwarder and the client share those cores.",
        f"- Versions: {versions}.",
        "",
        f"## {sc_big.title}",
        "",
        *table(sc_big, False),
        "",
        f"## {sc_small.title}",
        "",
        *table(sc_small, True),
        "",
    ]
    (out / "TLS.md").write_text("\n".join(lines))
    log(f"wrote {out} ({elapsed / 60:.1f} min)")


if __name__ == "__main__":
    main()
