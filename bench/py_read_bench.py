#!/usr/bin/env python3
"""Reading datasets from Python: shoal's fsspec and pyarrow filesystems
against s3fs/gcsfs, obstore's fsspec store and pyarrow's own C++ S3/GCS
filesystems, on the local servers.

    bench/py_read_bench.py setup DIR          # make DIR/ds (parquet) and DIR/small
    bench/py_read_bench.py run [--runs 5] [--stores s3,gs] [--rows ...]

Needs a venv with shoal (``maturin develop --release``), pyarrow, pandas,
dask[distributed], s3fs, gcsfs and obstore (see bench/pypeers), and the
servers running with the data uploaded (``shoal cp -r DIR/ds s3://pyread/``
and ``DIR/small``; the same under gs://pyread/); env: SHOAL_TEST_S3,
SHOAL_TEST_GCS, AWS_* credentials. MinIO started with
``MINIO_PROMETHEUS_AUTH_TYPE=public`` lets the requests and bytes sent per
run be counted at the server.

Each (row, client) is a fresh child process: wall time around it
(interpreter start and imports included), client CPU (user+sys of the
child and what it waited for) from rusage. Each child prints a checksum
of what it read (sums of two columns, rows, or a CRC of the small
objects): every client of a row must print the same, so one that reads
less is caught. Rows run round-robin, ``--runs`` times; medians are
written to bench/results/PY-READ.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUCKET = "pyread"
ROWS = ["one_col", "all_cols", "filter", "cat_small", "dask"]
ROW_NAMES = {
    "one_col": "one column, `pq.read_table(columns=[...])`",
    "all_cols": "all columns",
    "filter": "row-group filter, 10% of rows",
    "cat_small": "`fs.cat` of 2,000 × 8 KiB objects",
    "dask": "`dask.dataframe.read_parquet`, 2 workers, one column sum",
}
CLIENTS = {
    "s3": ["shoal-fsspec", "shoal-arrow", "s3fs", "obstore-fsspec", "pyarrow-S3"],
    "gs": ["shoal-fsspec", "shoal-arrow", "gcsfs", "obstore-fsspec", "pyarrow-Gcs"],
}
#: The floor, run beside the clients when ``--local DIR`` is given: the
#: same reads from a local copy of the data (page cache), pyarrow's local
#: filesystem. No network and no server: what the interpreter, the imports
#: and the decoding cost alone. Not a peer (left out of the ratios).
FLOOR = "local-files"

# ---------------------------------------------------------------- child


def _fs(store: str, client: str):
    """(filesystem, dataset path, small-object prefix) for a client."""
    if client == FLOOR:
        import pyarrow.fs as pafs

        d = os.environ["PYREAD_LOCAL"]
        return pafs.LocalFileSystem(), f"{d}/ds", f"{d}/small"
    s3 = os.environ["SHOAL_TEST_S3"]
    gcs = os.environ["SHOAL_TEST_GCS"]
    key, secret = os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
    if client == "shoal-fsspec":
        import shoal.fsspec

        return shoal.fsspec.ShoalFileSystem(), f"{store}/{BUCKET}/ds", f"{store}/{BUCKET}/small"
    if client == "shoal-arrow":
        import shoal.arrow

        return shoal.arrow.filesystem(store), f"{store}://{BUCKET}/ds", None
    if client == "s3fs":
        import s3fs

        fs = s3fs.S3FileSystem(key=key, secret=secret, endpoint_url=s3, config_kwargs={"s3": {"addressing_style": "path"}})
        return fs, f"{BUCKET}/ds", f"{BUCKET}/small"
    if client == "gcsfs":
        os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
        import gcsfs

        return gcsfs.GCSFileSystem(endpoint_url=gcs, token="anon"), f"{BUCKET}/ds", f"{BUCKET}/small"
    if client == "obstore-fsspec":
        from obstore.fsspec import FsspecStore

        if store == "s3":
            fs = FsspecStore("s3", endpoint=s3, access_key_id=key, secret_access_key=secret, region="us-east-1", virtual_hosted_style_request=False, client_options={"allow_http": True})
        else:
            fs = FsspecStore("gs", base_url=gcs, bearer_token="x", client_options={"allow_http": True})
        return fs, f"{BUCKET}/ds", f"{BUCKET}/small"
    if client == "pyarrow-S3":
        import pyarrow.fs as pafs

        host = s3.split("://", 1)[1]
        return pafs.S3FileSystem(access_key=key, secret_key=secret, endpoint_override=host, scheme="http", region="us-east-1"), f"{BUCKET}/ds", None
    if client == "pyarrow-Gcs":
        import pyarrow.fs as pafs

        host = gcs.split("://", 1)[1]
        return pafs.GcsFileSystem(anonymous=True, endpoint_override=host, scheme="http", project_id="test"), f"{BUCKET}/ds", None
    raise SystemExit(f"unknown client {client}")


def _table_check(t) -> str:
    import pyarrow.compute as pc

    cols = [c for c in ("c03", "c17") if c in t.column_names]
    sums = [round(pc.sum(t[c]).as_py() or 0.0, 3) for c in cols]
    return f"rows={t.num_rows} cols={t.num_columns} sums={sums}"


def child(store: str, row: str, client: str) -> None:
    t0 = time.perf_counter()
    fs, ds, small = _fs(store, client)
    if row in ("one_col", "all_cols", "filter"):
        import pyarrow.parquet as pq

        kw: dict = {}
        if row == "one_col":
            kw["columns"] = ["c03"]
        if row == "filter":
            kw["filters"] = [("id", "<", 10_000)]
        t = pq.read_table(ds, filesystem=fs, **kw)
        check = _table_check(t)
    elif row == "cat_small":
        import zlib

        if small is None:
            print(json.dumps({"skip": True}))
            return
        names = [f"{small}/o{i:05d}" for i in range(2000)]
        if client == FLOOR:
            got = {}
            for n in names:
                with open(n, "rb") as f:
                    got[n] = f.read()
        else:
            got = fs.cat(names)
        crc = 0
        for k in sorted(got):
            crc = zlib.crc32(got[k], crc)
        check = f"n={len(got)} crc={crc:08x}"
    elif row == "dask":
        import dask.dataframe as dd
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None) as cluster, Client(cluster):
            t1 = time.perf_counter()
            df = dd.read_parquet(ds, filesystem=fs, columns=["c03"])
            total = df["c03"].sum().compute()
            inner = time.perf_counter() - t1
        print(json.dumps({"check": f"sum={round(float(total), 3)}", "inner": inner}))
        return
    else:
        raise SystemExit(f"unknown row {row}")
    print(json.dumps({"check": check, "inner": time.perf_counter() - t0}))


# ---------------------------------------------------------------- parent


def _minio() -> tuple[float, float] | None:
    """(requests, bytes sent) so far, from MinIO's public metrics."""
    try:
        text = urllib.request.urlopen(os.environ["SHOAL_TEST_S3"] + "/minio/v2/metrics/node", timeout=5).read().decode()
    except Exception:
        return None
    reqs = sum(float(m.group(1)) for m in re.finditer(r'^minio_s3_requests_total\{[^}]*\} ([0-9.e+]+)$', text, re.M))
    sent = sum(float(m.group(1)) for m in re.finditer(r'^minio_s3_traffic_sent_bytes\{[^}]*\} ([0-9.e+]+)$', text, re.M))
    return reqs, sent


def one(store: str, row: str, client: str) -> dict:
    before = None  # requests: counted by bench/py_read_probe.py (MinIO's metrics lag)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, __file__, "child", store, row, client], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = None
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    out = {"wall": wall, "cpu": cpu, "rss": r1.ru_maxrss}
    if p.returncode != 0:
        out["error"] = (p.stderr.strip().splitlines() or ["?"])[-1][:200]
        return out
    res = json.loads(p.stdout.strip().splitlines()[-1])
    out.update(res)
    if before and after:
        out["requests"] = after[0] - before[0]
        out["sent_mib"] = (after[1] - before[1]) / 2**20
    if row == "dask":
        out["wall"] = res["inner"]  # the cluster's start-up excluded
    return out


def run(args) -> None:
    if args.local:
        os.environ["PYREAD_LOCAL"] = str(Path(args.local).resolve())
    stores = args.stores.split(",")
    rows = args.rows.split(",")
    results: dict = {}
    args.load = [os.getloadavg()[0]]
    for i in range(args.runs):
        for store in stores:
            for row in rows:
                clients = CLIENTS[store][:] + ([FLOOR] if args.local else [])
                # Interleaved, and the order turned each run.
                k = i % len(clients)
                for client in clients[k:] + clients[:k]:
                    r = one(store, row, client)
                    if r.get("skip"):
                        continue
                    results.setdefault((store, row, client), []).append(r)
                    print(store, row, client, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
    args.load.append(os.getloadavg()[0])
    write(results, stores, rows, args)


def _med(rs: list[dict], k: str) -> float | None:
    v = [r[k] for r in rs if k in r and "error" not in r]
    return statistics.median(v) if v else None


def write(results: dict, stores: list[str], rows: list[str], args) -> None:
    lines = [
        "# Reading datasets from Python: shoal vs pyarrow's filesystems, obstore, s3fs/gcsfs",
        "",
        f"`bench/py_read_bench.py run --runs {args.runs}`: {args.runs} interleaved runs, medians; each cell a fresh",
        "process (interpreter start and imports included) on the same 2-core machine as MinIO / fake-gcs-server",
        f"(1-minute load average {args.load[0]:.1f} before the runs, {args.load[1]:.1f} after; the servers' own load",
        "counts in it). Dataset: 16 parquet files, 296 MiB, 20 columns (id + 19",
        "float64), 4 row groups a file; 2,000 objects of 8 KiB. Cells: wall s / client CPU s. Requests and",
        "bytes per read, counted at MinIO by bench/py_read_probe.py: docs/python-reads.md. Dask row: the read's own time on a",
        "2-process LocalCluster (start-up excluded), CPU of the driver and its workers. A checksum of what",
        "was read (column sums, rows, CRC of the small objects) is compared across clients: a `≠` marks one",
        "that differs.",
        "",
    ]
    if args.local:
        lines[-1:-1] = [
            "",
            f"`{FLOOR}`: the same reads of a local copy of the data (page cache) with pyarrow's local",
            "filesystem, in the same rotation: the floor without network or server, left out of the ratios.",
        ]
    for store in stores:
        clients = CLIENTS[store] + ([FLOOR] if args.local else [])
        lines += [f"## {'S3 (MinIO)' if store == 's3' else 'GCS (fake-gcs-server)'}", ""]
        lines.append("| read | " + " | ".join(clients) + " | shoal best ÷ best peer (wall / CPU) |")
        lines.append("|---|" + "---:|" * len(clients) + "---:|")
        for row in rows:
            cells = []
            checks = {}
            for c in clients:
                rs = results.get((store, row, c), [])
                if not rs:
                    cells.append("—")
                    continue
                err = next((r["error"] for r in rs if "error" in r), None)
                if err and _med(rs, "wall") is None:
                    cells.append(f"error: {err[:60]}")
                    continue
                checks[c] = rs[0].get("check")
                cell = f"{_med(rs, 'wall'):.2f} / {_med(rs, 'cpu'):.2f}"
                if _med(rs, "requests") is not None:
                    cell += f"<br>{_med(rs, 'requests'):.0f} req, {_med(rs, 'sent_mib'):.0f} MiB"
                cells.append(cell)
            ref = checks.get("pyarrow-S3") or checks.get("pyarrow-Gcs") or next(iter(checks.values()), None)
            cells = [cell + (" ≠" if checks.get(c) not in (None, ref) else "") for c, cell in zip(clients, cells)]
            ratio = ""
            mine = [c for c in clients if c.startswith("shoal")]
            peers = [c for c in clients if not c.startswith("shoal") and c != FLOOR]
            for k in ("wall", "cpu"):
                m = [_med(results.get((store, row, c), []), k) for c in mine]
                p = [_med(results.get((store, row, c), []), k) for c in peers]
                m = [x for x in m if x is not None]
                p = [x for x in p if x is not None]
                ratio += (f"{min(p) / min(m):.2f}×" if m and p else "—") + (" / " if k == "wall" else "")
            lines.append(f"| {ROW_NAMES[row]} | " + " | ".join(cells) + f" | {ratio} |")
        lines.append("")
        lines.append("Checksums: " + "; ".join(f"{row}: {next((r[0].get('check') for (s, rw, c), r in results.items() if s == store and rw == row and r and 'check' in r[0]), '—')}" for row in rows))
        lines.append("")
    out = HERE / "results" / "PY-READ.md"
    if args.append and out.exists():
        lines = out.read_text().splitlines() + [""] + lines[next(i for i, line in enumerate(lines) if line.startswith("## ")) :]
    out.write_text("\n".join(lines) + "\n")
    (HERE / "results" / "py-read-raw.json").write_text(json.dumps({"|".join(k): v for k, v in results.items()}, indent=1))
    print(f"wrote {out}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        child(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--runs", type=int, default=5)
    r.add_argument("--stores", default="s3,gs")
    r.add_argument("--rows", default=",".join(ROWS))
    r.add_argument("--append", action="store_true")
    r.add_argument("--local", default=None, help="the directory `setup` wrote: adds the local-files floor to each row")
    s = sub.add_parser("setup")
    s.add_argument("dir")
    args = ap.parse_args()
    if args.cmd == "run":
        run(args)
    else:
        setup(Path(args.dir))


def setup(d: Path) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(41)
    n = 100_000
    (d / "ds").mkdir(parents=True, exist_ok=True)
    (d / "small").mkdir(parents=True, exist_ok=True)
    for f in range(16):
        cols = {"id": pa.array(np.arange(n, dtype=np.int64))}
        for c in range(1, 20):
            cols[f"c{c:02d}"] = pa.array(rng.random(n))
        pq.write_table(pa.table(cols), d / "ds" / f"part-{f:02d}.parquet", row_group_size=n // 4)
    for i in range(2000):
        (d / "small" / f"o{i:05d}").write_bytes(rng.bytes(8192))


if __name__ == "__main__":
    main()
