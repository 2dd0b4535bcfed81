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
#: The other floor, also with ``--local``: the requests a parquet row needs
#: (the listing, every footer, then the column chunks Arrow reads,
#: coalesced as Arrow coalesces them), sent through shoal's engine all at
#: once, nothing decoded. What the server alone costs for the row, after
#: the same interpreter start and imports. Not a peer either.
SERVER = "requests-only"
#: The fsspec path's own floor, with ``--import-floor``: shoal's arrow path
#: in a process that has imported fsspec, as the fsspec path must (its
#: filesystem is an fsspec class) and ``pandas.read_parquet`` does on both
#: paths (it imports fsspec whenever it is installed, even when given an
#: Arrow filesystem). What is left between it and ``shoal-fsspec`` is the
#: fsspec path's own cost; what is left between it and ``shoal-arrow`` is
#: fsspec's import. Not a peer.
IMPORT_FLOOR = "arrow+fsspec-import"
FLOORS = (FLOOR, SERVER, IMPORT_FLOOR)
#: The suffix of a shoal client run from ``--before DIR``'s package.
BEFORE = "-before"

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
    if client in ("shoal-arrow", IMPORT_FLOOR):
        if client == IMPORT_FLOOR:
            import fsspec  # noqa: F401
        import shoal.arrow

        return shoal.arrow.filesystem(store), f"{store}://{BUCKET}/ds", None
    if client == "s3fs":
        import s3fs

        fs = s3fs.S3FileSystem(
            key=key, secret=secret, endpoint_url=s3, config_kwargs={"s3": {"addressing_style": "path"}}
        )
        return fs, f"{BUCKET}/ds", f"{BUCKET}/small"
    if client == "gcsfs":
        os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
        import gcsfs

        return gcsfs.GCSFileSystem(endpoint_url=gcs, token="anon"), f"{BUCKET}/ds", f"{BUCKET}/small"
    if client == "obstore-fsspec":
        from obstore.fsspec import FsspecStore

        if store == "s3":
            fs = FsspecStore(
                "s3",
                endpoint=s3,
                access_key_id=key,
                secret_access_key=secret,
                region="us-east-1",
                virtual_hosted_style_request=False,
                client_options={"allow_http": True},
            )
        else:
            fs = FsspecStore("gs", base_url=gcs, bearer_token="x", client_options={"allow_http": True})
        return fs, f"{BUCKET}/ds", f"{BUCKET}/small"
    if client == "pyarrow-S3":
        import pyarrow.fs as pafs

        host = s3.split("://", 1)[1]
        return (
            pafs.S3FileSystem(
                access_key=key, secret_key=secret, endpoint_override=host, scheme="http", region="us-east-1"
            ),
            f"{BUCKET}/ds",
            None,
        )
    if client == "pyarrow-Gcs":
        import pyarrow.fs as pafs

        host = gcs.split("://", 1)[1]
        return (
            pafs.GcsFileSystem(anonymous=True, endpoint_override=host, scheme="http", project_id="test"),
            f"{BUCKET}/ds",
            None,
        )
    raise SystemExit(f"unknown client {client}")


def _plan(local: str) -> dict:
    """Per parquet row, the byte ranges its read needs, from the local
    copy's metadata: every file's footer (Arrow reads the last 64 KiB),
    and the column chunks of the columns and row groups it reads."""
    import pyarrow.parquet as pq

    files, rows = [], {"one_col": [], "all_cols": [], "filter": []}
    for path in sorted(Path(local, "ds").glob("*.parquet")):
        files.append((path.name, path.stat().st_size))
        md = pq.read_metadata(path)
        names = md.schema.names
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            span = {}
            for c in range(md.num_columns):
                col = rg.column(c)
                start = col.dictionary_page_offset or col.data_page_offset
                span[names[c]] = (start, start + col.total_compressed_size)
            rows["one_col"].append((path.name, *span["c03"]))
            every = (min(a for a, _ in span.values()), max(b for _, b in span.values()))
            rows["all_cols"].append((path.name, *every))
            if rg.column(names.index("id")).statistics.min < 10_000:
                rows["filter"].append((path.name, *every))
    return {"files": files, "rows": rows}


def _requests_only(store: str, row: str) -> str:
    import pyarrow.dataset  # noqa: F401  what every parquet reader imports
    import pyarrow.parquet  # noqa: F401

    import shoal
    from shoal import _shoal

    plan = json.loads(Path(os.environ["PYREAD_PLAN"]).read_text())
    s = shoal.session()
    base = f"{store}://{BUCKET}/ds/"
    _shoal.list_prefix(s, base, delimiter=True, detail="full")
    files = plan["files"]
    got = _shoal.cat_ranges(s, [base + n for n, _ in files], [z - (64 << 10) for _, z in files], [z for _, z in files])
    ranges = plan["rows"][row]
    # Ranges of a file within 8 KiB joined, up to 32 MiB: Arrow's coalescing.
    got += _shoal.cat_ranges(
        s, [base + n for n, _, _ in ranges], [a for _, a, _ in ranges], [b for _, _, b in ranges], hole=8 << 10
    )
    bad = [g for g in got if not isinstance(g, bytes)]
    if bad:
        raise bad[0]
    return f"ranges={len(files) + len(ranges)} bytes={sum(len(g) for g in got)}"


def _read_kwargs(row: str) -> dict:
    """``pq.read_table``'s keywords for a parquet row: one column (``c03``),
    all columns, or the row groups holding ``id < 10,000``."""
    if row == "one_col":
        return {"columns": ["c03"]}
    if row == "filter":
        return {"filters": [("id", "<", 10_000)]}
    return {}


def _table_check(t) -> str:
    import pyarrow.compute as pc

    cols = [c for c in ("c03", "c17") if c in t.column_names]
    sums = [round(pc.sum(t[c]).as_py() or 0.0, 3) for c in cols]
    return f"rows={t.num_rows} cols={t.num_columns} sums={sums}"


def child(store: str, row: str, client: str) -> None:
    t0 = time.perf_counter()
    if client == SERVER:
        if row not in ("one_col", "all_cols", "filter"):
            print(json.dumps({"skip": True}))
            return
        print(json.dumps({"check": _requests_only(store, row), "inner": time.perf_counter() - t0}))
        return
    fs, ds, small = _fs(store, client)
    extra: dict[str, float] = {}  # the parquet rows: the read call alone
    if row in ("one_col", "all_cols", "filter"):
        import pyarrow.dataset  # noqa: F401 - see below
        import pyarrow.parquet as pq

        # The call alone leaves out the import of pyarrow.dataset (and of
        # pandas, which it imports), 180-200 ms on this machine: read_table
        # pays it on its first call whatever the filesystem, and it was
        # most of every client's call.
        t1 = time.perf_counter()
        t = pq.read_table(ds, filesystem=fs, **_read_kwargs(row))
        extra["read"] = time.perf_counter() - t1
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

        with (
            LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None) as cluster,
            Client(cluster),
        ):
            t1 = time.perf_counter()
            df = dd.read_parquet(ds, filesystem=fs, columns=["c03"])
            total = df["c03"].sum().compute()
            inner = time.perf_counter() - t1
        print(json.dumps({"check": f"sum={round(float(total), 3)}", "inner": inner}))
        return
    else:
        raise SystemExit(f"unknown row {row}")
    print(json.dumps({"check": check, "inner": time.perf_counter() - t0, **extra}))


# ---------------------------------------------------------------- parent


def _minio() -> tuple[float, float] | None:
    """(requests, bytes sent) so far, from MinIO's public metrics."""
    try:
        text = urllib.request.urlopen(os.environ["SHOAL_TEST_S3"] + "/minio/v2/metrics/node", timeout=5).read().decode()
    except Exception:
        return None
    reqs = sum(float(m.group(1)) for m in re.finditer(r"^minio_s3_requests_total\{[^}]*\} ([0-9.e+]+)$", text, re.M))
    sent = sum(
        float(m.group(1)) for m in re.finditer(r"^minio_s3_traffic_sent_bytes\{[^}]*\} ([0-9.e+]+)$", text, re.M)
    )
    return reqs, sent


def one(store: str, row: str, client: str) -> dict:
    before = None  # requests: counted by bench/py_read_probe.py (MinIO's metrics lag)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    env = None
    if client.endswith(BEFORE):
        # The same client from an older shoal package (``--before DIR``).
        env = dict(os.environ, PYTHONPATH=os.environ["PYREAD_BEFORE"])
        client = client.removesuffix(BEFORE)
    p = subprocess.run([sys.executable, __file__, "child", store, row, client], capture_output=True, text=True, env=env)
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
    if row == "dask" and "inner" in res:
        out["wall"] = res["inner"]  # the cluster's start-up excluded
    return out


def run(args) -> None:
    # shoal installed for development (`maturin develop`) is compiled from
    # source on every import where PYTHONDONTWRITEBYTECODE is set (as on
    # the bench machines: 11 ms a process), while the peers' wheels came
    # with their .pyc files: compile it once, as pip does for a wheel.
    import compileall

    import shoal

    compileall.compile_dir(str(Path(shoal.__file__).parent), quiet=1)
    if args.before:
        os.environ["PYREAD_BEFORE"] = str(Path(args.before).resolve())
        compileall.compile_dir(args.before, quiet=1)
    if args.local:
        os.environ["PYREAD_LOCAL"] = str(Path(args.local).resolve())
        plan = Path(args.local, "plan.json")
        plan.write_text(json.dumps(_plan(args.local)))
        os.environ["PYREAD_PLAN"] = str(plan.resolve())
    stores = args.stores.split(",")
    rows = args.rows.split(",")
    results: dict = {}
    args.load = [os.getloadavg()[0]]
    for i in range(args.runs):
        for store in stores:
            for row in rows:
                clients = _clients(store, args)
                # Interleaved, and the order turned each run.
                k = i % len(clients)
                for client in clients[k:] + clients[:k]:
                    r = one(store, row, client)
                    if r.get("skip"):
                        continue
                    results.setdefault((store, row, client), []).append(r)
                    print(
                        store,
                        row,
                        client,
                        {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()},
                        flush=True,
                    )
    args.load.append(os.getloadavg()[0])
    write(results, stores, rows, args)


def _clients(store: str, args) -> list[str]:
    """The clients of a store's rows: ``--clients`` (when given) of the
    peers, then the floors when ``--local`` is given."""
    wanted = args.clients.split(",") if args.clients else None
    peers = [c for c in CLIENTS[store] if wanted is None or c in wanted]
    if args.before:
        peers = [x for c in peers for x in ([c, c + BEFORE] if c == "shoal-fsspec" else [c])]
    floors = [FLOOR, SERVER] if args.local else []
    if args.import_floor:
        floors.append(IMPORT_FLOOR)
    return peers + floors


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
        "bytes per read, counted at MinIO by bench/py_read_probe.py: docs/python-reads.md. Dask row: the read's own "
        "time on a",
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
            f"`{SERVER}`: the requests a parquet row needs (listing, footers, then the column chunks as",
            "Arrow coalesces them), all at once through shoal's engine, nothing decoded, after the same",
            "imports: the server's floor for the row, left out of the ratios too.",
        ]
    if args.import_floor:
        lines[-1:-1] = [
            "",
            f"`{IMPORT_FLOOR}`: shoal's arrow path in a process that imported fsspec first, as the fsspec",
            "path must and `pandas.read_parquet` does on either path: the fsspec path's floor, left out of the",
            "ratios. The last column then also gives shoal-fsspec ÷ this floor (wall / CPU).",
        ]
    for store in stores:
        clients = _clients(store, args)
        title = "S3 (MinIO)" if store == "s3" else "GCS (fake-gcs-server)"
        if args.append:  # a second table of the same rows: say how it differs
            title += (
                f", `--runs {args.runs}"
                + (f" --clients {args.clients}" if args.clients else "")
                + f"` (1-minute load {args.load[0]:.1f} before, {args.load[1]:.1f} after)"
            )
        lines += [f"## {title}", ""]
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
            cells = [
                cell + (" ≠" if c not in FLOORS and checks.get(c) not in (None, ref) else "")
                for c, cell in zip(clients, cells, strict=True)
            ]
            ratio = ""
            mine = [c for c in clients if c.startswith("shoal") and not c.endswith(BEFORE)]
            peers = [c for c in clients if not c.startswith("shoal") and c not in FLOORS]
            for k in ("wall", "cpu"):
                m = [_med(results.get((store, row, c), []), k) for c in mine]
                p = [_med(results.get((store, row, c), []), k) for c in peers]
                m = [x for x in m if x is not None]
                p = [x for x in p if x is not None]
                ratio += (f"{min(p) / min(m):.2f}×" if m and p else "—") + (" / " if k == "wall" else "")
            if IMPORT_FLOOR in clients:
                got = [
                    (
                        _med(results.get((store, row, "shoal-fsspec"), []), k),
                        _med(results.get((store, row, IMPORT_FLOOR), []), k),
                    )
                    for k in ("wall", "cpu")
                ]
                if all(a is not None and b for a, b in got):
                    ratio += "; fsspec ÷ floor " + " / ".join(f"{a / b:.2f}×" for a, b in got)
            lines.append(f"| {ROW_NAMES[row]} | " + " | ".join(cells) + f" | {ratio} |")
        lines.append("")
        # The read alone: the `pq.read_table` call, imports and the
        # filesystem's creation left out (the fsspec path's import of
        # fsspec is most of what separates it from the arrow path).
        for row in rows:
            alone = {c: _med(results.get((store, row, c), []), "read") for c in clients}
            alone = {c: v for c, v in alone.items() if v is not None}
            if not alone:
                continue
            both = [alone.get(c) for c in ("shoal-fsspec", "shoal-arrow")]
            tail = f"; fsspec ÷ arrow {both[0] / both[1]:.2f}×" if all(both) else ""
            lines.append(
                f"- {ROW_NAMES[row]}, the `pq.read_table` call alone (s): "
                + ", ".join(f"{c} {v:.3f}" for c, v in alone.items())
                + tail
            )
        lines.append("")

        def check_of(row, store=store):
            found = (
                r[0].get("check")
                for (s, rw, _c), r in results.items()
                if s == store and rw == row and r and "check" in r[0]
            )
            return next(found, "—")

        lines.append("Checksums: " + "; ".join(f"{row}: {check_of(row)}" for row in rows))
        lines.append("")
    out = Path(args.out) if args.out else HERE / "results" / "PY-READ.md"
    if args.append and out.exists():
        lines = (
            out.read_text().splitlines()
            + [""]
            + lines[next(i for i, line in enumerate(lines) if line.startswith("## ")) :]
        )
    out.write_text("\n".join(lines) + "\n")
    raw = "py-read-raw-appended.json" if args.append else "py-read-raw.json"
    raw_path = out.with_suffix(".json") if args.out else HERE / "results" / raw
    raw_path.write_text(json.dumps({"|".join(k): v for k, v in results.items()}, indent=1))
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
    r.add_argument(
        "--append", action="store_true", help="add the tables to bench/results/PY-READ.md instead of replacing it"
    )
    r.add_argument("--clients", default=None, help="only these clients (comma-separated; the floors come with --local)")
    r.add_argument("--local", default=None, help="the directory `setup` wrote: adds the local-files floor to each row")
    r.add_argument(
        "--import-floor",
        action="store_true",
        help=f"adds `{IMPORT_FLOOR}`: shoal's arrow path after `import fsspec`, the fsspec path's floor",
    )
    r.add_argument(
        "--before",
        default=None,
        help="a directory holding another version of the `shoal` package (with this build's _shoal module): adds "
        "shoal-fsspec again, run from it (`shoal-fsspec-before`), in the same rotation",
    )
    r.add_argument("--out", default=None, help="write the tables here (raw runs beside it, .json) instead of results/")
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
