#!/usr/bin/env python3
"""Where a Python read's time goes: requests by kind and bytes the server
sent (MinIO's metrics), bytes the read needed (from the parquet
metadata), and how long the GIL was held (a probe thread that asks for the
GIL every millisecond; the time it waited beyond that is time something
else held it).

    bench/py_read_probe.py CLIENT ROW    # ROW: one_col, all_cols, filter, cat_small

Clients as bench/py_read_bench.py's, plus ``shoal-fsspec-old``: shoal's
fsspec filesystem as it was before issue #41 (fsspec's 5 MiB read-ahead,
no size/version kept from a listing or stat for the open after).
Needs MinIO started with ``MINIO_PROMETHEUS_AUTH_TYPE=public``. Figures:
docs/python-reads.md.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import py_read_bench as bench  # noqa: E402

#: MinIO answers its metrics from a cache refreshed at most this often
#: (seen: a request counted at once only when the last scrape was ~10 s
#: old), so each reading waits this long after the one before.
SCRAPE = 11.0


def counters() -> dict[str, float]:
    time.sleep(SCRAPE)
    text = urllib.request.urlopen(os.environ["SHOAL_TEST_S3"] + "/minio/v2/metrics/node", timeout=5).read().decode()
    out: dict[str, float] = {}
    for m in re.finditer(r'^minio_s3_requests_total\{api="([a-z0-9]+)"[^}]*\} ([0-9.e+]+)$', text, re.M):
        out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(2))
    for m in re.finditer(r"^minio_s3_traffic_sent_bytes\{[^}]*\} ([0-9.e+]+)$", text, re.M):
        out["sent"] = out.get("sent", 0) + float(m.group(1))
    return out


class GilProbe(threading.Thread):
    """Sleeps 1 ms at a time; any lateness past that was spent waiting for
    the GIL (or a CPU: the machine is shared, so this is an upper bound)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.late = 0.0
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            t = time.perf_counter()
            time.sleep(0.001)
            self.late += max(0.0, time.perf_counter() - t - 0.0011)


def needed(row: str) -> int:
    """Bytes a parquet row's read needs: each file's footer (its metadata
    and the 8 bytes after it) and the column chunks of the benchmark's
    request plan (``py_read_bench._plan``), from the local copy (the same
    files as uploaded)."""
    import pyarrow.parquet as pq

    d = os.environ.get("PYREAD_DATA", "/tmp/pyread-data")
    plan = bench._plan(d)
    footers = sum(pq.read_metadata(f"{d}/ds/{name}").serialized_size + 8 for name, _ in plan["files"])
    return footers + sum(b - a for _, a, b in plan["rows"][row])


def main() -> None:
    client, row = sys.argv[1], sys.argv[2]
    old = client == "shoal-fsspec-old"
    fs, ds, small = bench._fs("s3", "shoal-fsspec" if old else client)
    if old:
        fs._keep = lambda info: info  # no size/version kept for the next open
        fs.open = _with_cache(fs.open, "readahead")
    c0 = counters()
    probe = GilProbe()
    probe.start()
    t0 = time.perf_counter()
    if row == "cat_small":
        got = fs.cat([f"{small}/o{i:05d}" for i in range(2000)])
        need = sum(len(v) for v in got.values())
    else:
        import pyarrow.parquet as pq

        pq.read_table(ds, filesystem=fs, **bench._read_kwargs(row))
        need = needed(row)
    wall = time.perf_counter() - t0
    probe.stop = True
    probe.join()
    c1 = counters()
    d = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1}
    print(
        json.dumps(
            {
                "client": client,
                "row": row,
                "wall": round(wall, 2),
                "requests": {k: int(v) for k, v in d.items() if k != "sent" and v},
                "sent_mib": round(d.get("sent", 0) / 2**20, 1),
                "needed_mib": round(need / 2**20, 1),
                "gil_held_s": round(probe.late, 2),
            }
        )
    )


def _with_cache(open_, cache_type):
    def opener(path, mode="rb", **kw):
        if mode == "rb":
            kw.setdefault("cache_type", cache_type)
        return open_(path, mode, **kw)

    return opener


if __name__ == "__main__":
    main()
