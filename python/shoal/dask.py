"""Scale-out on Dask: one plan, split across workers, each running shoal's
Rust engine on its share; results and failures gathered back.

Two ways to list. On a distributed cluster, :func:`list_partitions`
splits the listing itself across workers, the way shoal's parallel lister
splits it across connections: each task lists a key range up to
``keys_per_task`` keys and says where it stopped; the client cuts what is
left of a busy range where the keys seen say it is dense (the same cut,
``shoal_list::split::cut``) and hands both halves to new tasks. The keys
stay on the workers as partitions in key order, each kept as columns
(``_shoal.Records``, read as dicts), not as a Python object a key; the
client holds a few strings per task, however big the bucket. Each task
lists its range as ``shoal ls -r --sorted`` does, with the adaptive
parallel lister (``list_connections`` requests at once, by default 24
where a worker thread has two cores or more and 16 elsewhere:
:func:`_task_connections`; two tasks at once a worker thread), stopped
after about ``keys_per_task`` keys (where the workers have cores to spare, two and a half times that,
handed out as partitions of ``keys_per_task``) at a key below which it
listed everything, so one worker lists at about the CLI's rate and the
ranges tile the prefix.
Copies and syncs are cut by bytes too (``bytes_per_task``): by default
the plan's bytes over the cluster's worker threads, at least 16 MiB and at
most 1 GiB a task (``shoal_transfer::task_size``), so a copy a few times
16 MiB already runs on every worker; an object bigger than a task is
copied by several tasks as one multipart upload
(``shoal_transfer::split_copy`` decides and checks; Python only places the
tasks). Otherwise (no distributed
client, or ``npartitions`` asked for), the listing is made once on the
client (parallel, one request per thousand keys) and cut into partitions
balanced by bytes. Each partition is one Dask task that copies, reads or
sizes its objects with the same engine as a single-process call, using
``max_workers`` requests in flight *per task*. Sessions travel as their
configuration keywords; every worker process builds its own stores.

- :func:`list_partitions`: a listing split across the cluster's workers.
- :func:`ls_bag`, :func:`ls_dataframe`: a listing as partitions
  (``url``, ``key``, ``size``, ``updated``).
- :func:`copy`: every object under a URL or glob to a destination prefix.
- :func:`read_bag`: the lines (or whole bytes) of every object, as a bag.
- :func:`du`: sizes and counts.
- :func:`sync`: a bucket prefix made to hold what another holds, range by
  range on the workers, each range by ``shoal sync``'s own engine (its
  comparison rules and guards; Python only places the ranges and
  gathers); extras deleted only once every range ended and nothing
  failed.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import operator
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dask
import dask.bag as db

from . import _api, _shoal
from . import errors as _errors
from ._session import resolve


def _records(objs: Sequence[_shoal.ObjectInfo]) -> list[dict[str, Any]]:
    return [{"url": o.url, "key": o.key, "size": o.size, "updated": o.updated} for o in objs]


def _version_records(objs: Sequence[_shoal.ObjectInfo]) -> list[dict[str, Any]]:
    """Records of a listing of every version: the object's fields and which
    version it is (``version_id`` on S3, ``generation`` on GCS), whether it
    is the live one, and whether it is an S3 delete marker."""
    return [
        {
            "url": o.url,
            "key": o.key,
            "size": o.size,
            "updated": o.updated,
            "version_id": o.version_id,
            "generation": o.generation,
            "is_latest": o.is_latest,
            "delete_marker": o.delete_marker,
        }
        for o in objs
    ]


def _versions_part(session: _shoal.Session, url: str, start: str, stop: str | None) -> list[dict[str, Any]]:
    """Every version of the keys in ``[start, stop)`` below ``url`` (runs
    on a worker)."""
    objs, _ = _shoal.list_versions(session, url, recursive=True, soft_deleted=False, start=start, end=stop)
    return _version_records(objs)


def _versions_bag(url: str, c: Any, keys_per_task: int, s: _shoal.Session) -> db.Bag:
    """Every version below a prefix, listed by the workers: the live
    listing cuts the key space into ranges that tile the prefix (each at
    most ``keys_per_task`` live keys; a key with no live object, only
    noncurrent versions or a delete marker, still lies in one of them), and
    each range's versions are listed by one task."""
    ranges = _list_ranges(url, c, keys_per_task, None, "name", None, s, keep=False)
    return db.from_delayed([dask.delayed(_versions_part)(s, url, r.start, r.stop) for r in ranges])


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
        return _records(_shoal.expand(s, url, recursive=False, detail="size"))
    if _key(url) and not url.endswith("/"):
        try:
            return _records([_shoal.stat(s, url)])
        except FileNotFoundError:
            pass
    objs, _ = _shoal.list_prefix(s, _as_dir(url), delimiter=False, detail="size")
    return _records(objs)


def _some(url: str, recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``recs``, or NotFoundError when the URL named nothing: a copy or read
    of nothing is a mistake to report (as fsspec does), not zero bytes."""
    if not recs:
        raise _errors.new(
            _errors.NotFoundError,
            f"list {url}: matched no objects (nothing to copy or read; check the bucket, prefix or glob)",
            url,
        )
    return recs


def _distributed_client(client: Any) -> Any:
    """``client``, else the distributed client in use, else None."""
    if client is not None:
        return client
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        return None


#: Requests in flight for one listing task when the caller does not say
#: and the task's worker thread has a core to spare (:func:`_task_connections`),
#: whether it runs alone on its thread or beside a second one
#: (:func:`_leave_thread_pool`): half as many again as the CLI's 16 a
#: listing, because a task spends much of its time ramping up (its range
#: is cut as its first pages come back) and draining (the ranges below its
#: budget's cut finish), where 16 leave the network idle. Eight
#: interleaved rounds at 1M keys on one worker thread with 2 cores
#: (2026-12-06, latest section of bench/results/DASK-LISTING.md): 24
#: listed 351,700 keys/s median against 325,900 at 16 (ahead in 7 rounds
#: of 8) and 300,000-334,000 at 32, the workers' CPU the same.
TASK_LIST_CONNECTIONS = 24

#: The same where each worker thread has a core or less
#: (:func:`_task_connections`): there the extra requests cost CPU the
#: listing has not got. 4 workers of one thread on 2 cores, 10M keys:
#: 359,000-386,000 keys/s at 16 against 300,000-343,000 at 24; 2 workers
#: on 2 cores: 308,000-342,000 against 306,000-328,000.
TASK_LIST_CONNECTIONS_BUSY = 16


def _cores() -> int:
    """The cores this process may run on (a ``taskset`` or a cpuset
    narrows them)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: How many partitions' keys a listing task lists where the workers have
#: cores to spare (:func:`_spare_cores`), cut into partitions of about
#: ``keys_per_task`` on the worker (``Records.part``). Every task pays a
#: ramp (its range cut as its first pages come back) and a drain (the
#: ranges below its budget's cut finish), so fewer, bigger tasks list
#: faster where CPU is left over and slower where it is not
#: (bench/results/DASK-LISTING.md, 2026-12-06 night): one worker thread on
#: 2 cores listed 382,596-394,681 keys/s at 250,000 keys a task against
#: 349,914-375,599 at 100,000; 4 workers on the same 2 cores 5% slower.
SPARE_TASK_PARTITIONS = 2.5


def _task_connections(c: Any, spare: bool | None = None) -> int:
    """Listing requests in flight a task when the caller does not say:
    :data:`TASK_LIST_CONNECTIONS` where :func:`_spare_cores` (``spare``,
    when the caller asked already), else :data:`TASK_LIST_CONNECTIONS_BUSY`."""
    if spare is None:
        spare = _spare_cores(c)
    return TASK_LIST_CONNECTIONS if spare else TASK_LIST_CONNECTIONS_BUSY


def _spare_cores(c: Any) -> bool:
    """Whether every host of the cluster has at least two cores a worker
    thread (the workers' own count of cores, asked once a listing, over
    the threads of every worker on the same host): a listing task needs
    about a core to list at the CLI's rate."""
    info = c.scheduler_info(n_workers=-1).get("workers", {})  # every worker, not the first few
    try:
        cores = c.run(_cores)
    except Exception:  # noqa: BLE001 - a worker gone mid-call: take the safe answer
        return False
    hosts: dict[str, tuple[int, int]] = {}
    for addr, w in info.items():
        host = w.get("host") or addr
        n, have = hosts.get(host, (0, 0))
        hosts[host] = (n + int(w.get("nthreads") or 1), max(have, int(cores.get(addr) or 1)))
    return bool(hosts) and all(have >= 2 * n for n, have in hosts.values())


def _leave_thread_pool() -> None:
    """Lets the worker start its next task while this one waits on the
    network (``distributed.secede``; the thread ends with the task).

    A listing task ramps up (its range is cut as the first pages show where
    the keys are) and tails off (the ranges below its cut finish with fewer
    connections busy); run one after another, a worker sat partly idle at
    every seam: one worker listed 10M keys in 58 s where both overlapped
    took 44 s (bench/results/DASK-LISTING.md). The client keeps at most two
    listing tasks a worker thread outstanding, each with
    :data:`TASK_LIST_CONNECTIONS` requests by default."""
    try:
        from distributed import secede

        secede()
    except (ImportError, KeyError, AttributeError, ValueError):
        pass  # not on a distributed worker: run in place


def _list_task(
    session: _shoal.Session,
    url: str,
    start: str,
    end: str | None,
    max_keys: int,
    detail: str,
    keep: bool = True,
    connections: int | None = None,
    cut: tuple[int | None, int] | None = None,
    keys_per_piece: int | None = None,
    per_part: int | None = None,
):
    """One range's share (runs on a worker): its records (a
    ``_shoal.Records``, columns read as dicts; empty unless ``keep``), and
    a summary for the client (count, first and last key, where to go on,
    and with ``cut`` = ``(bytes_per_task, slots)`` where to cut it into
    pieces, each piece's bytes and keys, and its largest object's size:
    ``Records.byte_pieces``; with ``bytes_per_task`` None the pieces are
    fine enough to be joined into tasks of any default size once the
    total is known; last, the key the client's cut takes the keys'
    spacing from: :func:`_split_from`; the page listed past the stop and
    the cut of the rest it suggests: :func:`_cut_rest`; with ``per_part``
    the keys where partitions of about that many keys start after the
    first: :func:`_part_bounds`, and the records then as that list of
    partitions). The range is listed by
    shoal's parallel lister with up to ``connections`` requests at once
    (default :data:`TASK_LIST_CONNECTIONS`), outside the worker's thread
    pool (:func:`_leave_thread_pool`)."""
    _leave_thread_pool()
    recs, nxt, ahead = _shoal.list_range(
        session,
        url,
        start=start,
        end=end,
        max_keys=max_keys,
        detail=detail,
        connections=connections or TASK_LIST_CONNECTIONS,
        records=True,
    )
    first = recs.key(0) if len(recs) else None
    last = recs.key(-1) if len(recs) else None
    # The split's spacing: the last eighth of the task's keys (see _split_from).
    span = recs.key(_split_from(recs.key, len(recs))) if len(recs) else None
    # Where the client may cut the rest: by the page listed past the stop.
    rest_cut = None
    if nxt is not None and ahead is not None:
        prefix = _key(url)
        keys = [k for k in (first, last, *ahead[:2]) if k is not None]
        alphabet = "".join(sorted({c for k in keys for c in k[len(prefix) :]}))
        rest_cut = _cut_rest(ahead, end, max_keys, prefix, alphabet)
    cuts, pieces, largest = (
        recs.byte_pieces(cut[1], bytes_per_piece=cut[0], keys_per_piece=keys_per_piece)
        if cut is not None
        else ([], [], 0)
    )
    bounds = _part_bounds(len(recs), per_part) if per_part else []
    starts = [recs.key(i) for i in bounds]
    summary = (len(recs), first, last, nxt, cuts, pieces, largest, span, ahead, rest_cut, starts)
    if bounds and keep:
        # Cut here, so the task's whole listing is gone before it returns:
        # the worker never holds a key twice once the task is done.
        edges = [0, *bounds, len(recs)]
        return [recs.part(lo, hi) for lo, hi in itertools.pairwise(edges)], summary
    return (recs if keep else []), summary


def _part_bounds(n: int, per_part: int) -> list[int]:
    """Where ``n`` listed keys are cut into partitions of at most about
    ``per_part`` keys, of near-equal length: the index of each partition's
    first key after the first."""
    k = max(1, -(-n // max(1, per_part)))
    return [i * n // k for i in range(1, k)]


#: ``shoal_list::split::PAGES_AHEAD``: a cut given the spacing of the keys
#: from ``page_first`` to ``lo`` lands about this many such spans above ``lo``.
_PAGES_AHEAD = 8


def _split_from(key: Callable[[int], str], n: int) -> int:
    """Which of a listing task's ``n`` keys (``key(i)``, in order) the
    client's cut takes the keys' spacing from: the last ``1 / _PAGES_AHEAD``
    of them, so the cut lands about one task's keys past the task's last
    key and the rest of the range goes to the other half; within that,
    only the keys in the last key's folder (up to its last ``/``), when
    there are at least two: a span across folders (``misc/…`` to
    ``warehouse/…``) says nothing of the spacing of the keys to come.

    Measured (bench/results/DASK-LISTING.md, 2026-11-29 later): given the
    whole task's span, the cut landed eight tasks ahead, past every key of
    a 1M-key bucket, and every split's upper half came back empty while
    the lower half was listed by one task after another."""
    if n <= 1:
        return 0
    lo = n - 1 - (n - 1) // _PAGES_AHEAD
    last = key(n - 1)
    folder = last[: last.rfind("/") + 1]
    if not key(lo).startswith(folder):
        a, b = lo, n - 1  # the first key in the folder: keys are sorted
        while a < b:
            m = (a + b) // 2
            if key(m).startswith(folder):
                b = m
            else:
                a = m + 1
        if a < n - 1:
            lo = a
    return lo


#: How many tasks' keys past the page it listed beyond its stop a task
#: aims the cut of its rest (:func:`_cut_rest`). A task lists 1.2-1.8
#: times its budget (the ranges below its budget's cut finish), so the
#: lower half of one and a half tasks' keys is listed by one task while
#: the upper half's task lists its budget, and the two end about together.
#: Aimed three tasks on, the lower half took a second task, sent while the
#: other half's task ran and so never split, which stopped a few thousand
#: keys short of its end: 334,700 keys/s median against 350,600 at 1.5
#: over 8 interleaved rounds (bench/results/DASK-LISTING.md).
_AHEAD_TASKS = 1.5


def _cut_rest(
    ahead: tuple[str | None, str | None, int, bool], end: str | None, keys_per_task: int, prefix: str, alphabet: str
) -> str | None:
    """Where the client may cut what is left of a listing task's range
    (``[its stop, end)``) in two: by the page the task listed past its stop
    (``ahead``: first and last key, how many, whether more follow), aimed
    :data:`_AHEAD_TASKS` tasks' keys on. The keys to come are spaced as that
    page's, not as the task's own last keys, which may lie in a folder that
    ends right there: a split of shoal-benchserver's ``list-1000000`` after
    ``misc/日本語/`` put every key of ``warehouse/`` in one half. Keys are
    read in the base of the alphabet seen, where characters a position
    never uses (letters among a counter's digits) take room too, so a cut
    aimed one task on lands short of it on most layouts; keys numbered by
    a decimal counter (``part-00016162-cf335071``) are advanced in decimal
    instead (``shoal_list::split::counter_ahead``): read in the alphabet's
    base, a cut aimed three tasks on landed a fifth of a task on, and the
    upper half's task listed alone for most of its budget. A page with no
    more after it leaves nothing worth a cut."""
    first, tail, n, more = ahead
    if not more or first is None or tail is None or first >= tail:
        return None
    pages = max(1, int(_AHEAD_TASKS * keys_per_task) // n)
    return _shoal.cut_range(tail, end, prefix=prefix, alphabet=alphabet, page_first=first, pages=pages, counter=True)


@dataclass
class ListingStats:
    """What :func:`list_partitions` did (for tests and benchmarks)."""

    tasks: int = 0
    splits: int = 0
    objects: int = 0


def list_partitions(
    url: str,
    *,
    client: Any = None,
    keys_per_task: int = 100_000,
    max_tasks: int | None = None,
    detail: str = "size",
    stats: ListingStats | None = None,
    list_connections: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> list[Any]:
    """Every object whose key starts with ``url``'s key (a prefix, taken
    literally: ``gs://b/logs/`` or ``gs://b/logs/2026-``), listed by tasks
    on ``client``'s cluster (or the distributed client in use), as futures
    of sequences of dicts (``url``, ``key``, ``size``, ``updated``) in key
    order. Each is a ``shoal._shoal.Records``: the listing kept as columns
    (about 30 bytes a key beside the key), each dict made when it is read;
    ``list(part)`` makes them all. No process holds the whole listing: each task lists a range up
    to ``keys_per_task`` keys and keeps them; a range with more left is cut
    in two for other tasks while fewer than ``max_tasks`` (default: twice
    the cluster's threads) are running. Inside a task the range is listed
    as ``shoal ls -r --sorted`` lists, by the adaptive parallel lister,
    with up to ``list_connections`` requests in flight (default
    :func:`_task_connections`: 24 where each worker thread has two cores or
    more, else 16); a listing task leaves the worker's
    thread pool while it waits on the network, so a worker thread lists two
    ranges at once and one's ramp-up overlaps the other's tail. Each task
    pays a ramp and a drain, so where the workers have cores to spare a
    task lists :data:`SPARE_TASK_PARTITIONS` partitions' keys and hands
    them out as partitions of about ``keys_per_task`` (one worker thread on
    2 cores: 3-9% faster by median over three A/Bs, and 0.84x of ``shoal
    ls -r`` or more in all 14 rounds; where they have none, 4 workers on 2
    cores, bigger tasks were 5% slower and a task lists one partition;
    bench/results/DASK-LISTING.md). A failed task raises with the URL when
    its future is gathered."""
    if _api._has_wildcard(url):
        raise ValueError(f"{url}: list_partitions takes a prefix; use ls_bag for globs")
    c = _distributed_client(client)
    if c is None:
        raise ValueError("list_partitions needs a dask.distributed Client (or use ls_bag)")
    s = resolve(session, options)
    return [
        r.data
        for r in _list_ranges(
            url, c, keys_per_task, max_tasks, detail, stats, s, connections=list_connections, as_partitions=True
        )
    ]


@dataclass
class _Range:
    """One listed range: ``[start, stop)`` (stop None: the prefix's end),
    its records' future, and, when cut by bytes, the keys where its fine
    pieces start, each piece's ``(bytes, keys)`` and its largest object's
    size."""

    start: str
    stop: str | None
    data: Any
    cuts: list[str] = field(default_factory=list)
    sizes: list[tuple[int, int]] = field(default_factory=list)
    largest: int = 0

    def bytes(self) -> int:
        return sum(b for b, _ in self.sizes)

    def pieces(self, max_bytes: int, max_keys: int) -> list[tuple[str, str | None]]:
        """``[lo, hi)`` of each task: neighbouring pieces joined while a
        task holds at most ``max_bytes`` and ``max_keys`` (the engine's
        ``task_size::join``). They tile the range, an empty one too."""
        bounds = [self.start, *self.cuts, self.stop]
        if self.sizes:
            starts = _shoal.join_pieces(self.sizes, max_bytes=max_bytes, max_keys=max_keys)
            bounds = [bounds[i] for i in starts] + [self.stop]
        return list(itertools.pairwise(bounds))


class _Spread:
    """Where the pieces of one listed partition are copied: the first on
    the worker holding the partition, the next ones on the next workers
    in turn (a hint, ``allow_other_workers``). Dask places a task where its
    inputs are, so every piece of a partition (4 x 32 MiB listed as one)
    queued on that one worker while the others sat idle; a partition's
    columns are a few MiB at most, little to move beside the bytes its
    pieces copy."""

    def __init__(self, c: Any, futures: list[Any]) -> None:
        self.workers = sorted(c.scheduler_info(n_workers=-1)["workers"]) if futures else []
        self.home = c.who_has(futures) if futures else {}

    def hint(self, data: Any, j: int) -> dict[str, Any]:
        held = self.home.get(data.key) or ()
        if not self.workers or not held or held[0] not in self.workers:
            return {}
        w = self.workers[(self.workers.index(held[0]) + j) % len(self.workers)]
        return {"workers": [w], "allow_other_workers": True}


def _slots(c: Any) -> int:
    """Task slots: the distributed cluster's worker threads, else the
    local scheduler's (one a CPU)."""
    if c is not None:
        return max(1, sum(c.nthreads().values()))
    return os.cpu_count() or 1


def _task_bytes(bytes_per_task: int | None, total: int, slots: int) -> int:
    """The caller's ``bytes_per_task``, else the engine's default for a
    plan of ``total`` bytes on ``slots`` task slots."""
    return bytes_per_task if bytes_per_task else _shoal.task_bytes(total, slots=slots)


def _token() -> str:
    """A task key's tail: Dask's dashboard and ``distributed.progress``
    group tasks by the words before it (``shoal-copy``, ``shoal-list``)."""
    import uuid

    return "0" + uuid.uuid4().hex[:15]


def _list_ranges(
    url: str,
    c: Any,
    keys_per_task: int,
    max_tasks: int | None,
    detail: str,
    stats: ListingStats | None,
    s: _shoal.Session,
    keep: bool = True,
    connections: int | None = None,
    cut: tuple[int | None, int] | None = None,
    keys_per_piece: int | None = None,
    as_partitions: bool = False,
) -> list[_Range]:
    """:func:`list_partitions`' work: ``(start, stop, future)`` for each
    listed range, in key order; the ranges tile the prefix (``stop`` None:
    to its end), so another listing cut at the same keys (a sync's
    destination) meets each key in exactly one of them. Without ``keep``
    the futures hold empty lists: only the ranges are wanted. With ``cut``
    each range also says where it may be cut (see :func:`_list_task`).
    With ``as_partitions`` (a listing kept as partitions, nothing cut by bytes)
    and cores to spare on the workers, each task lists
    :data:`SPARE_TASK_PARTITIONS` partitions' keys and hands out
    partitions of about ``keys_per_task`` (``Records.part``, on the
    worker holding them; not below a page's 1,000 keys, where a task
    lists a page or more whatever its budget)."""
    from distributed import as_completed

    prefix = _key(url)
    limit = max_tasks or max(2, 2 * sum(c.nthreads().values()))
    spare = _spare_cores(c) if (connections is None or as_partitions) else False
    connections = connections or _task_connections(c, spare)
    per_part = keys_per_task if as_partitions and keep and cut is None and spare and keys_per_task >= 1000 else None
    budget = int(keys_per_task * SPARE_TASK_PARTITIONS) if per_part else keys_per_task
    st = stats if stats is not None else ListingStats()
    alphabet: set[str] = set()
    running: dict[Any, tuple[int, str, str | None, Any]] = {}
    parts: list[_Range] = []
    done = as_completed()
    tok = _token()

    def submit(start: str, end: str | None) -> None:
        i = st.tasks
        t = c.submit(
            _list_task,
            s,
            url,
            start,
            end,
            budget,
            detail,
            keep,
            connections,
            cut,
            keys_per_piece,
            per_part,
            key=f"shoal-list-{i}-{tok}",
        )
        summary = c.submit(operator.itemgetter(1), t, key=f"shoal-list-summary-{i}-{tok}")
        running[summary] = (i, start, end, c.submit(operator.itemgetter(0), t, key=f"shoal-listed-{i}-{tok}"))
        done.add(summary)
        st.tasks += 1

    submit(prefix, None)
    for summary in done:
        i, start, end, data = running.pop(summary)
        n, first, last, nxt, cuts, sizes, largest, span, ahead, rest_cut, starts = summary.result()
        summary.release()
        if nxt is not None and ahead is not None and ahead[2] == 0 and not ahead[3]:
            nxt = None  # nothing lies past the stop: the range is done
        stop = nxt if nxt is not None else end
        if starts:
            # One task's keys as several partitions: [start, k1), [k1, k2) … [kn, stop).
            bounds = [start, *starts, stop]
            for j, (lo, hi) in enumerate(itertools.pairwise(bounds)):
                piece = c.submit(operator.getitem, data, j, key=f"shoal-part-{i}-{j}-{tok}")
                parts.append(_Range(lo, hi, piece))
            data.release()
        else:
            parts.append(_Range(start, stop, data, cuts, sizes, largest))
        st.objects += n
        for k in (first, last, *(ahead[:2] if ahead else ())):
            if k is not None:
                alphabet.update(k[len(prefix) :])
        if nxt is None:
            continue
        mid = None
        if len(running) + 2 <= limit:
            mid = (
                rest_cut
                if ahead is not None
                else _shoal.cut_range(last, end, prefix=prefix, alphabet="".join(sorted(alphabet)), page_first=span)
            )
        if mid is not None and mid > nxt and (end is None or mid < end):
            st.splits += 1
            submit(nxt, mid)
            submit(mid, end)
        else:
            submit(nxt, end)
    parts.sort(key=lambda p: p.start)
    return parts


def _on_cluster(
    url: str,
    npartitions: int | None,
    client: Any,
    keys_per_task: int,
    s: _shoal.Session,
    stats: ListingStats | None = None,
    bytes_per_task: int | None = None,
    list_connections: int | None = None,
    cut: bool = False,
) -> tuple[Any, list[_Range]]:
    """The cluster and its listed ranges when ``url`` is a prefix to list
    there; ``(None, [])`` when the client lists instead: a glob, an
    explicit ``npartitions``, no distributed client, a URL naming one
    object, or a prefix holding nothing (the client's path then reports
    "matched no objects")."""
    c = _use_cluster(url, npartitions, client)
    if c is None:
        return None, []
    if _key(url) and not url.endswith("/"):
        try:
            _shoal.stat(s, url)
            return None, []
        except FileNotFoundError:
            pass
    st = stats if stats is not None else ListingStats()
    ranges = _list_ranges(
        _as_dir(url),
        c,
        keys_per_task,
        None,
        "size",
        st,
        s,
        connections=list_connections,
        cut=(bytes_per_task, _slots(c)) if cut else None,
        keys_per_piece=keys_per_task,
    )
    if st.objects == 0:
        return None, []
    return c, ranges


def _same(x: Any) -> Any:
    return x


def _use_cluster(url: str, npartitions: int | None, client: Any) -> Any:
    """The client to list on, when the listing should be split across it."""
    if npartitions is not None or _api._has_wildcard(url):
        return None
    return _distributed_client(client)


def ls_bag(
    url: str,
    *,
    npartitions: int | None = None,
    client: Any = None,
    keys_per_task: int = 100_000,
    versions: bool = False,
    session: _shoal.Session | None = None,
    **options: Any,
) -> db.Bag:
    """Every object below a URL (or matching a glob) as a bag of dicts
    (``url``, ``key``, ``size``, ``updated``). On a distributed cluster a
    prefix is listed by the workers (:func:`list_partitions`), partitions
    in key order; a glob, or an explicit ``npartitions``, is listed on the
    client and split by bytes.

    ``versions=True`` lists every stored version (``shoal ls -a -r``,
    ``shoal.ls(versions=True)``): noncurrent ones and S3 delete markers
    too, each dict with ``version_id`` (S3) or ``generation`` (GCS),
    ``is_latest`` and ``delete_marker``; on a cluster by key ranges, one
    task each."""
    c = _use_cluster(url, npartitions, client)
    if versions:
        return _ls_versions(url, c, npartitions, keys_per_task, resolve(session, options))
    if c is not None:
        parts = list_partitions(_as_dir(url), client=c, keys_per_task=keys_per_task, session=session, **options)
        # Each future inside a task of the bag's graph: the graph holds it,
        # so the partition lives as long as the bag (a bag made from bare
        # futures names only their keys, and they were released under it).
        return db.from_delayed([dask.delayed(_same)(p) for p in parts])
    s = resolve(session, options)
    recs = _listing(url, s)
    parts = split_by_bytes(recs, npartitions or _default_partitions(None))
    return db.from_sequence(parts, npartitions=max(1, len(parts))).flatten()


def _ls_versions(url: str, c: Any, npartitions: int | None, keys_per_task: int, s: _shoal.Session) -> db.Bag:
    if c is not None and not _api._has_wildcard(url):
        return _versions_bag(_as_dir(url), c, keys_per_task, s)
    objs, _ = _shoal.list_versions(s, url, recursive=True, soft_deleted=False)
    parts = split_by_bytes(_version_records(objs), npartitions or _default_partitions(None))
    return db.from_sequence(parts, npartitions=max(1, len(parts))).flatten()


def inventory_bag(manifest: str, *, prefix: str = "", session: _shoal.Session | None = None, **options: Any) -> db.Bag:
    """The objects an inventory report lists (an S3 Inventory or GCS
    Storage Insights ``manifest.json``, CSV or Parquet: see
    docs/inventory.md) as a bag of dicts (``url``, ``key``, ``size``,
    ``updated``), one partition per data file, read by the task: a bucket
    of billions of keys planned without listing it. ``manifest`` is a
    local path (the data files beside it) or the manifest's URL in the
    bucket the store writes reports to (each task then copies its own
    data file into a temporary folder, reads it and removes it). The
    report is checked whole here first (every file's size and MD5, the
    record count), and a report that does not match its manifest raises
    ``InvalidInputError`` (a ``ValueError``) before any task runs.
    ``prefix`` keeps the keys that start with it. Partitions are not in
    key order (the stores do not promise any).

    Each task reads the report that was checked here: it is handed its
    file's size and MD5 as checked (and, in a bucket, the generation or
    ETag read), not the manifest; it reads the file pinned to that
    version and checks both again. A report replaced between this call
    and ``compute()`` makes the task raise ``InvalidInputError`` naming
    the manifest, never yield another report's rows."""
    s = resolve(session, options)
    bucket_url, _made_at, parts = _shoal.inventory_open(manifest, prefix=prefix, session=s)
    return db.from_delayed(
        [dask.delayed(_shoal.inventory_rows)(p, bucket_url, prefix=prefix, session=s) for p in parts]
    )


def ls_dataframe(
    url: str,
    *,
    npartitions: int | None = None,
    client: Any = None,
    keys_per_task: int = 100_000,
    versions: bool = False,
    session: _shoal.Session | None = None,
    **options: Any,
):
    """:func:`ls_bag` as a ``dask.dataframe`` (columns ``url``, ``key``,
    ``size``, ``updated``; with ``versions=True`` also ``version_id``,
    ``generation``, ``is_latest`` and ``delete_marker``)."""
    import dask.dataframe as dd

    if versions:
        bag = ls_bag(
            url,
            npartitions=npartitions,
            client=client,
            keys_per_task=keys_per_task,
            versions=True,
            session=session,
            **options,
        )
        return dd.from_delayed([dask.delayed(_version_frame)(p) for p in bag.to_delayed()], meta=_version_frame([]))
    meta = _frame([])
    c = _use_cluster(url, npartitions, client)
    if c is not None:
        parts = list_partitions(_as_dir(url), client=c, keys_per_task=keys_per_task, session=session, **options)
        return dd.from_delayed([dask.delayed(_frame)(p) for p in parts], meta=meta)
    s = resolve(session, options)
    recs = _listing(url, s)
    parts = split_by_bytes(recs, npartitions or _default_partitions(None)) or [[]]
    frames = [dask.delayed(_frame)(p) for p in parts]
    return dd.from_delayed(frames, meta=meta)


def _frame(recs: Sequence[dict[str, Any]]):
    import pandas as pd

    if isinstance(recs, _shoal.Records):
        # Straight from the columns, no dict a row.
        cols = {"url": recs.urls(), "key": recs.keys(), "size": recs.sizes(), "updated": recs.updated()}
        return pd.DataFrame(cols).astype({"url": "str", "key": "str", "size": "int64", "updated": "float64"})
    return pd.DataFrame.from_records(recs, columns=["url", "key", "size", "updated"]).astype(
        {"url": "str", "key": "str", "size": "int64", "updated": "float64"}
    )


def _version_frame(recs: Sequence[dict[str, Any]]):
    import pandas as pd

    cols = ["url", "key", "size", "updated", "version_id", "generation", "is_latest", "delete_marker"]
    types = {
        "url": "str",
        "key": "str",
        "size": "int64",
        "updated": "float64",
        "version_id": "object",
        "generation": "Int64",
        "is_latest": "boolean",
        "delete_marker": "bool",
    }
    return pd.DataFrame.from_records(list(recs), columns=cols).astype(types)


@dataclass
class CopyResult:
    """What a distributed copy did."""

    copied: int = 0
    bytes: int = 0
    #: ``(source, destination, message)`` for every failed object.
    failures: list[tuple[str, str, str]] = field(default_factory=list)
    #: Tasks the plan was split into.
    tasks: int = 0
    #: Objects copied by several tasks (one multipart upload each).
    split_objects: int = 0
    #: The most bytes a task was given (the caller's, or the default
    #: chosen for the plan and the cluster).
    bytes_per_task: int = 0


def _copy_part(
    pairs: list[tuple[str, str]], session: _shoal.Session, max_workers: int | None, chunk_size: int | None
) -> tuple[int, int, list[tuple[str, str, str]]]:
    results = _shoal.copy_many(session, pairs, workers=max_workers, chunk_size=chunk_size)
    copied, nbytes, failures = 0, 0, []
    for (src, dst), r in zip(pairs, results, strict=True):
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


def plan_copy(
    src: str, dst: str, *, session: _shoal.Session | None = None, **options: Any
) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, str]]]:
    """``(source, destination, size)`` for every object below ``src`` (a
    prefix, ``dir/`` or a glob), placed under ``dst`` by its key relative
    to the source's literal prefix (shoal's key → path rules: keys unsafe
    as local paths are returned as ``(source, dst, message)`` refusals).
    A source that names nothing raises ``NotFoundError`` (a
    ``FileNotFoundError``)."""
    s = resolve(session, options)
    recs = _some(src, _listing(src, s))
    single = len(recs) == 1 and recs[0]["url"] == src
    base = _base(src if single or _api._has_wildcard(src) else _as_dir(src))
    plan, refused = [], []
    for r in recs:
        try:
            to = _shoal.place(dst, rel=r["url"][len(base) :], src_url=r["url"])
            if to is not None:  # None: a folder marker, skipped as cp -r skips it
                plan.append((r["url"], to, r["size"]))
        except _errors.InvalidInputError as e:
            refused.append((r["url"], dst, str(e)))
    return plan, refused


def _too_big(recs: _shoal.Records, budget: int) -> list[tuple[str, int]]:
    """A listed partition's objects bigger than one task (runs on the
    worker holding it): ``(url, size)``, to be split by byte range."""
    return recs.byte_cuts(budget)[1]


def _copy_listed(
    recs: _shoal.Records,
    base: str,
    dst: str,
    session: _shoal.Session,
    max_workers: int | None,
    chunk_size: int | None,
    lo: str | None = None,
    hi: str | None = None,
    skip_above: int | None = None,
) -> tuple[int, int, list[tuple[str, str, str]]]:
    """One listed partition (or its piece ``[lo, hi)``) copied (runs on a
    worker): destinations are placed here, by the same rules as
    :func:`plan_copy`. Objects bigger than ``skip_above`` are left to a
    split copy (:func:`_split_copies`)."""
    pairs, refused = [], []
    for u in recs.urls_between(lo, hi, max_size=skip_above):
        try:
            to = _shoal.place(dst, rel=u[len(base) :], src_url=u)
            if to is not None:  # a folder marker: skipped
                pairs.append((u, to))
        except _errors.InvalidInputError as e:
            refused.append((u, dst, str(e)))
    copied, nbytes, failures = _copy_part(pairs, session, max_workers, chunk_size) if pairs else (0, 0, [])
    return copied, nbytes, refused + failures


@dataclass
class TaskReport:
    """What one finished task of :func:`copy` or :func:`sync` did, handed
    to ``on_task`` as it ends."""

    #: The task's Dask key (``shoal-copy-…``, ``shoal-copy-part-…``,
    #: ``shoal-sync-…``): the name the dashboard shows.
    name: str
    copied: int
    bytes: int
    failed: int
    tasks_done: int
    tasks: int


def _run_tasks(c: Any, futs: list[Any], progress: bool, on_task: Any, counts: Any) -> list[Any]:
    """The results of ``futs`` (in order), showing ``distributed.progress``
    when asked and calling ``on_task`` as each ends. A failed task raises
    (after the others were cancelled)."""
    from distributed import as_completed

    if progress:
        from distributed import progress as _progress

        _progress(futs)
    if on_task is None:
        return c.gather(futs)
    index = {f.key: i for i, f in enumerate(futs)}
    out: list[Any] = [None] * len(futs)
    try:
        for n, f in enumerate(as_completed(futs), 1):
            out[index[f.key]] = res = f.result()
            copied, nbytes, failed = counts(res)
            on_task(TaskReport(str(f.key), copied, nbytes, failed, n, len(futs)))
    except BaseException:
        c.cancel(futs)
        raise
    return out


def _split_copies(
    c: Any,
    big: list[tuple[str, str]],
    s: _shoal.Session,
    bytes_per_task: int,
    part_size: int | None,
    max_workers: int | None,
    progress: bool,
    on_task: Any,
    res: CopyResult,
) -> list[tuple[str, str]]:
    """Copies each ``(source, destination)`` bigger than one task's bytes
    as one multipart upload whose parts are written by several tasks
    (``shoal_transfer::split_copy``: the engine plans the parts, checks
    each, and completes only with every part in and the source's CRC32C
    matched). Uploads are begun and finished here, on the client (a GCS
    compose then keeps the source's metadata); every way out before an
    upload completed (a failed or lost part task, an exception or an
    interrupt here) aborts it, deleting its parts. Returns the pairs the
    engine chose to copy whole (no CRC32C to check parts against)."""
    from distributed import wait as distributed_wait

    whole: list[tuple[str, str]] = []
    started: list[tuple[str, str, Any, list[Any]]] = []
    kw = {} if part_size is None else {"part_size": part_size}
    # The engine's workers keyword bound here: Client.submit keeps a
    # `workers` keyword of its own (where the task may run).
    parts = functools.partial(_shoal.split_copy_parts, workers=max_workers or 4)
    try:
        for src, dst in big:
            wire, _why = _shoal.split_copy_begin(s, src, dst, bytes_per_task=bytes_per_task, **kw)
            if wire is None:
                whole.append((src, dst))
                continue
            started.append((src, dst, wire, []))
            tok = _token()
            started[-1][3].extend(
                c.submit(parts, s, wire, dst, i, key=f"shoal-copy-part-{i}-{tok}") for i in range(len(wire[7]))
            )
        futs = [f for *_, fs in started for f in fs]
        if progress and futs:
            from distributed import progress as _progress

            _progress(futs)
        done = 0
        while started:
            src, dst, wire, fs = started[0]
            try:
                outs = []
                for f in fs:
                    outs.append(f.result())
                    done += 1
                    if on_task is not None:
                        on_task(TaskReport(str(f.key), 0, sum(p[3] for p in outs[-1]), 0, done, len(futs)))
                nbytes = _shoal.split_copy_finish(s, wire, dst=dst, parts=[p for ps in outs for p in ps])
                res.copied += 1
                res.bytes += nbytes
                res.split_objects += 1
            except Exception as e:  # noqa: BLE001 - every failure is this object's
                # A part task already running cannot be stopped: aborting
                # while one still writes would leave its part behind (a
                # GCS part object written after the abort deleted the
                # others). Every part task ends first, then the abort.
                distributed_wait(fs)
                _shoal.split_copy_abort(s, wire, dst=dst)
                res.failures.append(
                    (
                        src,
                        dst,
                        f"copy {src} -> {dst} split across {len(fs)} tasks: {e}; the upload was aborted and its parts "
                        "deleted",
                    )
                )
            res.tasks += len(fs)
            started.pop(0)
    finally:
        # An interrupt or an unexpected error: nothing half written stays.
        for _, dst, wire, fs in started:
            c.cancel(fs)
            _shoal.split_copy_abort(s, wire, dst=dst)
    return whole


def _pieces(
    plan: list[tuple[str, str, int]], bytes_per_task: int, keys_per_task: int
) -> list[list[tuple[str, str, int]]]:
    """A planned copy cut, in its order, into pieces of at most
    ``bytes_per_task`` bytes and ``keys_per_task`` objects."""
    out: list[list[tuple[str, str, int]]] = []
    used = 0
    for p in plan:
        if not out or used + p[2] > bytes_per_task or len(out[-1]) >= keys_per_task:
            out.append([])
            used = 0
        out[-1].append(p)
        used += p[2]
    return out


def copy(
    src: str,
    dst: str,
    *,
    client: Any = None,
    npartitions: int | None = None,
    max_workers: int | None = None,
    chunk_size: int | None = None,
    keys_per_task: int = 100_000,
    bytes_per_task: int | None = None,
    part_size: int | None = None,
    list_connections: int | None = None,
    progress: bool = False,
    on_task: Any = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> CopyResult:
    """Copies everything below ``src`` to ``dst`` as Dask tasks (on
    ``client``'s cluster, or the current Dask scheduler). On a distributed
    cluster a prefix is listed by the workers (:func:`list_partitions`) and
    each listed partition is copied where it was listed: the client holds
    no listing, only each task's counts and failures.

    Each copy task holds at most ``bytes_per_task`` bytes and
    ``keys_per_task`` objects. By default ``bytes_per_task`` follows the
    plan and the cluster: the bytes to copy over the worker threads, at
    least 16 MiB (below that a task's fixed cost dominates) and at most
    1 GiB, so 4 x 32 MiB on two workers is two tasks of 64 MiB
    (``shoal_transfer::task_size``; ``CopyResult.bytes_per_task`` says
    what was chosen). On a distributed cluster an object
    bigger than ``bytes_per_task`` is copied by several tasks: one
    multipart upload on the destination, its parts (``part_size``, default
    64 MiB, or one task's bytes when that is less) read by ranged GETs and
    written by different tasks, completed
    only when every part is in and their CRC32Cs combine into the
    source's; on any failure the upload is aborted and its parts deleted
    (objects without a stored CRC32C are copied whole). Tasks are named
    ``shoal-copy-…`` / ``shoal-copy-part-…`` in the dashboard; with
    ``progress=True`` a ``distributed.progress`` bar follows them, and
    ``on_task`` is called with a :class:`TaskReport` as each one ends.

    A copy that could write what it reads (``dst`` inside ``src``, or
    ``src`` inside ``dst``, or a glob that can match keys below ``dst``)
    is refused before anything is listed, as ``shoal cp -r`` refuses it
    (``InvalidInputError``, a ``ValueError``)."""
    _shoal.check_copy(src, dst)
    s = resolve(session, options)
    c, ranges = _on_cluster(
        src,
        npartitions,
        client,
        keys_per_task,
        s,
        bytes_per_task=bytes_per_task,
        list_connections=list_connections,
        cut=True,
    )
    if c is not None:
        budget = _task_bytes(bytes_per_task, sum(r.bytes() for r in ranges), _slots(c))
        base = _base(_as_dir(src))
        tok = _token()
        futs, bigs = [], []
        spread = _Spread(c, [r.data for r in ranges])
        for r in ranges:
            for j, (lo, hi) in enumerate(r.pieces(budget, keys_per_task)):
                futs.append(
                    c.submit(
                        _copy_listed,
                        r.data,
                        base,
                        dst,
                        s,
                        max_workers,
                        chunk_size,
                        lo,
                        hi,
                        budget,
                        key=f"shoal-copy-{len(futs)}-{tok}",
                        **spread.hint(r.data, j),
                    )
                )
            if r.largest > budget:
                bigs.append(c.submit(_too_big, r.data, budget, key=f"shoal-copy-big-{len(bigs)}-{tok}"))
        res = CopyResult(tasks=len(futs), bytes_per_task=budget)
        for copied, nbytes, failures in _run_tasks(c, futs, progress, on_task, lambda o: (o[0], o[1], len(o[2]))):
            res.copied += copied
            res.bytes += nbytes
            res.failures.extend(failures)
        pairs = []
        for u, _ in (b for found in c.gather(bigs) for b in found):
            try:
                to = _shoal.place(dst, rel=u[len(base) :], src_url=u)
                if to is not None:  # a folder marker: skipped
                    pairs.append((u, to))
            except _errors.InvalidInputError as e:
                res.failures.append((u, dst, str(e)))
        whole = _split_copies(c, pairs, s, budget, part_size, max_workers, progress, on_task, res)
        if whole:
            f = c.submit(_copy_part, whole, s, max_workers, chunk_size, key=f"shoal-copy-whole-{tok}")
            copied, nbytes, failures = f.result()
            res.tasks += 1
            res.copied += copied
            res.bytes += nbytes
            res.failures.extend(failures)
        return res
    plan, refused = plan_copy(src, dst, session=s)
    dc = _distributed_client(client)
    budget = _task_bytes(bytes_per_task, sum(p[2] for p in plan), _slots(dc))
    res = CopyResult(failures=list(refused), bytes_per_task=budget)
    if dc is not None and npartitions is None and any(p[2] > budget for p in plan):
        big = [(a, b) for a, b, n in plan if n > budget]
        plan = [p for p in plan if p[2] <= budget]
        whole = _split_copies(dc, big, s, budget, part_size, max_workers, progress, on_task, res)
        plan.extend((a, b, budget) for a, b in whole)
    if npartitions is not None:
        parts = split_by_bytes(plan, npartitions, size=lambda p: p[2])
    else:
        parts = _pieces(plan, budget, keys_per_task)
    tok = _token()
    tasks = [
        dask.delayed(_copy_part)(
            [(a, b) for a, b, _ in p], s, max_workers, chunk_size, dask_key_name=f"shoal-copy-{i}-{tok}"
        )
        for i, p in enumerate(parts)
    ]
    outs = client.gather(client.compute(tasks)) if client is not None else dask.compute(*tasks)
    res.tasks += len(tasks)
    for copied, nbytes, failures in outs:
        res.copied += copied
        res.bytes += nbytes
        res.failures.extend(failures)
    return res


def _read_part(urls: list[str], session: _shoal.Session, lines: bool) -> list[bytes]:
    if lines:
        return list(_api._lines(_shoal.read(session, urls, boundaries=True)))
    out, cur = [], []
    for chunk in _shoal.read(session, urls, boundaries=True):
        if chunk:
            cur.append(chunk)
        else:
            out.append(b"".join(cur))
            cur = []
    return out


def read_bag(
    url: str,
    *,
    lines: bool = True,
    npartitions: int | None = None,
    keys_per_task: int = 100_000,
    session: _shoal.Session | None = None,
    **options: Any,
) -> db.Bag:
    """The lines of every object below a URL or matching a glob (or, with
    ``lines=False``, each object's bytes); each partition is read by
    shoal's reader in one task. On a distributed cluster a prefix is
    listed by the workers and read partition by partition in key order;
    otherwise the listing is made here and split by bytes. A URL that
    names nothing raises ``NotFoundError`` (a ``FileNotFoundError``)."""
    s = resolve(session, options)
    c, ranges = _on_cluster(url, npartitions, None, keys_per_task, s)
    if c is not None:
        # Each partition read where it was listed; the futures live in the
        # bag's graph (see ls_bag).
        return db.from_delayed([dask.delayed(_read_listed)(r.data, s, lines) for r in ranges])
    recs = _some(url, _listing(url, s))
    parts = split_by_bytes(recs, npartitions or _default_partitions(None))
    return db.from_delayed([dask.delayed(_read_part)([r["url"] for r in p], s, lines) for p in parts])


def _read_listed(recs: _shoal.Records, session: _shoal.Session, lines: bool) -> list[bytes]:
    return _read_part(recs.urls(), session, lines) if len(recs) else []


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


def _size_listed(recs: _shoal.Records) -> tuple[int, int]:
    return recs.total_size(), len(recs)


def du(
    url: str,
    *,
    group_by: str | None = None,
    client: Any = None,
    npartitions: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> _api.DiskUsage:
    """:func:`shoal.du` as Dask tasks. Without ``group_by``, on a
    distributed cluster, the workers list the prefix (:func:`list_partitions`)
    and each sums its partitions. Otherwise one level is listed on the
    client and each task sizes its share of the prefixes found (objects
    directly at that level are sized on the client); prefix groups are
    relative to each task's prefix, so use ``group_by``
    ``suffix``/``age``/``storage-class`` or None here."""
    s = resolve(session, options)
    if group_by is None:
        c, ranges = _on_cluster(url, npartitions, client, 100_000, s)
        if c is not None:
            sizes = c.gather([c.submit(_size_listed, r.data, pure=False) for r in ranges])
            return _api.DiskUsage(sum(b for b, _ in sizes), sum(n for _, n in sizes), {})
    url = _as_dir(url)
    objs, prefixes = _shoal.list_prefix(s, url, delimiter=True, detail="size")
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


@dataclass
class SyncResult:
    """What a distributed sync did."""

    copied: int = 0
    bytes: int = 0
    deleted: int = 0
    #: Names only the destination holds (deleted with ``delete``, unless
    #: held back: see :func:`sync`).
    extras: int = 0
    #: Copies not made as expected or asked (``no_clobber``).
    skipped: int = 0
    #: Extras not deleted because they were written again since they
    #: were listed (each delete names the version its listing saw).
    kept: int = 0
    #: One line for every copy, listing page or deletion that failed, and
    #: for deletions held back or refused, each naming its URL.
    failures: list[str] = field(default_factory=list)
    #: Ranges the source listing was split into (one sync task each).
    tasks: int = 0
    #: The most source bytes a task was given (the caller's, or the
    #: default chosen for the plan and the cluster).
    bytes_per_task: int = 0


def _sync_range(
    session: _shoal.Session,
    src: str,
    dst: str,
    start: str,
    stop: str | None,
    delete: bool,
    compare: dict[str, bool],
    max_workers: int | None,
    chunk_size: int | None,
) -> tuple[dict[str, Any], list[tuple[str, str | None]]]:
    """One source range synced by the engine (runs on a worker): its
    summary for the client, and the extras (only with ``delete``: each
    URL with the version its listing saw), which stay on the worker until
    the second phase deletes them."""
    r = _shoal.sync_range(
        session, src, dst, start=start, stop=stop, delete=delete, workers=max_workers, chunk_size=chunk_size, **compare
    )
    return r, r.pop("extra_urls")


def _delete_listed(
    extras: list[tuple[str, str | None]], session: _shoal.Session, max_workers: int | None
) -> tuple[int, int, list[str]]:
    """The engine deletes each extra at the version listed (one written
    again since is kept): ``(deleted, kept, failures)``."""
    if not extras:
        return 0, 0, []
    return _shoal.delete_extras(session, extras, workers=max_workers)


def sync(
    src: str,
    dst: str,
    *,
    client: Any = None,
    delete: bool = False,
    max_delete: int | None = None,
    delete_when_source_empty: bool = False,
    ignore_errors: bool = False,
    checksum: bool = False,
    size_only: bool = False,
    update: bool = False,
    no_clobber: bool = False,
    keys_per_task: int = 100_000,
    bytes_per_task: int | None = None,
    max_workers: int | None = None,
    chunk_size: int | None = None,
    list_connections: int | None = None,
    progress: bool = False,
    on_task: Any = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> SyncResult:
    """Makes the bucket prefix ``dst`` hold what ``src`` holds, on a
    distributed cluster, as ``shoal sync`` does on one machine and by the
    same engine: an object is copied when the destination lacks it, its
    size differs, or the source is newer; ``checksum``, ``size_only``,
    ``update`` and ``no_clobber`` change that as the CLI's flags do. The
    workers first find ranges of the source's keys (a listing split
    across them, :func:`list_partitions`, that keeps no keys); then each
    range is one task that lists that range of both sides page by page
    and merges them in key order (``shoal_transfer::sync::sync_range``),
    so no process holds either listing whole. A range is cut further so
    that its source holds at most ``bytes_per_task`` bytes (by default
    chosen as :func:`copy` chooses it: the source's bytes over the worker
    threads, 16 MiB to 1 GiB) and ``keys_per_task`` keys (an object bigger than that is one
    range of its own, copied whole by the engine: splitting one object
    across tasks is :func:`copy`'s). Tasks are named ``shoal-sync-…`` in
    the dashboard; ``progress`` and ``on_task`` as in :func:`copy`.

    With ``delete``, what only the destination holds is deleted in a
    second phase, after every range's task ended, and only if none of
    them raised and no copy or listing page in any range failed (as rsync
    and rclone hold deletes back after an error; ``ignore_errors=True``
    deletes anyway, and a failed task still raises before anything is
    deleted). Never when the source lists nothing (unless
    ``delete_when_source_empty``), nor when more than ``max_delete`` would
    go: a line in ``failures`` says why, and nothing is deleted. Both
    URLs are bucket prefixes (``gs://``, ``s3://``), not globs, neither
    inside the other."""
    _shoal.check_sync(src, dst)
    if checksum and size_only:
        raise ValueError("sync: checksum and size_only exclude each other")
    c = _distributed_client(client)
    if c is None:
        raise ValueError("shoal.dask.sync needs a dask.distributed Client (or use shoal sync)")
    src, dst = _as_dir(src), _as_dir(dst)
    s = resolve(session, options)
    st = ListingStats()
    slots = _slots(c)
    ranges = _list_ranges(
        src,
        c,
        keys_per_task,
        None,
        "size",
        st,
        s,
        keep=False,
        connections=list_connections,
        cut=(bytes_per_task, slots),
        keys_per_piece=keys_per_task,
    )
    budget = _task_bytes(bytes_per_task, sum(r.bytes() for r in ranges), slots)
    if delete and _shoal.sync_deletes_held(
        extras=0, source_listed=st.objects, failed=0, delete_when_source_empty=delete_when_source_empty
    ):
        raise ValueError(
            f"sync --delete {src}: the source lists nothing, so this would delete everything in {dst}; nothing was done"
            " (check the source URL, or pass delete_when_source_empty=True if that is what you want)"
        )
    compare = {"checksum": checksum, "size_only": size_only, "update": update, "no_clobber": no_clobber}
    summaries, extras = [], []
    tok = _token()
    for rg in ranges:
        for start, stop in rg.pieces(budget, keys_per_task):
            i = len(summaries)
            t = c.submit(
                _sync_range,
                s,
                src,
                dst,
                start,
                stop,
                delete,
                compare,
                max_workers,
                chunk_size,
                key=f"shoal-sync-{i}-{tok}",
            )
            summaries.append(c.submit(operator.itemgetter(0), t, key=f"shoal-sync-summary-{i}-{tok}"))
            extras.append(c.submit(operator.itemgetter(1), t, key=f"shoal-sync-extras-{i}-{tok}"))
    res = SyncResult(tasks=len(summaries), bytes_per_task=budget)
    failed = 0
    # A failed task raises here, before anything is deleted.
    for r in _run_tasks(c, summaries, progress, on_task, lambda r: (r["copied"], r["bytes"], r["failed"])):
        res.copied += r["copied"]
        res.bytes += r["bytes"]
        res.skipped += r["skipped"]
        res.extras += r["extras"]
        res.failures.extend(r["failures"])
        failed += r["failed"]
    n = res.extras
    if delete and n:
        # The engine's rule (the CLI's); only the wording is this API's.
        held = _shoal.sync_deletes_held(
            extras=n,
            source_listed=st.objects,
            failed=failed,
            max_delete=max_delete,
            delete_when_source_empty=delete_when_source_empty,
            ignore_errors=ignore_errors,
        )
        if held is not None:
            why, k = held
            reason = {
                "failures": f"{k} copies or listing pages failed (named above; ignore_errors=True deletes anyway)",
                "max_delete": f"more than max_delete={k}; nothing was deleted",
                "source_empty": "the source lists nothing",
            }[why]
            res.failures.append(f"sync --delete {dst}: {n} extra{'' if n == 1 else 's'} not deleted: {reason}")
        else:
            for deleted, kept, failures in c.gather(
                [
                    c.submit(_delete_listed, e, s, max_workers, key=f"shoal-sync-delete-{i}-{tok}")
                    for i, e in enumerate(extras)
                ]
            ):
                res.deleted += deleted
                res.kept += kept
                res.failures.extend(failures)
            if res.kept:
                res.failures.append(
                    f"sync --delete {dst}: kept {res.kept} extra{'' if res.kept == 1 else 's'} written again since "
                    "they were listed"
                )
    return res
