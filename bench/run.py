#!/usr/bin/env python3
"""shoal's end-to-end benchmarks against its peers: one entry point.

    bench/run.py                 # full run: 1 GiB, 5,000 small files, 10,000-key glob, 1M-key listing,
                                 # 1 GiB zstd dataset; 3 runs each
    bench/run.py --with-rclone   # also build (~15 min, nice 19) and measure rclone
    bench/run.py --smoke         # tiny sizes, 1 run, shoal + s5cmd + boto3 (classic and CRT) only (~1 min warm)

Writes REPORT.md and one PNG per scenario to --out (default bench/results;
--smoke defaults to bench/results/raw/smoke, which is not committed), and the
raw runs as JSON to bench/results/raw/. Needs Python 3.11 (stdlib only here;
matplotlib and the Python peers live in a venv it makes in
$SHOAL_CACHE/bench-venv), Go and Rust toolchains. Servers run on their own
ports (base SHOAL_BENCH_PORT_BASE, default 31400, below the kernel's range for outgoing ports) and stop at the end.
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
import urllib.request
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import install, measure  # noqa: E402
from harness.env import RAW, REPO, RESULTS, VENV_PY, ports  # noqa: E402
from harness.scenarios import Runner, Scenario, from_json, log, now, to_json  # noqa: E402
from harness.servers import Servers  # noqa: E402
from harness.tools import (
    CurlList,
    Gcloud,
    LocalZstd,
    PyPeer,
    Rclone,
    S5cmd,
    Shoal,
    ShoalBenchRead,  # noqa: E402
    Target,
    Tool,
    target_env,
)
from harness.workload import FULL, GLOB, GLOB_PREFIX, SMOKE, ZSTD_PREFIX, Workload, gcs_create_bucket  # noqa: E402

LATENCY_MS = 10
LAT = f"+{LATENCY_MS} ms each way"  # the latency profile's name in the report
# Every scenario, in report order (`--only` takes these keys).
SCENARIOS = [
    "download-big",
    "upload-big",
    "download-small",
    "upload-small",
    "download-mid",
    "upload-mid",
    "ls-glob",
    "ls-full",
    "stream-zstd",
]


def build(args) -> tuple[Path, Path]:
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    shoal = Path(args.shoal_bin) if args.shoal_bin else target / "release" / "shoal"
    bserver = Path(args.benchserver_bin) if args.benchserver_bin else target / "release" / "shoal-benchserver"
    if not args.no_build:
        # --workspace: the features a plain `cargo build --release` builds
        # with, so one after it (or scripts/demo.sh) leaves nothing to compile.
        bins = [] if args.shoal_bin else ["--bin", "shoal"]
        bins += [] if args.benchserver_bin else ["--bin", "shoal-benchserver"]
        if bins:
            log("cargo build --release --workspace " + " ".join(bins) + " (first time ~10 min)")
            subprocess.run(["cargo", "build", "--release", "--locked", "--workspace", *bins], cwd=REPO, check=True)
    for p in (shoal, bserver):
        if not p.exists():
            sys.exit(f"bench: {p} does not exist (build it, or pass --shoal-bin/--benchserver-bin)")
    return shoal, bserver


def shoal_caps(shoal: Path, glob_target: Target) -> dict[str, str]:
    """What shoal can do yet, found by asking it: "" means present."""
    caps = {}
    h = subprocess.run([str(shoal), "cp", "--help"], capture_output=True, text=True)
    caps["recursive"] = (
        "" if re.search(r"(^|\s)-r\b", h.stdout) else "needs `shoal cp -r` (not in `shoal cp --help` yet)"
    )
    p = measure.run([str(shoal), "ls", f"gs://{glob_target.bucket}/{GLOB_PREFIX}{GLOB}"], env=target_env(glob_target))
    names = [line for line in p.stdout.splitlines() if line.strip()]
    if p.rc != 0 or not names:
        why = (p.stderr.strip().splitlines() or [f"exit {p.rc}, no names"])[-1][:160]
        caps["glob"] = f"needs glob support in `shoal ls` (tried: {why})"
    else:
        caps["glob"] = ""
    return caps


def parse_args() -> tuple[argparse.ArgumentParser, argparse.Namespace, list[str]]:
    """The command line, and the `--only` scenario keys (empty: all)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, 1 run, quick-to-install peers only")
    ap.add_argument("--with-rclone", action="store_true", help="build (once, ~15 min at nice 19) and measure rclone")
    ap.add_argument("--runs", type=int, help="runs per tool (default 3; 1 with --smoke)")
    ap.add_argument("--out", help="folder for REPORT.md and charts")
    ap.add_argument("--shoal-bin", help="use this shoal binary instead of building one")
    ap.add_argument("--benchserver-bin", help="use this shoal-benchserver binary instead of building one")
    ap.add_argument("--no-build", action="store_true", help="do not run cargo; use target/release")
    ap.add_argument(
        "--only",
        metavar="KEYS",
        help="comma-separated scenario keys (" + ", ".join(SCENARIOS) + "): run just these and merge them "
        "into the newest full run's raw results",
    )
    args = ap.parse_args()
    only = [k.strip() for k in args.only.split(",") if k.strip()] if args.only else []
    if unknown := [k for k in only if k not in SCENARIOS]:
        ap.error(f"--only: unknown scenario {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    return ap, args, only


def earlier_runs(ap: argparse.ArgumentParser, args, only: list[str], out: Path) -> tuple[list[Path], bool]:
    """The earlier runs' raw results a partial run merges into, oldest first,
    and whether it must splice its sections into the report instead."""
    # A partial run merges into the newest earlier run's raw results; on a
    # machine without them (they are not committed) its sections replace the
    # same sections of the committed report. Checked before measuring.
    # (A spliced run's own raw file holds only its scenarios: "-partial".)
    # bench/tls.py writes its raw runs beside these ("-tls", "-tls-smoke"):
    # another report's, never one to merge into.
    prev = sorted(
        p
        for p in RAW.glob("*.json")
        if p.name.endswith("-smoke.json") == args.smoke
        and not p.name.endswith("-partial.json")
        and "-tls" not in p.name
    )
    splice = bool(only) and not prev
    if splice and not (out / "REPORT.md").exists():
        ap.error(
            f"--only needs an earlier {'smoke' if args.smoke else 'full'} run's results in {RAW}, "
            f"or a report in {out} to update"
        )
    return prev, splice


def st(p: install.Peer) -> dict:
    """A peer's install status, as its tool's keyword arguments."""
    return dict(ok=p.ok, reason=p.reason, version=p.version)


@dataclass
class Peers:
    """Every peer, installed or not: each carries its status, and none is dropped."""

    py: dict[str, install.Peer]  # the Python libraries in the bench venv
    s5: S5cmd
    rc: Rclone
    gc: Gcloud
    boto: PyPeer
    crt: PyPeer
    obst: PyPeer
    tm_thr: PyPeer
    tm_proc: PyPeer
    boto_ls: PyPeer  # the listing peers
    obst_ls: PyPeer
    tm_ls: PyPeer
    boto_z: PyPeer  # the zstd-reading peers
    obst_z: PyPeer
    curl: CurlList
    zstd_version: str


def install_peers(args) -> Peers:
    """Installs (or finds) every peer; --smoke keeps to the quick ones."""
    py = install.venv(full=not args.smoke)
    peers = {"s5cmd": install.s5cmd()}
    if args.smoke:
        peers["rclone"] = install.Peer("rclone", False, reason="not part of --smoke")
        peers["gcloud"] = install.Peer("gcloud", False, reason="not part of --smoke")
    else:
        peers["rclone"] = (
            install.rclone(build=args.with_rclone)
            if args.with_rclone
            else install.Peer("rclone", False, reason="not built: pass --with-rclone (~15 min build)")
        )
        peers["gcloud"] = install.gcloud()
    if not py["matplotlib"].ok:
        log(f"matplotlib missing, no charts: {py['matplotlib'].reason}")
    return peer_tools(args, py, peers)


def peer_tools(args, py: dict[str, install.Peer], peers: dict[str, install.Peer]) -> Peers:
    """The peers as tools the runner drives, each for the operations it has."""
    pb, pg, po = py["boto3"], py["google-cloud-storage"], py["obstore"]
    if args.smoke:  # only the peers that install in about a minute
        pg = po = install.Peer("", False, reason="not part of --smoke")
    # The same libraries as the listing and zstd-reading peers (scripts in pypeers/).
    pz = py["zstandard"]

    def with_z(p: install.Peer) -> dict:  # a library plus the zstandard package
        d = st(p if not p.ok or not pz.ok else pz)
        d["version"] = f"{p.version}; zstandard {pz.version}" if p.ok and pz.ok else d["version"]
        return d

    return Peers(
        py=py,
        s5=S5cmd(peers["s5cmd"].extra.get("exe", "s5cmd"), **st(peers["s5cmd"])),
        rc=Rclone(peers["rclone"].extra.get("exe", "rclone"), **st(peers["rclone"])),
        gc=Gcloud(**st(peers["gcloud"])),
        boto=PyPeer("boto3 (s3transfer classic)", "boto3_classic.py", ("s3",), **st(pb)),
        crt=PyPeer(
            "boto3 (s3transfer CRT)",
            "boto3_crt.py",
            ("s3",),
            ops=("download", "upload", "download_tree", "upload_tree"),
            **st(py["awscrt"]),
            extra={
                "skip": {
                    ("upload", "benchserver"): "not measured: shoal-benchserver answers its upload "
                    "NotImplemented (the instrument's gap)"
                }
            },
        ),
        obst=PyPeer("obstore", "obstore_peer.py", ("s3",), ops=("download", "upload"), **st(po)),
        tm_thr=PyPeer("python-storage (threads)", "gcs_tm.py", ("gcs",), args=("--workers-type", "threads"), **st(pg)),
        tm_proc=PyPeer(
            "python-storage (processes)",
            "gcs_tm.py",
            ("gcs",),
            args=("--workers-type", "processes"),
            ops=("download", "download_tree", "upload_tree"),
            **st(pg),
        ),
        # Measured, not assumed: the boto3 paginator listed a million keys from
        # shoal-benchserver in 186 s on loopback (173 CPU s) and did not finish
        # in 300 s at +10 ms: it gets the size-limited bucket, as gcloud does.
        boto_ls=PyPeer(
            "boto3 paginator", "boto3_classic.py", ("s3",), ops=("ls_all",), extra={"ls_all_max": 100_000}, **st(pb)
        ),
        obst_ls=PyPeer("obstore list", "obstore_peer.py", ("s3",), ops=("ls_all",), **st(po)),
        tm_ls=PyPeer("python-storage list_blobs", "gcs_tm.py", ("gcs",), ops=("ls_all",), **st(pg)),
        boto_z=PyPeer("boto3 + zstandard", "boto3_classic.py", ("s3",), ops=("cat_zstd",), **with_z(pb)),
        obst_z=PyPeer("obstore + zstandard", "obstore_peer.py", ("s3",), ops=("cat_zstd",), **with_z(po)),
        zstd_version=subprocess.run(["zstd", "--version"], capture_output=True, text=True).stdout.strip()[:60]
        if shutil.which("zstd")
        else "",
        curl=CurlList(
            version=subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.split("\n")[0][:40]
        ),
    )


def _ep(port: int) -> str:
    return f"http://127.0.0.1:{port}"


@dataclass
class Targets:
    """Every server and bucket measured, on loopback and (`_l`) behind the latency proxy."""

    minio: Target
    minio_up: Target
    fgcs: Target
    fgcs_up: Target
    fglob: Target
    b_s3: Target
    b_gcs: Target
    minio_l: Target
    minio_up_l: Target
    fglob_l: Target


def make_targets(srv: Servers) -> Targets:
    """The targets on the started servers (the latency proxies are made here)."""
    P = ports()
    minio = Target("minio", "s3", _ep(P.s3), "bench", "loopback")
    minio_up = Target("minio", "s3", _ep(P.s3), "benchup", "loopback")
    fgcs = Target("fake-gcs-server", "gcs", _ep(P.gcs), "bench", "loopback")
    fgcs_up = Target("fake-gcs-server", "gcs", _ep(P.gcs), "benchup", "loopback")
    fglob = Target("fake-gcs-server", "gcs", _ep(P.gcs), "benchglob", "loopback")
    b_s3 = Target("benchserver", "s3", _ep(P.bench), "bench", "loopback")
    b_gcs = Target("benchserver", "gcs", _ep(P.bench), "bench", "loopback")
    minio_l = Target("minio", "s3", _ep(srv.proxy("minio", P.s3, LATENCY_MS)), "bench", LAT)
    minio_up_l = Target("minio", "s3", minio_l.endpoint, "benchup", LAT, direct=minio.endpoint)
    fglob_l = Target("fake-gcs-server", "gcs", _ep(srv.proxy("fakegcs", P.gcs, LATENCY_MS)), "benchglob", LAT)
    return Targets(minio, minio_up, fgcs, fgcs_up, fglob, b_s3, b_gcs, minio_l, minio_up_l, fglob_l)


def big_object_scenarios(runner: Runner, sizes, t: Targets, all_tools: list[Tool], want) -> list[Scenario]:
    """One big object down and up."""
    scen = []
    big = "1 GiB" if sizes.big == 1 << 30 else f"{sizes.big >> 20} MiB"
    sc = Scenario(
        "download-big",
        f"Download one {big} object",
        "bytes",
        notes=[
            "Destination on tmpfs; each result's sha256 compared with the source's.",
            "shoal-benchserver generates the bytes and does almost no work: its rows show each client's own ceiling "
            "here.",
            "fake-gcs-server is a fair download target; MinIO is the fair S3 target.",
        ],
    )
    if want(sc.key):
        scen.append(sc)
        runner.download_big(sc, [t.minio, t.fgcs, t.b_s3, t.b_gcs, t.minio_l], all_tools)

    sc = Scenario(
        "upload-big",
        f"Upload one {big} object",
        "bytes",
        notes=[
            "Checked by reading the object back (sha256) from MinIO and fake-gcs-server; shoal-benchserver keeps no "
            "data, "
            "so there the check is the CRC32C it computed over the bytes it received.",
            "fake-gcs-server is left out: in this harness's first full run its memory backend grew past 3.6 GB RSS "
            "during shoal's 1 GiB upload (64 parallel part uploads, then compose), the kernel's OOM killer ended it, "
            "and shoal had not finished after 300 s. Its uploads are slow (~80 MB/s) at the best of times.",
            "shoal-benchserver's GCS upload emulation is minimal: gcloud's upload to it did not finish in 10 "
            "minutes here, so gcloud is not measured there (the instrument's gap, not the client's).",
            "python-storage uploads with upload_from_filename (resumable, one stream): upload_chunks_concurrently "
            "needs "
            "the XML multipart API, which neither emulator has.",
        ],
    )
    if want(sc.key):
        scen.append(sc)
        runner.upload_big(
            sc,
            [
                t.minio_up,
                Target("benchserver", "s3", t.b_s3.endpoint, "benchup", "loopback"),
                Target("benchserver", "gcs", t.b_gcs.endpoint, "benchup", "loopback"),
            ],
            all_tools,
        )
    return scen


def many_object_scenarios(runner: Runner, sizes, t: Targets, all_tools: list[Tool], want) -> list[Scenario]:
    """Trees of small and of mid-sized objects, down and up."""
    scen = []
    small = f"{sizes.small_n:,} × {sizes.small_size >> 10} KiB"
    sc = Scenario(
        "download-small",
        f"Download {small} objects",
        "objects",
        notes=[
            "Destination on tmpfs; file names and contents compared with the sources (digest over path and sha256)."
        ],
    )
    if want(sc.key):
        scen.append(sc)
        runner.download_tree(sc, [t.minio, t.fgcs, t.minio_l], all_tools, "small")

    sc = Scenario(
        "upload-small",
        f"Upload {small} files",
        "objects",
        notes=[
            "MinIO only: fake-gcs-server scans the bucket on every insert (15 objects/s past 10,000), which would "
            "measure the emulator. Checked by reading every object back (directly, not through the proxy)."
        ],
    )
    if want(sc.key):
        scen.append(sc)
        runner.upload_tree(sc, [t.minio_up, t.minio_up_l], all_tools, "small")

    mid = f"{sizes.mid_n:,} × {sizes.mid_size >> 20} MiB"
    sc = Scenario(
        "download-mid",
        f"Download {mid} objects",
        "objects",
        notes=[
            "Files each worth a few requests: a tool must keep many transfers and their parts in flight at once.",
            "MinIO only: fake-gcs-server's memory backend already holds ~4.6 GB for the 1.1 GB of seed data, and "
            "1.6 GB more put the machine at risk of the OOM killer. Checked file by file, as the small files.",
        ],
    )
    if want(sc.key):
        scen.append(sc)
        runner.download_tree(sc, [t.minio, t.minio_l], all_tools, "mid")

    sc = Scenario(
        "upload-mid",
        f"Upload {mid} files",
        "objects",
        notes=["MinIO, read back object by object (directly, not through the proxy)."],
    )
    if want(sc.key):
        scen.append(sc)
        runner.upload_tree(sc, [t.minio_up, t.minio_up_l], all_tools, "mid")
    return scen


def ls_glob_scenario(runner: Runner, sizes, t: Targets, tools: list[Tool], want) -> list[Scenario]:
    """A cold glob listing."""
    sc = Scenario(
        "ls-glob",
        f"Cold `ls` of `{GLOB_PREFIX}{GLOB}` among {sizes.glob_keys:,} keys ({sizes.glob_match} match)",
        "objects",
        notes=[
            "Each run is a new process: start-up, credentials, and every list request. Decoys that a correct glob "
            "skips: `ABC-dir/deep.zip` (a deeper level) and `ABC*.zip.bak` names.",
            "Real GCS applies `matchGlob` server-side; some fake-gcs-server versions ignore it (then a client must "
            "filter and page through every key). The curl row is one request, a floor on round-trip cost; its "
            "check column says whether this server honoured the glob.",
            f"The +{LATENCY_MS} ms profile puts toxiproxy with a latency toxic on both directions (~{2 * LATENCY_MS} "
            "ms "
            "per round trip), closer to a real cloud's listing.",
        ],
    )
    if not want(sc.key):
        return []
    runner.ls_glob(sc, [t.fglob, t.fglob_l], tools)
    return [sc]


def ls_full_scenario(
    runner: Runner,
    args,
    sizes,
    wl: Workload,
    srv: Servers,
    t: Targets,
    tools: list[Tool],
    size_limited: list[Tool],
    want,
) -> list[Scenario]:
    """A full listing of a huge synthetic bucket, and of a smaller one for the CPU-bound listers."""
    n_big, n_small = sizes.list_keys, sizes.list_keys_small
    bench_l = _ep(srv.proxy("bench", ports().bench, LATENCY_MS))

    def list_targets(n: int, profiles) -> list[Target]:
        return [
            Target("benchserver", proto, e, f"list-{n}", prof, name=f"benchserver ({proto}), {n:,} keys")
            for proto in ("s3", "gcs")
            for e, prof in profiles
        ]

    for n in {n_big, n_small} if want("ls-full") else ():  # built on first use: not in a measured run
        urllib.request.urlopen(f"{t.b_gcs.endpoint}/storage/v1/b/list-{n}/o?maxResults=1", timeout=120).close()
    sc = Scenario(
        "ls-full",
        f"Full listing of a large skewed bucket ({n_big:,} keys)",
        "keys",
        notes=[
            f"shoal-benchserver's synthetic bucket `list-N` (N keys generated, sorted and held in memory; each page "
            f"cut by binary search, so the server's cost is per page): {wl.list_hot[1]:.0%} of the keys lie flat "
            f"under one {len(wl.list_hot[0])}-character prefix (`{wl.list_hot[0]}`), the rest in "
            f"{wl.list_hot[2] - 1:,} small folders, "
            f"{wl.list_nonascii[n_big]:,} keys ({wl.list_nonascii[n_big] / n_big:.1%}) with bytes above 0x7F. Seeding "
            "a million objects into MinIO would take ~25 minutes (~650 PUT/s), so there is no MinIO variant.",
            "Each tool lists the whole bucket, recursively, with its own defaults (shoal: `ls -r`, its work-stealing "
            "parallel lister; s5cmd: `ls 's3://B/*'`; rclone: `lsf -R --files-only`; gcloud: `storage ls gs://B/**`; "
            "the Python libraries: their list call in a loop, printing each name). The check: the number of keys "
            "printed and the number of lines with bytes above 0x7F must both be exact.",
            (
                f"gcloud storage and the boto3 paginator list only a {n_small:,}-key bucket, on loopback, beside "
                "shoal: they are CPU-bound, and at their keys/s there a million keys take minutes per run."
                if n_big > 100_000
                else "At smoke size every lister gets the whole bucket."
            ),
            f"The +{LATENCY_MS} ms profile puts toxiproxy with a latency toxic on both directions (~{2 * LATENCY_MS} "
            "ms "
            "per round trip): a sequential lister then waits a round trip per 1,000-key page.",
            "Ratios are peer ÷ shoal for wall time, client CPU seconds and peak RSS (> 1: shoal used less).",
        ],
    )
    if not want(sc.key):
        return []
    both = ((t.b_s3.endpoint, "loopback"), (bench_l, LAT))
    runner.ls_full(sc, list_targets(n_big, both), tools)
    if not args.smoke:  # smoke sizes are under every cap: nothing was skipped above
        # The size-limited variant: CPU-bound listers, where loopback tells it all.
        runner.ls_full(sc, list_targets(n_small, both[:1]), size_limited)
    return [sc]


def stream_zstd_scenario(
    runner: Runner, wl: Workload, t: Targets, shoal_bin: Path, shoal: Shoal, p: Peers, want
) -> list[Scenario]:
    """Streaming reads of a zstd dataset, decompressed."""
    zst = wl.zstd
    zmib = f"{zst['bytes'] / (1 << 30):.0f} GiB" if zst["bytes"] >= 1 << 30 else f"{zst['bytes'] >> 20} MiB"
    sc = Scenario(
        "stream-zstd",
        f"Streaming read + zstd decompression ({zst['objects']} objects, {zmib} decompressed)",
        "stream",
        meta={"compressed": zst["compressed"]},
        notes=[
            f"{zst['objects']} zstd objects (level 3, one frame each) of generated log lines, {zmib} decompressed, "
            f"{zst['compressed'] / 1e6:,.0f} MB compressed (ratio {zst['bytes'] / zst['compressed']:.1f}), "
            f"under `{ZSTD_PREFIX}` in MinIO; generated once and cached in $SHOAL_CACHE/bench-data.",
            "Every tool writes the decompressed objects, in key order, to a pipe into `shoal-benchserver crc32c -` "
            "(a process of its own, not counted as the client's CPU): the byte count and CRC32C of that stream must "
            "match the source's. `shoal bench read` writes nothing; its check is its own count of objects and "
            "decompressed bytes.",
            "shoal: `cat -d 's3://bench/ds/**'`. Peers without decompression of their own are piped into `zstd -dc` "
            "(its CPU counts as theirs): `s5cmd cat 's3://bench/ds/*'`, `rclone cat`. The Python peers get each "
            "object in turn and decompress it with the zstandard package, as a simple script would.",
            "The local limit: `zstd -dc` over the same files on tmpfs (no network, one core).",
            "Compressed MB/s per CPU second is the compressed input one core of the client keeps up with "
            "(the issue's seed figure: ~52 MB/s per core). MB = 10^6 bytes.",
        ],
    )
    if not want(sc.key):
        return []
    local = Target("local files", "file", "", "", "tmpfs")
    zd = LocalZstd(wl.zstd_files, version=p.zstd_version)
    sbr = ShoalBenchRead(shoal_bin, version=shoal.version)
    runner.stream_zstd(sc, [local, t.minio, t.minio_l], [zd, shoal, sbr, p.s5, p.rc, p.boto_z, p.obst_z], ZSTD_PREFIX)
    return [sc]


def measure_scenarios(
    args, sizes, runs: int, shoal_bin: Path, bserver_bin: Path, p: Peers, want
) -> tuple[list[Scenario], dict[str, str], Shoal]:
    """Makes the workload, starts the servers, runs every scenario wanted, in
    report order, and stops the servers (also on failure)."""
    with tempfile.TemporaryDirectory(
        prefix="shoal-bench-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None
    ) as work_s:
        work = Path(work_s)
        wl = Workload(work, sizes, bserver_bin)
        log(f"making the workload in {work}")
        wl.make()
        srv = Servers(ports(), work)
        try:
            srv.start(wl.gcs_data, bserver_bin)
            t = make_targets(srv)
            log("seeding MinIO")
            wl.seed_s3(t.minio.endpoint)
            gcs_create_bucket(t.fgcs.endpoint, "benchup")
            caps = shoal_caps(shoal_bin, t.fglob)
            shoal = Shoal(
                shoal_bin,
                has_recursive=not caps["recursive"],
                version=subprocess.run([str(shoal_bin), "--version"], capture_output=True, text=True).stdout.strip(),
            )
            log(f"shoal capabilities: {caps}")
            runner = Runner(wl, runs, caps)
            all_tools: list[Tool] = [shoal, p.s5, p.rc, p.gc, p.boto, p.crt, p.obst, p.tm_thr, p.tm_proc]
            scen = big_object_scenarios(runner, sizes, t, all_tools, want)
            scen += many_object_scenarios(runner, sizes, t, all_tools, want)
            scen += ls_glob_scenario(runner, sizes, t, [shoal, p.gc, p.tm_thr, p.rc, p.curl], want)
            scen += ls_full_scenario(
                runner,
                args,
                sizes,
                wl,
                srv,
                t,
                [shoal, p.s5, p.rc, p.gc, p.boto_ls, p.obst_ls, p.tm_ls],
                [shoal, p.gc, p.boto_ls],
                want,
            )
            scen += stream_zstd_scenario(runner, wl, t, shoal_bin, shoal, p, want)
        finally:
            srv.stop()
    return scen, caps, shoal


def tool_rows(shoal: Shoal, p: Peers) -> list[tuple[str, bool, str, str]]:
    """Every tool's name, whether it was installed, its version, and why not."""
    pz, mpl = p.py["zstandard"], p.py["matplotlib"]
    return [
        ("shoal", True, shoal.version, ""),
        ("s5cmd", p.s5.ok, p.s5.version, p.s5.reason),
        ("rclone", p.rc.ok, p.rc.version, p.rc.reason),
        ("gcloud storage", p.gc.ok, p.gc.version, p.gc.reason),
        ("boto3 / s3transfer classic", p.boto.ok, p.boto.version, p.boto.reason),
        ("boto3 / s3transfer CRT", p.crt.ok, p.crt.version, p.crt.reason),
        ("obstore", p.obst.ok, p.obst.version, p.obst.reason),
        ("python-storage transfer_manager", p.tm_thr.ok, p.tm_thr.version, p.tm_thr.reason),
        ("curl", True, p.curl.version, ""),
        ("zstd (CLI)", bool(p.zstd_version), p.zstd_version, "not on PATH"),
        ("zstandard (Python)", pz.ok, pz.version, pz.reason),
        ("matplotlib (charts)", mpl.ok, mpl.version, mpl.reason),
    ]


def merge_partial(
    only: list[str], splice: bool, prev: list[Path], out: Path, scen: list[Scenario], elapsed: float
) -> tuple[list[Scenario], str]:
    """The scenarios to report and the report's "Measured …" line: a
    partial run's scenarios merged into the newest earlier run's."""
    measured = f"Measured {now()} by `bench/run.py {' '.join(sys.argv[1:])}` in {elapsed / 60:.1f} min"
    if not only:
        return scen, measured
    # A partial run: the other scenarios stand as they were.
    if splice:
        before = (out / "REPORT.md").read_text().splitlines()[2].split(" (raw runs:")[0]
    else:
        old = json.loads(prev[-1].read_text())
        kept = {s.key: s for s in from_json(old["scenarios"])}
        kept.update({s.key: s for s in scen})
        scen = [kept[k] for k in SCENARIOS if k in kept]
        before = old.get("measured") or (
            f"Measured {old['when']} by `bench/run.py {' '.join(old['args'])}` in {old['elapsed_s'] / 60:.1f} min"
        )
    measured = (
        f"{before}; {', '.join(only)} measured again "
        f"{now()} by `bench/run.py {' '.join(sys.argv[1:])}` in {elapsed / 60:.1f} min"
    )
    return scen, measured


def draw_charts(py: dict[str, install.Peer], raw_path: Path, out: Path) -> dict[str, str]:
    """One PNG per scenario, by charts.py in the bench venv (none without matplotlib)."""
    charts: dict[str, str] = {}
    if py["matplotlib"].ok:
        p = subprocess.run(
            [str(VENV_PY), str(Path(__file__).with_name("charts.py")), str(raw_path), str(out)],
            capture_output=True,
            text=True,
        )
        if p.returncode != 0:
            log(f"charts failed: {p.stderr.strip()[-400:]}")
        charts = dict(line.split(" ", 1) for line in p.stdout.splitlines() if " " in line)
    return charts


def write_report(
    args,
    out: Path,
    scen: list[Scenario],
    measured: str,
    raw_path: Path,
    runs: int,
    rows: list[tuple[str, bool, str, str]],
    charts: dict[str, str],
    splice: bool,
) -> None:
    """REPORT.md: the machine and method, the tools, then every scenario (or,
    when splicing, just this run's scenarios into the existing report)."""
    from harness import report

    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    header = [
        "# shoal benchmarks" + (" (smoke)" if args.smoke else ""),
        "",
        f"{measured} (raw runs: `bench/results/raw/{raw_path.name}`, not committed).",
        "",
        f"- Machine: {os.cpu_count()} cores, {mem:.0f} GiB, {platform.system()} {platform.release()}, "
        "every server on 127.0.0.1. **Client and server share these cores**: a client's wall time includes "
        "waiting on a server that competes with it for CPU, so each row also gives the client's own CPU seconds "
        "(user+sys from `wait4` rusage, child processes included) per GiB and its peak RSS.",
        f"- {runs} run(s) per tool; medians. Tools are interleaved round-robin (run i of every tool before run "
        "i+1 of any, order rotated each round) so drift hits all alike.",
        '- "peer time ÷ shoal time" > 1 means shoal was faster. Every tool at its out-of-the-box settings.',
        '- A result whose checksum does not match is **FAILED**, however fast. "not yet" marks what shoal '
        'cannot do yet; "n/a" a tool without that operation or protocol.',
    ]
    speaks = {
        "s5cmd": "S3",
        "rclone": "S3, GCS",
        "gcloud storage": "GCS",
        "boto3 / s3transfer classic": "S3",
        "boto3 / s3transfer CRT": "S3 (awscrt's client wired to the local endpoint by hand)",
        "obstore": "S3 (its GCS writes need the XML API)",
        "python-storage transfer_manager": "GCS (threads and processes)",
        "shoal": "S3, GCS",
        "curl": "GCS listing",
        "zstd (CLI)": "local files (the decompression limit)",
        "zstandard (Python)": "decompression for boto3 and obstore",
    }
    tools_table = ["| tool | version | measured on | status |", "|---|---|---|---|"] + [
        f"| {n} | {v or ''} | {speaks.get(n, '')} | {'installed' if ok else 'not installed: ' + r} |"
        for n, ok, v, r in rows
    ]
    if splice:
        report.splice(out / "REPORT.md", scen, header[2], charts)
    else:
        report.write(out / "REPORT.md", scen, header, tools_table, charts)


def main() -> None:
    ap, args, only = parse_args()
    want = lambda key: not only or key in only  # noqa: E731
    # SIGTERM unwinds like Ctrl-C, so the servers started here are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = SMOKE if args.smoke else FULL
    runs = args.runs or sizes.runs
    out = Path(args.out) if args.out else (RAW / "smoke" if args.smoke else RESULTS)
    out.mkdir(parents=True, exist_ok=True)
    RAW.mkdir(parents=True, exist_ok=True)
    prev, splice = earlier_runs(ap, args, only, out)
    t_start = time.monotonic()

    shoal_bin, bserver_bin = build(args)
    peers = install_peers(args)
    scen, caps, shoal = measure_scenarios(args, sizes, runs, shoal_bin, bserver_bin, peers, want)

    elapsed = time.monotonic() - t_start
    stamp = time.strftime("%Y%m%d-%H%M%S")
    rows = tool_rows(shoal, peers)
    scen, measured = merge_partial(only, splice, prev, out, scen, elapsed)
    raw = {
        "when": now(),
        "args": sys.argv[1:],
        "elapsed_s": elapsed,
        "sizes": sizes.__dict__,
        "runs": runs,
        "caps": caps,
        "tools": rows,
        "scenarios": to_json(scen),
        "measured": measured,
    }
    raw_path = RAW / f"{stamp}{'-smoke' if args.smoke else ''}{'-partial' if splice else ''}.json"
    raw_path.write_text(json.dumps(raw, indent=1))
    charts = draw_charts(peers.py, raw_path, out)
    write_report(args, out, scen, measured, raw_path, runs, rows, charts, splice)
    log(f"wrote {out / 'REPORT.md'} ({elapsed / 60:.1f} min)")


if __name__ == "__main__":
    main()
