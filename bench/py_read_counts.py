#!/usr/bin/env python3
"""What one ``pq.read_table`` costs through a shoal client, counted: engine
calls (requests), calls of the file objects pyarrow reads through, bytes
copied between the engine and Arrow, calls handed to fsspec's event-loop
thread, files still alive after the read, page faults and peak RSS.

    bench/py_read_counts.py STORE ROW CLIENT [--memory]    # e.g. gs all_cols shoal-fsspec

STORE, ROW and CLIENT as bench/py_read_bench.py's (shoal-fsspec or
shoal-arrow), with its environment; one read in a fresh process, JSON out.
Counting keeps every ``bytes`` the engine returned alive (to tell the very
object from a copy), so page faults and peak RSS are only meaningful with
``--memory``, which counts nothing else.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fsspec.asyn  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import py_read_bench as bench  # noqa: E402
import shoal.arrow  # noqa: E402
import shoal.fsspec  # noqa: E402
from shoal import _exit, _shoal  # noqa: E402

calls: collections.Counter = collections.Counter()
copied = [0]
returned: dict[int, bytes] = {}  # id -> the bytes objects the engine returned


def _engine(name: str) -> None:
    real = getattr(_shoal, name)

    def spy(*args, **kwargs):
        calls["engine." + name.removesuffix("_async")] += 1
        got = real(*args, **kwargs)
        if isinstance(got, bytes):
            returned[id(got)] = got
        return got

    setattr(_shoal, name, spy)


def _file(cls: type, name: str) -> None:
    real = getattr(cls, name)

    def spy(self, *args, **kwargs):
        calls["file." + name] += 1
        got = real(self, *args, **kwargs)
        if name == "read" and got and id(got) not in returned:
            copied[0] += len(got)
        return got

    setattr(cls, name, spy)


def _count() -> None:
    for name in ("cat", "stat", "stat_async", "list_prefix", "list_prefix_async"):
        _engine(name)
    for cls in (shoal.fsspec.ShoalFile, shoal.arrow.ShoalInputFile):
        for name in ("read", "readinto", "seek", "tell", "close"):
            _file(cls, name)
    real_sync = fsspec.asyn.sync

    def sync(loop, func, *args, **kwargs):
        calls["loop." + getattr(func, "__name__", "?")] += 1
        return real_sync(loop, func, *args, **kwargs)

    fsspec.asyn.sync = sync


def main() -> None:
    store, row, client = sys.argv[1:4]
    if "--memory" not in sys.argv:
        _count()
    fs, ds, _ = bench._fs(store, client)
    t = pq.read_table(ds, filesystem=fs, **bench._read_kwargs(row))
    check = bench._table_check(t)
    time.sleep(0.2)  # pyarrow lets go of the files on its own threads
    alive = _exit.live()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out = {
        "client": client,
        "store": store,
        "row": row,
        "check": check,
        "calls": dict(sorted(calls.items())),
        "bytes_copied": copied[0],
        "files_alive_after": alive,
        "page_faults": ru.ru_minflt,
        "peak_rss_mib": ru.ru_maxrss // 1024,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
