#!/usr/bin/env python3
"""`rm -r` of many keys: shoal against s5cmd, requests and wall time.

    bench/rm_many.py                 # 100,000 keys, 3 interleaved runs per tool
    bench/rm_many.py --keys 5000 --gcs-keys 2000 --runs 1

Starts its own MinIO (with public metrics, so requests are counted by the
server, per S3 API) and fake-gcs-server through scripts/servers.sh on
ports from SHOAL_BENCH_PORT_BASE (default 31400) + 40. Before each timed
run the keys are uploaded again (`shoal cp -r` of a folder of empty
files, not timed); then the tool deletes them all and the listing must be
empty afterwards (a run that leaves a key is FAILED). Rows:

- MinIO (S3): `shoal rm -r s3://b/p/` and `s5cmd rm 's3://b/p/*'`: wall s,
  client CPU s, peak RSS, and the requests MinIO counted during the run
  by API (ListObjectsV2, DeleteObjects, DeleteObject).
- fake-gcs-server (GCS): `shoal rm -r gs://b/p/` of --gcs-keys keys
  (default 10,000; JSON API batches of 100); no peer here batches GCS deletes (s5cmd speaks S3 only), and the
  server keeps no counters, so its requests are the plan's: one listing
  page per 1,000 keys plus one batch per 100.

Writes RM.md (tables) to --out (default bench/results/raw/rm).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.env import BIN, RAW, REPO, S3_KEY, S3_SECRET  # noqa: E402
from harness.measure import run  # noqa: E402


def log(msg: str) -> None:
    print(f"rm_many: {msg}", file=sys.stderr, flush=True)


def s3_env(endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_", "STORAGE_EMULATOR"))}
    env.update(
        AWS_ACCESS_KEY_ID=S3_KEY,
        AWS_SECRET_ACCESS_KEY=S3_SECRET,
        AWS_REGION="us-east-1",
        AWS_EC2_METADATA_DISABLED="true",
        AWS_ENDPOINT_URL=endpoint,
        NO_PROXY="*",
    )
    return env


def gcs_env(endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "GOOGLE_", "STORAGE_EMULATOR"))}
    env.update(STORAGE_EMULATOR_HOST=endpoint, GOOGLE_CLOUD_PROJECT="test", NO_PROXY="*")
    return env


def minio_requests(endpoint: str) -> dict[str, float]:
    """Requests MinIO has counted, by API (its public node metrics)."""
    text = urllib.request.urlopen(endpoint + "/minio/v2/metrics/node", timeout=10).read().decode()
    out: dict[str, float] = {}
    for m in re.finditer(r'^minio_s3_requests_total\{api="([a-z0-9]+)"[^}]*\} ([0-9.e+]+)$', text, re.M):
        out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(2))
    return out


def settled_requests(endpoint: str) -> dict[str, float]:
    """MinIO answers its metrics from a cache: read until two reads agree."""
    last = minio_requests(endpoint)
    for _ in range(30):
        time.sleep(2)
        now = minio_requests(endpoint)
        if now == last:
            return now
        last = now
    return last


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument(
        "--gcs-keys",
        type=int,
        default=10_000,
        help="keys for the fake-gcs-server row (its memory backend slows with the count: "
        "seeding 100,000 keys did not end in 10 minutes)",
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shoal-bin", default=str(REPO / "target" / "release" / "shoal"))
    ap.add_argument("--out", default=str(RAW / "rm"))
    a = ap.parse_args()
    shoal = a.shoal_bin
    s5cmd = str(BIN / "s5cmd")
    for exe in (shoal, s5cmd):
        if not os.access(exe, os.X_OK):
            log(f"no {exe}: build shoal (cargo build --release) and install s5cmd (bench/run.py --smoke installs it)")
            return 2
    base = int(os.environ.get("SHOAL_BENCH_PORT_BASE", "31400")) + 40
    run_dir = Path(tempfile.mkdtemp(prefix="shoal-rm-"))
    senv = dict(
        os.environ,
        SHOAL_RUN_DIR=str(run_dir / "servers"),
        SHOAL_GCS_PORT=str(base),
        SHOAL_S3_PORT=str(base + 2),
        SHOAL_TOXI_PORT=str(base + 4),
        MINIO_PROMETHEUS_AUTH_TYPE="public",
    )
    s3 = f"http://127.0.0.1:{base + 2}"
    gcs = f"http://127.0.0.1:{base}"
    subprocess.run([str(REPO / "scripts" / "servers.sh"), "start", "s3", "gcs"], env=senv, check=True)
    try:
        srcs = {}
        for scheme, n_keys in (("s3", a.keys), ("gs", a.gcs_keys)):
            src = srcs[scheme] = run_dir / f"keys-{scheme}"
            for i in range(n_keys):
                d = src / f"{i // 1000:03d}"
                if i % 1000 == 0:
                    d.mkdir(parents=True)
                (d / f"k{i:06d}").touch()
        counts = {"s3": a.keys, "gs": a.gcs_keys}
        rows: dict[tuple[str, str], list] = {}
        for _scheme, env, mb in (("s3", s3_env(s3), "s3://rm-bench"), ("gs", gcs_env(gcs), "gs://rm-bench")):
            r = run([shoal, "mb", mb], env=env)
            if r.rc != 0 and "exists" not in r.stderr:
                log(f"mb {mb}: {r.stderr.strip()}")
                return 1
        tools = [("shoal", "s3"), ("s5cmd", "s3"), ("shoal", "gs")]
        for n in range(a.runs):
            for tool, scheme in tools:
                env = s3_env(s3) if scheme == "s3" else gcs_env(gcs)
                url = f"{scheme}://rm-bench/p/"
                t0 = time.perf_counter()
                up = run([shoal, "cp", "-r", f"{srcs[scheme]}/", url], env=env, timeout=3600)
                if up.rc != 0:
                    log(f"seeding {url}: {up.stderr.strip()}")
                    return 1
                log(f"run {n + 1}: seeded {counts[scheme]} keys at {url} in {time.perf_counter() - t0:.0f} s")
                before = settled_requests(s3) if scheme == "s3" else {}
                argv = [shoal, "rm", "-r", url] if tool == "shoal" else [s5cmd, "--endpoint-url", s3, "rm", url + "*"]
                p = run(argv, env=env, timeout=3600)
                after = settled_requests(s3) if scheme == "s3" else {}
                left = run([shoal, "ls", "-r", url], env=env)
                ok = p.rc == 0 and not left.stdout.strip()
                reqs = {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}
                log(
                    f"run {n + 1}: {tool} {scheme}: {p.wall:.2f} s wall, {p.cpu:.2f} s CPU, {p.rss_mib:.0f} MiB, "
                    f"{'ok' if ok else 'FAILED'} {reqs}"
                )
                if not ok:
                    log(f"{tool}: rc {p.rc}: {p.stderr.strip()[-400:]}; left {len(left.stdout.splitlines())}")
                rows.setdefault((tool, scheme), []).append((p.wall, p.cpu, p.rss_mib, ok, reqs))
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        lines = [
            f"# rm -r ({a.runs} interleaved runs, medians)",
            "",
            "| server | keys | tool | wall s | client CPU s | peak RSS MiB | requests (by API) | vs shoal |",
            "|---|---|---|---|---|---|---|",
        ]
        shoal_wall = {s: statistics.median(r[0] for r in rows[("shoal", s)]) for s in ("s3", "gs")}
        for (tool, scheme), rs in rows.items():
            wall = statistics.median(r[0] for r in rs)
            cpu = statistics.median(r[1] for r in rs)
            rss = statistics.median(r[2] for r in rs)
            ok = all(r[3] for r in rs)
            reqs = rs[-1][4]
            req_text = (
                ", ".join(f"{k} {v:.0f}" for k, v in sorted(reqs.items()))
                if scheme == "s3"
                else f"{-(-a.gcs_keys // 1000)} list pages + {-(-a.gcs_keys // 100)} batches (planned)"
            )
            server = "MinIO (S3)" if scheme == "s3" else "fake-gcs-server (GCS)"
            lines.append(
                f"| {server} | {counts[scheme]:,} | {tool} | {wall:.2f} | {cpu:.2f} | {rss:.0f} | {req_text} | "
                f"{wall / shoal_wall[scheme]:.2f}x |" + ("" if ok else " FAILED |")
            )
        (out / "RM.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        return 0
    finally:
        subprocess.run([str(REPO / "scripts" / "servers.sh"), "stop"], env=senv)
        subprocess.run(["rm", "-rf", str(run_dir)])


if __name__ == "__main__":
    sys.exit(main())
