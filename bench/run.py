#!/usr/bin/env python3
"""shoal's end-to-end benchmarks against its peers: one entry point.

    bench/run.py                 # full run: 1 GiB, 5,000 small files, 10,000-key glob; 3 runs each
    bench/run.py --with-rclone   # also build (~15 min, nice 19) and measure rclone
    bench/run.py --smoke         # tiny sizes, 1 run, shoal + s5cmd + boto3 only (~2 min warm)

Writes REPORT.md and one PNG per scenario to --out (default bench/results;
--smoke defaults to bench/results/raw/smoke, which is not committed), and the
raw runs as JSON to bench/results/raw/. Needs Python 3.11 (stdlib only here;
matplotlib and the Python peers live in a venv it makes in
$SHOAL_CACHE/bench-venv), Go and Rust toolchains. Servers run on their own
ports (base SHOAL_BENCH_PORT_BASE, default 35400) and stop at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import install, measure  # noqa: E402
from harness.env import RAW, REPO, RESULTS, VENV_PY, ports  # noqa: E402
from harness.scenarios import Runner, Scenario, log, now, to_json  # noqa: E402
from harness.servers import Servers  # noqa: E402
from harness.tools import CurlList, Gcloud, PyPeer, Rclone, S5cmd, Shoal, Target, Tool, target_env  # noqa: E402
from harness.workload import FULL, GLOB, GLOB_PREFIX, SMOKE, Workload, gcs_create_bucket  # noqa: E402

LATENCY_MS = 10


def build(args) -> tuple[Path, Path]:
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    shoal = Path(args.shoal_bin) if args.shoal_bin else target / "release" / "shoal"
    bserver = Path(args.benchserver_bin) if args.benchserver_bin else target / "release" / "shoal-benchserver"
    if not args.no_build:
        pkgs = [] if args.shoal_bin else ["-p", "shoal-cli"]
        pkgs += [] if args.benchserver_bin else ["-p", "shoal-benchserver"]
        if pkgs:
            log("cargo build --release " + " ".join(pkgs) + " (first time ~10 min)")
            subprocess.run(["cargo", "build", "--release", *pkgs], cwd=REPO, check=True)
    for p in (shoal, bserver):
        if not p.exists():
            sys.exit(f"bench: {p} does not exist (build it, or pass --shoal-bin/--benchserver-bin)")
    return shoal, bserver


def shoal_caps(shoal: Path, glob_target: Target) -> dict[str, str]:
    """What shoal can do yet, found by asking it: "" means present."""
    caps = {}
    h = subprocess.run([str(shoal), "cp", "--help"], capture_output=True, text=True)
    caps["recursive"] = "" if re.search(r"(^|\s)-r\b", h.stdout) else "needs `shoal cp -r` (not in `shoal cp --help` yet)"
    p = measure.run([str(shoal), "ls", f"gs://{glob_target.bucket}/{GLOB_PREFIX}{GLOB}"], env=target_env(glob_target))
    names = [line for line in p.stdout.splitlines() if line.strip()]
    if p.rc != 0 or not names:
        why = (p.stderr.strip().splitlines() or [f"exit {p.rc}, no names"])[-1][:160]
        caps["glob"] = f"needs glob support in `shoal ls` (tried: {why})"
    else:
        caps["glob"] = ""
    return caps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, 1 run, quick-to-install peers only")
    ap.add_argument("--with-rclone", action="store_true", help="build (once, ~15 min at nice 19) and measure rclone")
    ap.add_argument("--runs", type=int, help="runs per tool (default 3; 1 with --smoke)")
    ap.add_argument("--out", help="folder for REPORT.md and charts")
    ap.add_argument("--shoal-bin", help="use this shoal binary instead of building one")
    ap.add_argument("--benchserver-bin", help="use this shoal-benchserver binary instead of building one")
    ap.add_argument("--no-build", action="store_true", help="do not run cargo; use target/release")
    args = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the servers started here are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = SMOKE if args.smoke else FULL
    runs = args.runs or sizes.runs
    out = Path(args.out) if args.out else (RAW / "smoke" if args.smoke else RESULTS)
    out.mkdir(parents=True, exist_ok=True)
    RAW.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()

    shoal_bin, bserver_bin = build(args)

    # Peers. Every one gets a status; none is dropped.
    py = install.venv(full=not args.smoke)
    peers = {"s5cmd": install.s5cmd()}
    if args.smoke:
        peers["rclone"] = install.Peer("rclone", False, reason="not part of --smoke")
        peers["gcloud"] = install.Peer("gcloud", False, reason="not part of --smoke")
    else:
        peers["rclone"] = install.rclone(build=args.with_rclone) if args.with_rclone else \
            install.Peer("rclone", False, reason="not built: pass --with-rclone (~15 min build)")
        peers["gcloud"] = install.gcloud()
    if not py["matplotlib"].ok:
        log(f"matplotlib missing, no charts: {py['matplotlib'].reason}")

    def st(p: install.Peer) -> dict:
        return dict(ok=p.ok, reason=p.reason, version=p.version)

    pb, pg, po = py["boto3"], py["google-cloud-storage"], py["obstore"]
    if args.smoke:  # only the peers that install in about a minute
        pg = po = install.Peer("", False, reason="not part of --smoke")
    tools_s3: list[Tool] = []
    s5 = S5cmd(peers["s5cmd"].extra.get("exe", "s5cmd"), **st(peers["s5cmd"]))
    rc = Rclone(peers["rclone"].extra.get("exe", "rclone"), **st(peers["rclone"]))
    gc = Gcloud(**st(peers["gcloud"]))
    boto = PyPeer("boto3 (s3transfer classic)", "boto3_classic.py", ("s3",), **st(pb))
    obst = PyPeer("obstore", "obstore_peer.py", ("s3",), ops=("download", "upload"), **st(po))
    tm_thr = PyPeer("python-storage (threads)", "gcs_tm.py", ("gcs",), args=("--workers-type", "threads"), **st(pg))
    tm_proc = PyPeer("python-storage (processes)", "gcs_tm.py", ("gcs",), args=("--workers-type", "processes"),
                     ops=("download", "download_tree", "upload_tree"), **st(pg))
    curl = CurlList(version=subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.split("\n")[0][:40])

    with tempfile.TemporaryDirectory(prefix="shoal-bench-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as work_s:
        work = Path(work_s)
        wl = Workload(work, sizes, bserver_bin)
        log(f"making the workload in {work}")
        wl.make()
        srv = Servers(ports(), work)
        try:
            srv.start(wl.gcs_data, bserver_bin)
            P = ports()
            ep = lambda port: f"http://127.0.0.1:{port}"  # noqa: E731
            minio = Target("minio", "s3", ep(P.s3), "bench", "loopback")
            minio_up = Target("minio", "s3", ep(P.s3), "benchup", "loopback")
            fgcs = Target("fake-gcs-server", "gcs", ep(P.gcs), "bench", "loopback")
            fgcs_up = Target("fake-gcs-server", "gcs", ep(P.gcs), "benchup", "loopback")
            fglob = Target("fake-gcs-server", "gcs", ep(P.gcs), "benchglob", "loopback")
            b_s3 = Target("benchserver", "s3", ep(P.bench), "bench", "loopback")
            b_gcs = Target("benchserver", "gcs", ep(P.bench), "bench", "loopback")
            lat = f"+{LATENCY_MS} ms each way"
            minio_l = Target("minio", "s3", ep(srv.proxy("minio", P.s3, LATENCY_MS)), "bench", lat)
            fglob_l = Target("fake-gcs-server", "gcs", ep(srv.proxy("fakegcs", P.gcs, LATENCY_MS)), "benchglob", lat)
            log("seeding MinIO")
            wl.seed_s3(minio.endpoint)
            gcs_create_bucket(fgcs.endpoint, "benchup")
            caps = shoal_caps(shoal_bin, fglob)
            shoal = Shoal(shoal_bin, has_recursive=not caps["recursive"],
                          version=subprocess.run([str(shoal_bin), "--version"], capture_output=True, text=True).stdout.strip())
            log(f"shoal capabilities: {caps}")
            runner = Runner(wl, runs, caps)
            all_tools = [shoal, s5, rc, gc, boto, obst, tm_thr, tm_proc]
            big = "1 GiB" if sizes.big == 1 << 30 else f"{sizes.big >> 20} MiB"
            small = f"{sizes.small_n:,} × {sizes.small_size >> 10} KiB"
            scen = []

            sc = Scenario("download-big", f"Download one {big} object", "bytes", notes=[
                "Destination on tmpfs; each result's sha256 compared with the source's.",
                "shoal-benchserver generates the bytes and does almost no work: its rows show each client's own ceiling here.",
                "fake-gcs-server is a fair download target; MinIO is the fair S3 target."])
            scen.append(sc)
            runner.download_big(sc, [minio, fgcs, b_s3, b_gcs, minio_l], all_tools)

            sc = Scenario("upload-big", f"Upload one {big} object", "bytes", notes=[
                "Checked by reading the object back (sha256) from MinIO and fake-gcs-server; shoal-benchserver keeps no data, "
                "so there the check is the CRC32C it computed over the bytes it received.",
                "fake-gcs-server is left out: in this harness's first full run its memory backend grew past 3.6 GB RSS "
                "during shoal's 1 GiB upload (64 parallel part uploads, then compose), the kernel's OOM killer ended it, "
                "and shoal had not finished after 300 s. Its uploads are slow (~80 MB/s) at the best of times.",
                "shoal-benchserver's resumable-upload emulation is minimal: rclone's GCS uploads get a 308 they do not "
                "expect and gcloud's are not parsed, so a FAILED there is the instrument's gap, not the client's.",
                "python-storage uploads with upload_from_filename (resumable, one stream): upload_chunks_concurrently needs "
                "the XML multipart API, which neither emulator has."])
            scen.append(sc)
            runner.upload_big(sc, [minio_up, Target("benchserver", "s3", b_s3.endpoint, "benchup", "loopback"),
                                   Target("benchserver", "gcs", b_gcs.endpoint, "benchup", "loopback")], all_tools)

            sc = Scenario("download-small", f"Download {small} objects", "objects", notes=[
                "Destination on tmpfs; file names and contents compared with the sources (digest over path and sha256)."])
            scen.append(sc)
            runner.download_small(sc, [minio, fgcs, minio_l], all_tools)

            sc = Scenario("upload-small", f"Upload {small} files", "objects", notes=[
                "MinIO only: fake-gcs-server scans the bucket on every insert (15 objects/s past 10,000), which would "
                "measure the emulator. Checked by reading every object back."])
            scen.append(sc)
            runner.upload_small(sc, [minio_up], all_tools)

            sc = Scenario("ls-glob", f"Cold `ls` of `{GLOB_PREFIX}{GLOB}` among {sizes.glob_keys:,} keys "
                                     f"({sizes.glob_match} match)", "objects", notes=[
                "Each run is a new process: start-up, credentials, and every list request. Decoys that a correct glob "
                "skips: `ABC-dir/deep.zip` (a deeper level) and `ABC*.zip.bak` names.",
                "Real GCS applies `matchGlob` server-side; some fake-gcs-server versions ignore it (then a client must "
                "filter and page through every key). The curl row is one request, a floor on round-trip cost; its "
                "check column says whether this server honoured the glob.",
                f"The +{LATENCY_MS} ms profile puts toxiproxy with a latency toxic on both directions (~{2 * LATENCY_MS} ms "
                "per round trip), closer to a real cloud's listing."])
            scen.append(sc)
            runner.ls_glob(sc, [fglob, fglob_l], [shoal, gc, tm_thr, rc, curl])

            scen.append(Scenario("ls-full", "Full listing of a large skewed bucket", "objects",
                                 not_yet="needs shoal's partitioned lister; the scenario is not written until it exists."))
            scen.append(Scenario("stream-zstd", "Streaming read + zstd decompression", "bytes",
                                 not_yet="needs shoal's streaming reader with decompression."))
        finally:
            srv.stop()

    elapsed = time.monotonic() - t_start
    stamp = time.strftime("%Y%m%d-%H%M%S")
    tool_rows = [
        ("shoal", True, shoal.version, ""), ("s5cmd", s5.ok, s5.version, s5.reason), ("rclone", rc.ok, rc.version, rc.reason),
        ("gcloud storage", gc.ok, gc.version, gc.reason), ("boto3 / s3transfer classic", boto.ok, boto.version, boto.reason),
        ("obstore", obst.ok, obst.version, obst.reason), ("python-storage transfer_manager", tm_thr.ok, tm_thr.version, tm_thr.reason),
        ("curl", True, curl.version, ""), ("matplotlib (charts)", py["matplotlib"].ok, py["matplotlib"].version, py["matplotlib"].reason),
    ]
    raw = {"when": now(), "args": sys.argv[1:], "elapsed_s": elapsed, "sizes": sizes.__dict__, "runs": runs,
           "caps": caps, "tools": tool_rows, "scenarios": to_json(scen)}
    raw_path = RAW / f"{stamp}{'-smoke' if args.smoke else ''}.json"
    raw_path.write_text(json.dumps(raw, indent=1))

    charts: dict[str, str] = {}
    if py["matplotlib"].ok:
        p = subprocess.run([str(VENV_PY), str(Path(__file__).with_name("charts.py")), str(raw_path), str(out)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            log(f"charts failed: {p.stderr.strip()[-400:]}")
        charts = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)

    from harness import report

    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    header = [
        "# shoal benchmarks" + (" (smoke)" if args.smoke else ""),
        "",
        f"Measured {now()} by `bench/run.py {' '.join(sys.argv[1:])}` in {elapsed / 60:.1f} min "
        f"(raw runs: `bench/results/raw/{raw_path.name}`, not committed).",
        "",
        f"- Machine: {os.cpu_count()} cores, {mem:.0f} GiB, {platform.system()} {platform.release()}, "
        "every server on 127.0.0.1. **Client and server share these cores**: a client's wall time includes "
        "waiting on a server that competes with it for CPU, so each row also gives the client's own CPU seconds "
        "(user+sys from `wait4` rusage, child processes included) per GiB and its peak RSS.",
        f"- {runs} run(s) per tool; medians. Tools are interleaved round-robin (run i of every tool before run "
        "i+1 of any, order rotated each round) so drift hits all alike.",
        "- \"peer time ÷ shoal time\" > 1 means shoal was faster. Every tool at its out-of-the-box settings.",
        "- A result whose checksum does not match is **FAILED**, however fast. \"not yet\" marks what shoal "
        "cannot do yet; \"n/a\" a tool without that operation or protocol.",
    ]
    speaks = {"s5cmd": "S3", "rclone": "S3, GCS", "gcloud storage": "GCS", "boto3 / s3transfer classic": "S3",
              "obstore": "S3 (its GCS writes need the XML API)", "python-storage transfer_manager": "GCS (threads and processes)",
              "shoal": "S3, GCS", "curl": "GCS listing"}
    tools_table = ["| tool | version | measured on | status |", "|---|---|---|---|"] + [
        f"| {n} | {v or ''} | {speaks.get(n, '')} | {'installed' if ok else 'not installed: ' + r} |" for n, ok, v, r in tool_rows]
    report.write(out / "REPORT.md", scen, header, tools_table, charts)
    log(f"wrote {out / 'REPORT.md'} ({elapsed / 60:.1f} min)")


if __name__ == "__main__":
    main()
