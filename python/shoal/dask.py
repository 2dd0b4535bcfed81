"""Scale-out on Dask: one plan, split across workers, each running shoal's
Rust engine on its share; results and failures gathered back.

The listing is made once, on the client (it is fast: parallel, and one
request per thousand keys), and cut into partitions balanced by bytes.
Each partition is one Dask task that copies, reads or sizes its objects
with the same engine as a single-process call, using ``max_workers``
requests in flight *per task*. Sessions travel as their configuration
keywords; every worker process builds its own stores.

- :func:`ls_bag`, :func:`ls_dataframe`: a listing as partitions
  (``url``, ``key``, ``size``, ``updated``).
- :func:`copy`: every object under a URL or glob to a destination prefix.
- :func:`read_bag`: the lines (or whole bytes) of every object, as a bag.
- :func:`du`: sizes and counts, partitioned by top-level prefix.
"""

from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import dask
import dask.bag as db

from . import _api, _shoal
from . import errors as _errors
from ._session import resolve


def _records(objs: Sequence[_shoal.ObjectInfo]) -> list[dict[str, Any]]:
    return [{"url": o.url, "key": o.key, "size": o.size, "updated": o.updated} for o in objs]


def split_by_bytes(items: Sequence[Any], n: int, size=lambda x: x["size"]) -> list[list[Any]]:
    """``items`` cut into at most ``n`` non-empty parts of similar total
    size (greedy, biggest first; each part keeps the listing's order)."""
    n = max(1, min(n, len(items)))
    heap = [(0, i) for i in range(n)]
    parts: list[list[int]] = [[] for _ in range(n)]
    for idx in sorted(range(len(items)), key=lambda i: -size(items[i])):
        total, p = heapq.heappop(heap)
        parts[p].append(idx)
        heapq.heappush(heap, (total + max(size(items[idx]), 1), p))
    return [[items[i] for i in sorted(p)] for p in parts if p]


def _default_partitions(client: Any) -> int:
    if client is not None:
        try:
            return max(1, sum(client.nthreads().values()))
        except Exception:  # noqa: BLE001 - any client without nthreads()
            pass
    return os.cpu_count() or 2


def _key(url: str) -> str:
    return url.split("://", 1)[1].partition("/")[2]


def _as_dir(url: str) -> str:
    """``gs://b/dir`` → ``gs://b/dir/`` (a bucket URL stays as it is)."""
    return url if not _key(url) or url.endswith("/") else url + "/"


def _listing(url: str, s: _shoal.Session) -> list[dict[str, Any]]:
    """Every object a glob names, or the object / everything below a URL."""
    if _api._has_wildcard(url):
        return _records(_shoal.expand(s, url, False, "size"))
    if _key(url) and not url.endswith("/"):
        try:
            return _records([_shoal.stat(s, url)])
        except FileNotFoundError:
            pass
    objs, _ = _shoal.list_prefix(s, _as_dir(url), False, "size")
    return _records(objs)


def ls_bag(url: str, *, npartitions: int | None = None, session: _shoal.Session | None = None, **options: Any) -> db.Bag:
    """Every object below a URL (or matching a glob) as a bag of dicts
    (``url``, ``key``, ``size``, ``updated``), partitions balanced by bytes."""
    s = resolve(session, options)
    recs = _listing(url, s)
    parts = split_by_bytes(recs, npartitions or _default_partitions(None))
    return db.from_sequence(parts, npartitions=max(1, len(parts))).flatten()


def ls_dataframe(url: str, *, npartitions: int | None = None, session: _shoal.Session | None = None, **options: Any):
    """:func:`ls_bag` as a ``dask.dataframe`` (columns ``url``, ``key``,
    ``size``, ``updated``)."""
    import dask.dataframe as dd

    s = resolve(session, options)
    recs = _listing(url, s)
    parts = split_by_bytes(recs, npartitions or _default_partitions(None)) or [[]]
    meta = _frame([])
    frames = [dask.delayed(_frame)(p) for p in parts]
    return dd.from_delayed(frames, meta=meta)


def _frame(recs: list[dict[str, Any]]):
    import pandas as pd

    return pd.DataFrame.from_records(recs, columns=["url", "key", "size", "updated"]).astype({"url": "str", "key": "str", "size": "int64", "updated": "float64"})


@dataclass
class CopyResult:
    """What a distributed copy did."""

    copied: int = 0
    bytes: int = 0
    #: ``(source, destination, message)`` for every failed object.
    failures: list[tuple[str, str, str]] = field(default_factory=list)
    #: Tasks the plan was split into.
    tasks: int = 0


def _copy_part(pairs: list[tuple[str, str]], session: _shoal.Session, max_workers: int | None, chunk_size: int | None) -> tuple[int, int, list[tuple[str, str, str]]]:
    results = _shoal.copy_many(session, pairs, max_workers, chunk_size)
    copied, nbytes, failures = 0, 0, []
    for (src, dst), r in zip(pairs, results):
        if isinstance(r, BaseException):
            failures.append((src, dst, str(r)))
        else:
            copied += 1
            nbytes += r
    return copied, nbytes, failures


def _base(url: str) -> str:
    """The part of a source URL that destinations are relative to."""
    scheme, _, rest = url.partition("://")
    bucket, _, key = rest.partition("/")
    cut = min([key.find(c) for c in "*?[" if c in key], default=-1)
    if cut >= 0:
        key = key[:cut]
    key = key[: key.rfind("/") + 1]
    return f"{scheme}://{bucket}/{key}"


def plan_copy(src: str, dst: str, *, session: _shoal.Session | None = None, **options: Any) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, str]]]:
    """``(source, destination, size)`` for every object below ``src`` (a
    prefix, ``dir/`` or a glob), placed under ``dst`` by its key relative
    to the source's literal prefix (shoal's key → path rules: keys unsafe
    as local paths are returned as ``(source, dst, message)`` refusals)."""
    s = resolve(session, options)
    recs = _listing(src, s)
    single = len(recs) == 1 and recs[0]["url"] == src
    base = _base(src if single or _api._has_wildcard(src) else _as_dir(src))
    plan, refused = [], []
    for r in recs:
        try:
            plan.append((r["url"], _shoal.destination(dst, r["url"][len(base) :], r["url"]), r["size"]))
        except (_errors.InvalidInputError, _errors.UnsupportedError) as e:
            refused.append((r["url"], dst, str(e)))
    return plan, refused


def copy(src: str, dst: str, *, client: Any = None, npartitions: int | None = None, max_workers: int | None = None, chunk_size: int | None = None, session: _shoal.Session | None = None, **options: Any) -> CopyResult:
    """Copies everything below ``src`` to ``dst`` as Dask tasks (on
    ``client``'s cluster, or the current Dask scheduler)."""
    s = resolve(session, options)
    plan, refused = plan_copy(src, dst, session=s)
    parts = split_by_bytes(plan, npartitions or _default_partitions(client), size=lambda p: p[2])
    tasks = [dask.delayed(_copy_part)([(a, b) for a, b, _ in p], s, max_workers, chunk_size) for p in parts]
    outs = client.gather(client.compute(tasks)) if client is not None else dask.compute(*tasks)
    res = CopyResult(tasks=len(tasks), failures=list(refused))
    for copied, nbytes, failures in outs:
        res.copied += copied
        res.bytes += nbytes
        res.failures.extend(failures)
    return res


def _read_part(urls: list[str], session: _shoal.Session, lines: bool) -> list[bytes]:
    if lines:
        return list(_api._lines(_shoal.read(session, urls, True)))
    out, cur = [], []
    for chunk in _shoal.read(session, urls, True):
        if chunk:
            cur.append(chunk)
        else:
            out.append(b"".join(cur))
            cur = []
    return out


def read_bag(url: str, *, lines: bool = True, npartitions: int | None = None, session: _shoal.Session | None = None, **options: Any) -> db.Bag:
    """The lines of every object below a URL or matching a glob (or, with
    ``lines=False``, each object's bytes), partitions balanced by bytes;
    each partition is read by shoal's reader in one task."""
    s = resolve(session, options)
    recs = _listing(url, s)
    parts = split_by_bytes(recs, npartitions or _default_partitions(None))
    return db.from_delayed([dask.delayed(_read_part)([r["url"] for r in p], s, lines) for p in parts])


def _du_part(urls: list[str], session: _shoal.Session, group_by: str | None):
    total_b = total_n = 0
    groups: dict[str, list[int]] = {}
    for u in urls:
        d = _api.du(u, group_by=group_by, session=session)
        total_b += d.bytes
        total_n += d.objects
        for label, (b, n) in d.groups.items():
            g = groups.setdefault(label, [0, 0])
            g[0] += b
            g[1] += n
    return total_b, total_n, groups


def du(url: str, *, group_by: str | None = None, client: Any = None, npartitions: int | None = None, session: _shoal.Session | None = None, **options: Any) -> _api.DiskUsage:
    """:func:`shoal.du` as Dask tasks: one level is listed on the client and
    each task sizes its share of the prefixes found (objects directly at
    that level are sized on the client). Prefix groups are relative to each
    task's prefix, so use ``group_by`` ``suffix``/``age``/``storage-class``
    or None here."""
    s = resolve(session, options)
    url = _as_dir(url)
    objs, prefixes = _shoal.list_prefix(s, url, True, "size")
    k = npartitions or _default_partitions(client)
    parts = [prefixes[i::k] for i in range(k)]
    tasks = [dask.delayed(_du_part)(p, s, group_by) for p in parts if p]
    outs = list(client.gather(client.compute(tasks)) if client is not None else dask.compute(*tasks))
    b = sum(o.size for o in objs)
    n = len(objs)
    groups: dict[str, list[int]] = {}
    if group_by is not None and objs:
        outs.append(_du_part([o.url for o in objs], s, group_by))
        b = n = 0
    for tb, tn, g in outs:
        b += tb
        n += tn
        for label, (gb, gn) in g.items():
            acc = groups.setdefault(label, [0, 0])
            acc[0] += gb
            acc[1] += gn
    return _api.DiskUsage(b, n, {k: (v[0], v[1]) for k, v in groups.items()})
