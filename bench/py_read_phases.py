#!/usr/bin/env python3
"""One fresh-process parquet read, by phase: the imports and the
filesystem, then the read.

    bench/py_read_phases.py shoal-fsspec|arrow+fsspec-import s3|gs one_col|all_cols|filter

The clients, dataset and rows are bench/py_read_bench.py's (``_fs``,
``_read_kwargs``; its environment): ``arrow+fsspec-import`` is shoal's
arrow path after ``import fsspec``, as the fsspec path must import it and
``pandas.read_parquet`` does on either path, so the two differ only in
the filesystem they read through. Prints each phase's wall and CPU
seconds; run it under ``/usr/bin/time``, alternating the two, for the
whole process (exit included), its system time and page faults
(bench/results/PY-READ.md).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import py_read_bench as bench  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    client, store, row = sys.argv[1:4]
    t0, c0 = time.perf_counter(), _cpu()
    import pyarrow.parquet as pq

    fs, ds, _ = bench._fs(store, client)
    t1, c1 = time.perf_counter(), _cpu()
    t = pq.read_table(ds, filesystem=fs, **bench._read_kwargs(row))
    t2, c2 = time.perf_counter(), _cpu()
    phases = {"setup": [t1 - t0, c1 - c0], "read": [t2 - t1, c2 - c1]}
    rounded = {k: [round(x, 3) for x in v] for k, v in phases.items()}
    print(json.dumps({"client": client, "rows": t.num_rows, **rounded}))


if __name__ == "__main__":
    main()
