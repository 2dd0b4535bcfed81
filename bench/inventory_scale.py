#!/usr/bin/env python3
"""A sync planned from an inventory report at scale, beside the same plan
from a live listing (issue #56).

    bench/inventory_scale.py --endpoint http://127.0.0.1:PORT --keys 10000000 \\
        --cli target/release/shoal --benchserver target/release/shoal-benchserver \\
        --dir /tmp/inv [--files 16] [--runs 3]

The source is shoal-benchserver's ``list-N`` bucket (S3 API at
``--endpoint``); the destination an empty bucket of the same server, so
the plan is "copy all N". The report is written once by this script into
``--dir``: an S3 Inventory report (CSV, gzip, no header, ``fileSchema``
Bucket, Key, Size, LastModifiedDate, ETag, StorageClass), ``--files``
data files, the keys dealt round-robin (``shoal-benchserver list-keys N``)
so no file is in key order across files and the engine's sort (runs of
200,000 rows, spilled and merged) does the work a real report needs.

Each run, interleaved: ``shoal sync --dry-run --source-listing
DIR/manifest.json s3://list-N/ s3://empty/`` and ``shoal sync --dry-run
s3://list-N/ s3://empty/`` (the live listing, 16 connections), output to
/dev/null. Reported: wall, client CPU (user+sys) and peak RSS (GNU time)
of each, rows (keys) per second; medians of ``--runs``; and the peak
temporary disk: the bytes of the unnamed temporary files ``shoal`` holds
open under ``TMPDIR`` (its sorted runs), sampled every 0.2 s from
/proc/PID/fd, since files without a name are not seen by ``du``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path


def write_report(benchserver: str, n: int, files: int, d: Path) -> Path:
    bucket = f"list-{n}"
    data = d / "inv" / bucket / "cfg" / "data"
    mdir = d / "inv" / bucket / "cfg" / "2026-11-20T00-00Z"
    manifest = mdir / "manifest.json"
    if manifest.exists():
        return manifest
    data.mkdir(parents=True, exist_ok=True)
    mdir.mkdir(parents=True, exist_ok=True)
    # Each file is compressed by its own `gzip -1` (the other core's work),
    # and a key's folder is quoted once: per-row quoting and compressing in
    # this process took 1,055 s for 100M rows.
    outs = []
    for i in range(files):
        f = open(data / f"f{i}.csv.gz", "wb")
        outs.append((subprocess.Popen(["gzip", "-1", "-c"], stdin=subprocess.PIPE, stdout=f), f))
    p = subprocess.Popen([benchserver, "list-keys", str(n)], stdout=subprocess.PIPE, text=True, encoding="utf-8")
    t = time.perf_counter()
    assert p.stdout is not None
    quoted: dict[str, str] = {}
    pending: list[list[str]] = [[] for _ in range(files)]
    tail = '","1024","2024-01-01T00:00:00.000Z","00000000000000000000000000000000","STANDARD"\n'
    for i, line in enumerate(p.stdout):
        folder, _, name = line.rstrip("\n").rpartition("/")
        q = quoted.get(folder)
        if q is None:
            q = quoted[folder] = urllib.parse.quote(folder + "/", safe="/") if folder else ""
        rows = pending[i % files]
        rows.append(f'"{bucket}","{q}{urllib.parse.quote(name, safe="")}{tail}')
        if len(rows) >= 4096:
            outs[i % files][0].stdin.write("".join(rows).encode())
            rows.clear()
    if p.wait() != 0:
        raise SystemExit("shoal-benchserver list-keys failed")
    for (z, f), rows in zip(outs, pending, strict=True):
        z.stdin.write("".join(rows).encode())
        z.stdin.close()
        if z.wait() != 0:
            raise SystemExit("gzip failed")
        f.close()
    listed = []
    for i in range(files):
        path = data / f"f{i}.csv.gz"
        listed.append(
            {
                "key": f"inv/{bucket}/cfg/data/f{i}.csv.gz",
                "size": path.stat().st_size,
                "MD5checksum": hashlib.md5(path.read_bytes()).hexdigest(),
            }
        )
    manifest.write_text(
        json.dumps(
            {
                "sourceBucket": bucket,
                "destinationBucket": "arn:aws:s3:::inv",
                "version": "2016-11-30",
                "creationTimestamp": str(int(time.time() * 1000)),
                "fileFormat": "CSV",
                "fileSchema": "Bucket, Key, Size, LastModifiedDate, ETag, StorageClass",
                "files": listed,
            }
        )
    )
    print(f"wrote {n:,} rows in {files} files in {time.perf_counter() - t:.0f} s: {manifest}", flush=True)
    return manifest


def temp_bytes(pid: int, tmp: str) -> int:
    """Bytes on disk of the unnamed temporary files `pid` holds open under
    `tmp` (made with O_TMPFILE or unlinked: their /proc link ends in
    " (deleted)"); a file that closes between the listing and the stat
    counts 0."""
    total = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith(tmp + "/") and target.endswith(" (deleted)"):
                total += os.stat(f"/proc/{pid}/fd/{fd}").st_blocks * 512
        except OSError:
            pass
    return total


def run(cmd: list[str], env: dict) -> tuple[float, float, float, str, float]:
    """Wall s, CPU s, peak RSS MiB, last stderr line, peak temporary disk MiB
    (sampled every 0.2 s)."""
    tmp = os.path.realpath(env.get("TMPDIR", "/tmp"))
    t = time.perf_counter()
    p = subprocess.Popen(
        ["/usr/bin/time", "-f", "%e %U %S %M", *cmd],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    peak = [0]

    def sample() -> None:
        while p.poll() is None:
            try:
                with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                kids = []
            peak[0] = max(peak[0], sum(temp_bytes(k, tmp) for k in kids))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = p.communicate()
    wall = time.perf_counter() - t
    sampler.join()
    lines = err.strip().splitlines()
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {lines[-3:]}")
    _, u, s, m = lines[-1].split()
    return wall, float(u) + float(s), int(m) / 1024, (lines[-2] if len(lines) > 1 else ""), peak[0] / 2**20


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--benchserver", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", choices=["report", "live"], default=None)
    a = ap.parse_args()
    manifest = write_report(a.benchserver, a.keys, a.files, Path(a.dir))
    env = dict(
        os.environ,
        AWS_ENDPOINT_URL=a.endpoint,
        AWS_ACCESS_KEY_ID="x",
        AWS_SECRET_ACCESS_KEY="y",
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    src, dst = f"s3://list-{a.keys}/", "s3://empty-dst/"
    ways = {
        "report": [a.cli, "sync", "--dry-run", "--source-listing", str(manifest), src, dst],
        "live": [a.cli, "sync", "--dry-run", src, dst],
    }
    if a.only:
        ways = {a.only: ways[a.only]}
    got: dict[str, list] = {k: [] for k in ways}
    load = [os.getloadavg()[0]]
    for i in range(a.runs):
        names = list(ways)
        names = names[i % len(names) :] + names[: i % len(names)]
        for k in names:
            r = run(ways[k], env)
            got[k].append(r)
            print(
                f"run {i + 1} {k}: {r[0]:.1f} s, CPU {r[1]:.1f} s, peak RSS {r[2]:.0f} MiB, {a.keys / r[0]:,.0f} "
                f"rows/s, peak temporary disk {r[4]:,.1f} MiB | {r[3]}",
                flush=True,
            )
    load.append(os.getloadavg()[0])
    for k, rs in got.items():
        wall = statistics.median(r[0] for r in rs)
        print(
            f"{k}: median {wall:.1f} s, {a.keys / wall:,.0f} rows/s, CPU {statistics.median(r[1] for r in rs):.1f} s "
            f"({statistics.median(r[1] for r in rs) / a.keys * 1e6:.2f} µs a row), peak RSS "
            f"{max(r[2] for r in rs):.0f} MiB, peak temporary disk {max(r[4] for r in rs):,.1f} MiB"
        )
    print(f"load average {load[0]:.1f} before, {load[1]:.1f} after")


if __name__ == "__main__":
    main()
