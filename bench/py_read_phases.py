#!/usr/bin/env python3
"""One fresh-process parquet read, by phase: imports, making the
filesystem, the read. Both paths import fsspec first, as the fsspec path
must and ``pandas.read_parquet`` does on either path, so the two differ
only in the filesystem they read through.

    bench/py_read_phases.py fsspec|arrow s3|gs one|all

Reads ``STORE://pyread/ds/`` (``bench/py_read_bench.py setup`` and a
``shoal cp -r`` put it there), one column (``c03``) or all of them, and
prints each phase's wall and CPU seconds. Run it under ``/usr/bin/time``
alternating the two paths to get the whole process (exit included), its
system time and page faults (bench/results/PY-READ.md).
"""

from __future__ import annotations

import json
import resource
import sys
import time


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    how, store, cols = sys.argv[1:4]
    t0 = time.perf_counter()
    import fsspec  # noqa: F401  (both paths: see the module)
    import pyarrow.parquet as pq

    if how == "fsspec":
        import shoal.fsspec
    else:
        import shoal.arrow
    t1, c1 = time.perf_counter(), _cpu()
    if how == "fsspec":
        fs, path = shoal.fsspec.ShoalFileSystem(), f"{store}/pyread/ds/"
    else:
        fs, path = shoal.arrow.filesystem(store), "pyread/ds/"
    t2, c2 = time.perf_counter(), _cpu()
    t = pq.read_table(path, filesystem=fs, columns=None if cols == "all" else ["c03"])
    t3, c3 = time.perf_counter(), _cpu()
    phases = {
        "import": (t1 - t0, c1),
        "filesystem": (t2 - t1, c2 - c1),
        "read": (t3 - t2, c3 - c2),
    }
    print(json.dumps({"path": how, "rows": t.num_rows, **{k: [round(x, 3) for x in v] for k, v in phases.items()}}))


if __name__ == "__main__":
    main()
