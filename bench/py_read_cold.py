#!/usr/bin/env python3
"""The ``pq.read_table`` call alone in fresh processes, clients rotated:
its wall and CPU time (user and system), page faults and peak RSS.

    bench/py_read_cold.py ROUNDS STORE ROW CLIENT...   # a table, then raw JSON lines

CLIENTs are bench/py_read_bench.py's (``shoal-arrow``, ``pyarrow-S3``…);
``shoal-arrow+bytes`` (or ``shoal-fsspec+bytes``) reads without
``read_buffer``, so pyarrow gets a new ``bytes`` per read as before reads
landed in reused memory. Round ``i`` starts at the ``i``-th client, so
each client follows each other one equally often: on this machine a
process's system time depends on the one before it (the kernel's clearing
of huge pages for pyarrow's memory pool), and a fixed order gave one
client most of the slow runs. Environment as bench/py_read_bench.py's.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(store: str, row: str, client: str) -> None:
    sys.path.insert(0, HERE)
    import pyarrow.dataset  # noqa: F401  (read_table imports it on its first call)
    import pyarrow.parquet as pq

    import py_read_bench as bench

    name, _, how = client.partition("+")
    if how == "bytes":
        import shoal.arrow
        import shoal.fsspec

        for cls in (shoal.arrow.ShoalInputFile, shoal.fsspec.ShoalFile):
            del cls.read_buffer
    fs, ds, _ = bench._fs(store, name)
    f0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    t = pq.read_table(ds, filesystem=fs, **bench._read_kwargs(row))
    wall = time.perf_counter() - t0
    f1 = resource.getrusage(resource.RUSAGE_SELF)
    user, sys_ = f1.ru_utime - f0.ru_utime, f1.ru_stime - f0.ru_stime
    out = {
        "client": client,
        "wall": wall,
        "cpu": user + sys_,
        "user": user,
        "sys": sys_,
        "faults": f1.ru_minflt - f0.ru_minflt,
        "rss_mib": f1.ru_maxrss / 1024,
        "check": bench._table_check(t),
    }
    print(json.dumps(out))


def main() -> None:
    if sys.argv[1] == "--child":
        child(*sys.argv[2:5])
        return
    rounds, store, row, clients = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    runs: dict[str, list[dict]] = {c: [] for c in clients}
    for i in range(rounds):
        for j in range(len(clients)):
            c = clients[(i + j) % len(clients)]
            got = subprocess.run(
                [sys.executable, __file__, "--child", store, row, c], check=True, capture_output=True, text=True
            )
            runs[c].append(json.loads(got.stdout.strip().splitlines()[-1]))
    checks = {r["check"] for v in runs.values() for r in v}
    if len(checks) != 1:
        sys.exit(f"clients read different data: {checks}")
    print(f"{store} {row}, {rounds} rounds, medians of the read_table call; {checks.pop()}\n")
    print("| client | wall s | CPU s | user s | system s | page faults | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for c, v in runs.items():

        def med(k: str, v: list[dict] = v) -> float:
            return statistics.median(r[k] for r in v)

        print(
            f"| {c} | {med('wall'):.3f} | {med('cpu'):.3f} | {med('user'):.3f} | {med('sys'):.3f} | "
            f"{med('faults'):.0f} | {med('rss_mib'):.0f} |"
        )
    for v in runs.values():
        for r in v:
            print(json.dumps(r))


if __name__ == "__main__":
    main()
