#!/usr/bin/env python3
"""shoal's fsspec and arrow routes read by one process, alternated: the
per-read cost without the interpreter's start, the imports or exit (which
bench/py_read_bench.py's fresh processes include: importing fsspec alone
is 60-70 ms of CPU the arrow route never pays).

    bench/py_read_inproc.py READS TAG [STORES [ROWS [CLIENTS]]]
                                         # one JSON line per (store, row)

STORES, ROWS and CLIENTS are comma lists (default ``s3,gs``, the three
parquet rows, and shoal's two routes); a client may be one of
bench/py_read_bench.py's peers (``pyarrow-S3``), so a row can be held
against pyarrow's own filesystem warm, in one process, alternated.

Each read makes a fresh filesystem (nothing kept between reads); the
first round warms the process up and is left out; medians of wall and
CPU (all threads) per read. Environment as bench/py_read_bench.py's. Run
it with ``PYTHONPATH=DIR`` to measure another version of the package.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyarrow.parquet as pq  # noqa: E402

import py_read_bench as bench  # noqa: E402
import shoal.fsspec  # noqa: E402

CLIENTS = ("shoal-fsspec", "shoal-arrow")


def main() -> None:
    reads, tag = int(sys.argv[1]), sys.argv[2]
    stores = _arg(3, "s3,gs")
    rows = _arg(4, "one_col,all_cols,filter")
    clients = tuple(_arg(5, ",".join(CLIENTS)))
    for store in stores:
        for row in rows:
            kw = bench._read_kwargs(row)
            got: dict = {c: {"wall": [], "cpu": []} for c in clients}
            for i in range(reads + 1):
                for c in clients if i % 2 else clients[::-1]:
                    shoal.fsspec.ShoalFileSystem.clear_instance_cache()
                    fs, ds, _ = bench._fs(store, c)
                    t0, c0 = time.perf_counter(), time.process_time()
                    t = pq.read_table(ds, filesystem=fs, **kw)
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                    del t, fs
                    if i:
                        got[c]["wall"].append(wall)
                        got[c]["cpu"].append(cpu)
            out = {"tag": tag, "store": store, "row": row}
            for c in clients:
                out[c] = {k: statistics.median(v) for k, v in got[c].items()}
            print(json.dumps(out), flush=True)


def _arg(i: int, default: str) -> list[str]:
    return (sys.argv[i] if len(sys.argv) > i else default).split(",")


if __name__ == "__main__":
    main()
