"""shoal.dask on a real distributed.LocalCluster with 2 worker processes."""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest

distributed = pytest.importorskip("distributed")

import shoal  # noqa: E402
import shoal.dask as sd  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _seed(bucket: str, n: int = 40) -> int:
    total = 0
    for i in range(n):
        data = (b"line %d\n" % i) * (i + 1)
        shoal.put(f"{bucket}/in/{i // 10}/f{i:03d}.txt", data)
        total += len(data)
    return total


def test_split_by_bytes_balances_and_keeps_order():
    items = [{"k": i, "size": s} for i, s in enumerate([100, 1, 1, 1, 50, 50])]
    parts = sd.split_by_bytes(items, 2)
    totals = sorted(sum(x["size"] for x in p) for p in parts)
    assert sum(totals) == 203 and totals[1] - totals[0] <= 1
    for p in parts:
        assert [x["k"] for x in p] == sorted(x["k"] for x in p)
    assert sd.split_by_bytes([], 3) == []


def test_listing_as_bag_and_dataframe(client, bucket):
    total = _seed(bucket)
    bag = sd.ls_bag(f"{bucket}/in/", npartitions=4)
    assert bag.npartitions == 4
    recs = bag.compute()
    assert len(recs) == 40 and sum(r["size"] for r in recs) == total
    df = sd.ls_dataframe(f"{bucket}/in/**.txt", npartitions=3)
    assert df.npartitions == 3
    assert int(df["size"].sum().compute()) == total


def test_copy_runs_on_both_workers_and_gathers_failures(client, bucket, tmp_path):
    total = _seed(bucket)
    res = sd.copy(f"{bucket}/in/", f"{bucket}/out/", client=client, npartitions=4)
    assert (res.copied, res.bytes, res.failures, res.tasks) == (40, total, [], 4)
    assert sorted(o.key[4:] for o in shoal.glob(f"{bucket}/out/**")) == sorted(
        o.key[3:] for o in shoal.glob(f"{bucket}/in/**")
    )
    # Both worker processes took part.
    assert len({ws.address for ws in client.cluster.scheduler.workers.values()}) == 2
    # Downloads to a local folder; an unsafe key is a failure of its own.
    shoal.put(f"{bucket}/in/../escape", b"x") if bucket.startswith("gs") else None
    res = sd.copy(f"{bucket}/in/", str(tmp_path / "local"), client=client)
    assert res.copied == 40
    if bucket.startswith("gs"):
        assert len(res.failures) == 1 and "escape" in res.failures[0][0]
    assert (tmp_path / "local" / "3" / "f039.txt").read_bytes() == b"line 39\n" * 40


def test_read_bag_lines(client, bucket):
    _seed(bucket, 20)
    lines = sd.read_bag(f"{bucket}/in/**.txt", npartitions=2).compute()
    assert len(lines) == sum(i + 1 for i in range(20))
    assert sorted(set(lines))[0] == b"line 0"


def test_du_as_tasks_matches_single_process(client, bucket):
    total = _seed(bucket)
    shoal.put(f"{bucket}/top.bin", b"12345")
    d = sd.du(bucket, client=client)
    single = shoal.du(bucket)
    assert (d.bytes, d.objects) == (single.bytes, single.objects) == (total + 5, 41)
    g = sd.du(bucket, client=client, group_by="suffix")
    assert g.groups == shoal.du(bucket, group_by="suffix").groups


def test_listing_split_across_workers(client, s3_bucket, gs_bucket):
    # Skewed keys: most under one prefix, so ranges must be cut where the
    # keys are, not at the alphabet's middle.
    import concurrent.futures as cf

    keys = [f"p/hot/{i:05}" for i in range(2000)] + [f"p/{c}{i}" for c in "amz" for i in range(150)]
    keys.append("p-not-below")
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: shoal.put(f"{s3_bucket}/{k}", b"xy"), keys))
    stats = sd.ListingStats()
    parts = sd.list_partitions(f"{s3_bucket}/p/", client=client, keys_per_task=200, stats=stats)
    got = [r["key"] for p in client.gather(parts) for r in p]
    want = sorted(k for k in keys if k.startswith("p/"))
    assert got == want, "every key once, partitions in key order"
    assert stats.objects == len(want) and stats.tasks == len(parts) > 1 and stats.splits > 0
    # A partition is columns read as dicts: it pickles whole (Dask moves
    # it between workers), compares with the list of its dicts, and tells
    # Dask's memory accounting its real size (its keys and a few words a
    # key, not a Python object a key).
    import collections.abc
    import pickle
    import sys

    p0 = client.gather(parts[0])
    assert isinstance(p0, shoal.Records) and isinstance(p0, collections.abc.Sequence)
    assert pickle.loads(pickle.dumps(p0)) == p0 == list(p0) != list(p0)[1:]
    assert p0[-1] == list(p0)[-1] and p0[0] == {
        "url": f"{s3_bucket}/{p0.key(0)}",
        "key": p0.key(0),
        "size": 2,
        "updated": p0[0]["updated"],
    }
    assert p0[1:3] == list(p0)[1:3] and p0.keys() == [r["key"] for r in p0] and p0.total_size() == 2 * len(p0)
    key_bytes = sum(len(k.encode()) for k in p0.keys())
    assert key_bytes < sys.getsizeof(p0) < key_bytes + 64 * len(p0) + 1024
    # The same through ls_bag / ls_dataframe, which list on the workers by default.
    bag = sd.ls_bag(f"{s3_bucket}/p", keys_per_task=300)
    assert sorted(r["key"] for r in bag.compute()) == want
    df = sd.ls_dataframe(f"{s3_bucket}/p/", keys_per_task=300)
    assert int(df["size"].sum().compute()) == 2 * len(want)
    # A prefix that holds nothing is one empty partition; GCS works the same.
    assert [client.gather(p) for p in sd.list_partitions(f"{s3_bucket}/nothing/", client=client)] == [[]]
    for k in ["a/1", "a/2", "b"]:
        shoal.put(f"{gs_bucket}/{k}", b"z")
    parts = sd.list_partitions(f"{gs_bucket}/", client=client, keys_per_task=1)
    assert [r["key"] for p in client.gather(parts) for r in p] == ["a/1", "a/2", "b"]
    with pytest.raises(ValueError):
        sd.list_partitions(f"{gs_bucket}/a*", client=client)


def test_copy_read_du_and_sync_consume_listed_partitions(client, s3_bucket, gs_bucket, monkeypatch):
    import concurrent.futures as cf

    keys = [f"hot/{i:05}" for i in range(1200)] + [f"{c}{i}" for c in "amz" for i in range(20)]
    body = {k: b"v1 " + k.encode() for k in keys}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: shoal.put(f"{s3_bucket}/src/{k}", body[k]), keys))
    src = f"{s3_bucket}/src/"
    total = sum(len(v) for v in body.values())

    # copy, du and read_bag list on the workers (no npartitions given) and
    # work on each listed partition where it was listed: the client's own
    # listing is never called.
    def no_client_listing(*a, **k):
        raise AssertionError("listed on the client")

    monkeypatch.setattr(sd, "_listing", no_client_listing)
    res = sd.copy(src, f"{s3_bucket}/copy/", client=client, keys_per_task=300)
    assert (res.copied, res.bytes, res.failures) == (len(keys), total, [])
    assert res.tasks > 1
    assert shoal.cat(f"{s3_bucket}/copy/hot/00007") == body["hot/00007"]
    d = sd.du(src, client=client)
    assert (d.bytes, d.objects) == (total, len(keys))
    got = sd.read_bag(src, lines=False, keys_per_task=300).compute()
    assert sorted(got) == sorted(body.values())
    monkeypatch.undo()

    # sync S3 → GCS: a destination holding one equal (newer) object, one of
    # another size, and two extras, one between the source's keys.
    dst = f"{gs_bucket}/mirror/"
    shoal.put(f"{dst}a3", body["a3"])
    shoal.put(f"{dst}hot/00005", b"other size")
    for extra in ("hot/00005x", "zz-extra"):
        shoal.put(f"{dst}{extra}", b"extra")
    r = sd.sync(src, dst, client=client, keys_per_task=300)
    assert (r.copied, r.deleted, r.failures) == (len(keys) - 1, 0, [])
    assert shoal.cat(f"{dst}hot/00005") == body["hot/00005"]
    r = sd.sync(src, dst, client=client, delete=True, max_delete=1, keys_per_task=300)
    assert (r.copied, r.deleted, r.extras) == (0, 0, 2) and "not deleted" in r.failures[0]
    r = sd.sync(src, dst, client=client, delete=True, keys_per_task=300)
    assert (r.copied, r.deleted, r.failures) == (0, 2, [])
    mirror = sorted(o.key[len("mirror/") :] for o in shoal.ls(dst, recursive=True).objects)
    assert mirror == sorted(keys)

    # A source that lists nothing deletes nothing; overlapping URLs are refused.
    with pytest.raises(ValueError, match="lists nothing"):
        sd.sync(f"{s3_bucket}/nothing/", dst, client=client, delete=True)
    with pytest.raises(ValueError, match="inside the source"):
        sd.sync(src, f"{src}sub/", client=client)
    assert len(shoal.ls(dst, recursive=True).objects) == len(keys)


def test_sync_runs_the_engine_and_holds_deletes_after_a_failure(client, gs_bucket, s3_bucket):
    src, dst = f"{gs_bucket}/src/", f"{s3_bucket}/dst/"
    for i in range(30):
        shoal.put(f"{src}k{i:02d}", b"v%d" % i)
    r = sd.sync(src, dst, client=client, keys_per_task=10)
    assert (r.copied, r.failures, r.extras) == (30, [], 0)
    # Nothing differs: a second run copies nothing, by time or by checksum.
    assert sd.sync(src, dst, client=client, keys_per_task=10).copied == 0
    shoal.put(f"{dst}k03", b"vX")  # same size, newer: only a checksum sees it
    assert sd.sync(src, dst, client=client).copied == 0
    r = sd.sync(src, dst, client=client, checksum=True)
    assert (r.copied, r.failures) == (1, []) and shoal.cat(f"{dst}k03") == b"v3"
    # A copy that fails (a key MinIO refuses: over 1024 bytes once placed
    # under dst/) holds every delete back and says so; ignore_errors deletes.
    shoal.put(f"{src}{'x' * 1020}", b"long")
    shoal.put(f"{dst}extra", b"e")
    r = sd.sync(src, dst, client=client, delete=True, keys_per_task=10)
    assert (r.copied, r.deleted, r.extras) == (0, 0, 1), r
    assert len(r.failures) == 2 and "xxxx" in r.failures[0] and "1 extra not deleted" in r.failures[1], r.failures
    assert shoal.cat(f"{dst}extra") == b"e"
    r = sd.sync(src, dst, client=client, delete=True, ignore_errors=True)
    assert (r.deleted, len(r.failures)) == (1, 1), r
    with pytest.raises(FileNotFoundError):
        shoal.cat(f"{dst}extra")


def test_sync_deletes_extras_at_the_version_listed(gs_bucket, s3_bucket):
    """Issue 52: a distributed sync's extras were deleted by URL alone.
    Each range now hands back every extra with the version its listing
    saw (a generation on GCS, an ETag on S3), and the engine deletes it
    pinned to that version, as `sync --delete` does (batched where the
    store can: GCS batch `ifGenerationMatch`, S3 DeleteObjects `ETag`).
    fake-gcs-server and MinIO ignore a delete's precondition
    (docs/s3-servers.md), so here the pin is checked as sent: a version
    that is not one is refused before any request. The delete guards are
    the engine's too."""
    s = shoal.Session()
    for bucket in (gs_bucket, s3_bucket):
        src, dst = f"{bucket}/src/", f"{bucket}/dst/"
        shoal.put(f"{src}a", b"a")
        shoal.put(f"{dst}a", b"a")
        shoal.put(f"{dst}extra", b"old")
        r = shoal._shoal.sync_range(s, src, dst, start="", stop=None, delete=True)
        extras = r["extra_urls"]
        assert [u for u, _ in extras] == [f"{dst}extra"] and all(v for _, v in extras), extras
        if bucket.startswith("gs://"):
            assert extras[0][1].isdigit(), extras
            with pytest.raises(ValueError, match="not a GCS generation"):
                shoal._shoal.delete_extras(s, [(extras[0][0], "etag-like")])
        assert shoal._shoal.delete_extras(s, extras) == (1, 0, [])
        with pytest.raises(FileNotFoundError):
            shoal.cat(f"{dst}extra")
    held = shoal._shoal.sync_deletes_held
    assert held(extras=0, source_listed=0, failed=0) == ("source_empty", 0)
    assert held(extras=3, source_listed=0, failed=0, delete_when_source_empty=True) is None
    assert held(extras=3, source_listed=5, failed=2) == ("failures", 2)
    assert held(extras=3, source_listed=5, failed=2, ignore_errors=True) is None
    assert held(extras=3, source_listed=5, failed=0, max_delete=2) == ("max_delete", 2)
    assert held(extras=2, source_listed=5, failed=0, max_delete=2) is None


# Keys that sort next to each other byte-wise but not by eye: `a-b` (0x2D)
# sorts below `a/b` (0x2F), a key sorts before its extensions, Unicode
# after ASCII.
# MinIO keeps objects as files, so on S3 no key is also another's folder
# (`a` beside `a/b`): those pairs are listed on GCS only.
AWKWARD = ["a b", "a+b", "a-b", "a.b", "a/b", "a/c/d", "a0", "a%2Fb", "z~", "é", "日本/語", "𝄞"]
AWKWARD_GCS = ["a", "a/c/", "日本", "é/x"]


def test_listing_tasks_tile_the_prefix_with_awkward_keys(client, bucket):
    """Each listing task runs the parallel lister on its range and stops
    at a key below which it listed everything: the partitions are every
    key once, in order, whatever the piece size and the connections."""
    import concurrent.futures as cf

    awkward = AWKWARD + (AWKWARD_GCS if bucket.startswith("gs://") else [])
    keys = [f"p/{k}" for k in awkward] + [f"p/hot/{i:04}" for i in range(2400)] + ["p-", "q/a"]
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: shoal.put(f"{bucket}/{k}", b"x"), keys))
    want = sorted(k for k in keys if k.startswith("p/"))
    for keys_per_task, conns in [(1, 1), (700, 4), (1500, 16), (100_000, 2)]:
        stats = sd.ListingStats()
        parts = sd.list_partitions(
            f"{bucket}/p/", client=client, keys_per_task=keys_per_task, list_connections=conns, stats=stats
        )
        got = [r["key"] for p in client.gather(parts) for r in p]
        assert got == want, (keys_per_task, conns, stats, [len(x) for x in client.gather(parts)])
    # A range whose bounds are existing keys: the start is listed, the end
    # is not, and the key to go on from lies right after the last listed.
    s = shoal.Session()
    objs, nxt, ahead = shoal._shoal.list_range(
        s, f"{bucket}/p/", start="p/a-b", end="p/a/c/d", max_keys=100, detail="size", connections=3
    )
    assert [o.key for o in objs] == [k for k in want if "p/a-b" <= k < "p/a/c/d"] and nxt is None
    assert ahead is None
    assert [o.key for o in objs][:3] == ["p/a-b", "p/a.b", "p/a/b"]
    objs, nxt, ahead = shoal._shoal.list_range(
        s, f"{bucket}/p/", start="p/", end=None, max_keys=2, detail="size", connections=3
    )
    # (fake-gcs-server answers with one page of everything: then it is done.)
    assert len(objs) >= 2 and (nxt is None or objs[-1].key < nxt)
    objs2, _, _ = (
        shoal._shoal.list_range(s, f"{bucket}/p/", start=nxt, end=None, max_keys=100_000, detail="size", connections=3)
        if nxt
        else ([], None, None)
    )
    assert [o.key for o in objs + objs2] == want
    if nxt:
        # A look past the stop: the first keys the next piece lists.
        first, last, n, _ = ahead
        assert first == objs2[0].key and last == objs2[n - 1].key


def _uploads_left(bucket: str) -> list[str]:
    """Multipart uploads (S3) or composite parts (GCS) still on a bucket."""
    if bucket.startswith("s3://"):
        from .test_api import _boto3_s3

        r = _boto3_s3().list_multipart_uploads(Bucket=bucket[5:])
        return [u["Key"] for u in r.get("Uploads", [])]
    return [o.key for o in shoal.ls(f"{bucket}/.shoal-tmp/", recursive=True).objects]


@pytest.mark.parametrize("dst_scheme", ["s3", "gs"])
def test_copy_splits_tasks_by_bytes_and_one_object_across_tasks(client, s3_bucket, dst_scheme):
    import os

    from .conftest import GCS, S3, _need, new_bucket

    _need(GCS if dst_scheme == "gs" else S3, dst_scheme)
    dst_bucket = new_bucket(dst_scheme)
    mib = 1 << 20
    big = os.urandom(40 * mib + 12345)
    shoal.put(f"{s3_bucket}/src/big.bin", big)
    small = {f"src/s{i}": os.urandom(3 * mib) for i in range(6)}
    for k, v in small.items():
        shoal.put(f"{s3_bucket}/{k}", v)
    reports = []
    res = sd.copy(
        f"{s3_bucket}/src/",
        f"{dst_bucket}/out/",
        client=client,
        bytes_per_task=16 * mib,
        part_size=8 * mib,
        on_task=reports.append,
    )
    assert res.failures == [] and res.copied == 7 and res.split_objects == 1
    assert res.bytes == len(big) + sum(len(v) for v in small.values())
    assert shoal.cat(f"{dst_bucket}/out/big.bin") == big
    assert shoal.cat(f"{dst_bucket}/out/s5") == small["src/s5"]
    names = {r.name.rsplit("-", 2)[0] for r in reports}
    assert names == {"shoal-copy", "shoal-copy-part"}, names
    # 18 MiB of small objects in tasks of at most 16 MiB, the big one in
    # 3 part tasks of at most 16 MiB (five 8 MiB parts and a tail).
    assert sum(r.name.startswith("shoal-copy-part") for r in reports) == 3
    assert sum(r.bytes for r in reports) == res.bytes
    assert _uploads_left(dst_bucket) == []


def test_copies_and_syncs_spread_over_the_workers_by_default(client, s3_bucket, monkeypatch):
    """Without ``bytes_per_task`` a task's bytes follow the plan and the
    cluster (2 worker threads here): 4 x 24 MiB is two tasks of 48 MiB
    (the old 1 GiB default made it one), one 72 MiB object is copied by
    two part tasks, a sync of the 4 objects is two tasks; a plan below
    the 16 MiB floor stays one task."""
    import os

    from .conftest import new_bucket

    mib = 1 << 20
    slots = sum(client.nthreads().values())
    assert slots == 2
    data = {f"four/o{i}": os.urandom(24 * mib) for i in range(4)}
    for k, v in data.items():
        shoal.put(f"{s3_bucket}/{k}", v)
    dst = new_bucket("s3")
    # What shoal asks of Dask is recorded: where Dask then runs a task
    # with a loose hint (allow_other_workers) is Dask's choice, and on a
    # busy machine it may run both where one worker is free first.
    hints: list[dict] = []
    hint = sd._Spread.hint

    def recorded(self, data, j):
        h = hint(self, data, j)
        hints.append(h)
        return h

    monkeypatch.setattr(sd._Spread, "hint", recorded)
    res = sd.copy(f"{s3_bucket}/four/", f"{dst}/out/", client=client)
    assert (res.failures, res.copied, res.bytes) == ([], 4, 96 * mib)
    assert (res.tasks, res.bytes_per_task) == (2, 48 * mib), res
    # One listed partition, two pieces: one asked of each worker, not
    # both where the partition is (Dask's placement by inputs).
    asked = [h["workers"][0] for h in hints]
    assert len(asked) == 2 and len(set(asked)) == 2, hints
    assert set(asked) == set(client.nthreads()), hints
    assert shoal.cat(f"{dst}/out/o3") == data["four/o3"]
    # The same plan listed on the client (a glob): the same two tasks.
    res = sd.copy(f"{s3_bucket}/four/o*", f"{dst}/glob/", client=client)
    assert (res.failures, res.copied, res.tasks, res.bytes_per_task) == ([], 4, 2, 48 * mib), res
    # One object of 72 MiB: parts of one task's 36 MiB, a task each.
    big = os.urandom(72 * mib)
    shoal.put(f"{s3_bucket}/one/big.bin", big)
    reports = []
    res = sd.copy(f"{s3_bucket}/one/", f"{dst}/big/", client=client, on_task=reports.append)
    assert (res.failures, res.copied, res.split_objects) == ([], 1, 1), res
    assert sum(r.name.startswith("shoal-copy-part") for r in reports) == 2
    assert shoal.cat(f"{dst}/big/big.bin") == big
    assert _uploads_left(dst) == []
    # Sync: the 4 objects to an empty prefix, two ranges.
    res = sd.sync(f"{s3_bucket}/four/", f"{dst}/synced/", client=client)
    assert (res.failures, res.copied, res.tasks, res.bytes_per_task) == ([], 4, 2, 48 * mib), res
    # Below the floor a task's fixed cost dominates: one task.
    for i in range(4):
        shoal.put(f"{s3_bucket}/small/s{i}", os.urandom(mib))
    res = sd.copy(f"{s3_bucket}/small/", f"{dst}/small/", client=client)
    assert (res.copied, res.tasks, res.bytes_per_task) == (4, 1, 16 * mib), res
    # The caller's budget still rules.
    res = sd.copy(f"{s3_bucket}/four/", f"{dst}/asked/", client=client, bytes_per_task=24 * mib)
    assert (res.copied, res.tasks, res.bytes_per_task) == (4, 4, 24 * mib), res


def test_a_failed_part_aborts_the_split_copy(client, s3_bucket, gs_bucket, monkeypatch):
    """The source replaced after the upload began: the part tasks' reads,
    pinned to the version begun with, fail; the upload is aborted, its
    parts deleted, nothing is written, and the failure names the URL."""
    import os

    mib = 1 << 20
    for dst_bucket in (s3_bucket, gs_bucket):
        src = f"{s3_bucket}/big-{dst_bucket[:2]}.bin"
        shoal.put(src, os.urandom(24 * mib))
        real = shoal._shoal.split_copy_begin

        def begin_then_replace(*a, _real=real, _src=src, **k):
            out = _real(*a, **k)
            shoal.put(_src, os.urandom(24 * mib))
            return out

        monkeypatch.setattr(sd._shoal, "split_copy_begin", begin_then_replace)
        res = sd.copy(src, f"{dst_bucket}/x.bin", client=client, bytes_per_task=8 * mib, part_size=8 * mib)
        monkeypatch.undo()
        assert res.copied == 0 and len(res.failures) == 1, res
        assert src in res.failures[0][2] and "aborted" in res.failures[0][2]
        # The destination is a folder (the object would be x.bin/big-…):
        # nothing below it.
        assert [o for o in shoal.ls(f"{dst_bucket}/", recursive=True).objects if o.key.startswith("x.bin")] == []
        assert _uploads_left(dst_bucket) == []


def test_unreachable_store_and_empty_source_raise_naming_the_url(client, s3_bucket):
    shoal.put(f"{s3_bucket}/src/a", b"a")
    # A store the cluster cannot reach: one exception naming the URL.
    with pytest.raises(Exception, match="s3://nowhere") as e:
        sd.copy(
            "s3://nowhere/src/", f"{s3_bucket}/dst/", client=client, s3_endpoint_url="http://127.0.0.1:9", attempts=1
        )
    assert "\n" not in str(e.value).strip()
    # A source that lists nothing: NotFoundError naming it, nothing written.
    with pytest.raises(FileNotFoundError, match="nothing/"):
        sd.copy(f"{s3_bucket}/nothing/", f"{s3_bucket}/dst/", client=client)
    assert shoal.ls(f"{s3_bucket}/dst/", recursive=True).objects == []


def _listing_layout(rng) -> list[str]:
    """A random bucket layout of a few thousand keys, more than a listing
    page, so listing tasks stop at their budget, look past their stop and
    cut the rest: folders of keys numbered by decimal counters (widths,
    steps, gaps, a hash or nothing after them, a counter ending a folder
    name), hashed names, and awkward ones."""
    keys: set[str] = set()
    folders, f = rng.randint(1, 4), 0
    while f < folders or len(keys) <= 1100:  # more than a page, always
        f += 1
        # Under t/: MinIO keeps objects as files, so no awkward key below
        # may also be a folder here.
        folder = "t/" + rng.choice(["", "d/", "logs/x=1/", "é/", "a b/", "日本/"]) + f"f{f}/"
        n = rng.randint(150, 1400)
        width = rng.randint(3, 9)
        step = rng.choice([1, 1, 7, 100, 10 ** (width - 2)])
        at = rng.randrange(10 ** (width - 1))
        kind = rng.choice(["counter", "counter-hash", "counter-folder", "hash"])
        for i in range(n):
            c = (at + i * step + (rng.randrange(50) if rng.random() < 0.1 else 0)) % 10**width
            h = f"{rng.getrandbits(32):08x}"
            keys.add(
                {
                    "counter": f"{folder}part-{c:0{width}d}.json",
                    "counter-hash": f"{folder}part-{c:0{width}d}-{h}.zst",
                    "counter-folder": f"{folder}shard-{c % 37:03d}/obj-{c:0{width}d}",
                    "hash": f"{folder}{h}",
                }[kind]
            )
    keys.update(rng.sample(AWKWARD, rng.randint(0, 4)))
    return sorted(keys)


@pytest.mark.parametrize("seed", range(int(__import__("os").environ.get("SHOAL_DASK_LISTINGS", "4"))))
def test_random_listings_tile_every_key_once(client, s3_bucket, seed, monkeypatch):
    """Randomized listings across Dask tasks (the listing's member of the
    plan test): a random layout of more than a page of keys, small random
    key budgets and connections, so tasks stop at their budget, look one
    page past their stop and have their rest cut (by a decimal counter
    where the keys have one, else by the alphabet seen). The model: the
    partitions hold every key exactly once, in order, and the ranges tile
    the prefix, so a sync pairing them with a destination's meets each
    key in one range. Some listings are kept as partitions with cores
    to spare (forced here): each task lists more than a partition's keys
    and hands them out as partitions of at most ``keys_per_task``, which
    tile its range too. MinIO: fake-gcs-server answers a listing in one
    page."""
    import concurrent.futures as cf
    import os
    import random

    rng = random.Random(int(os.environ.get("SHOAL_PLAN_SEED", "38")) * 1000 + seed)
    keys = _listing_layout(rng)
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: shoal.put(f"{s3_bucket}/r/{k}", b""), keys))
    want = [f"r/{k}" for k in keys]
    s = shoal.Session()
    for round in range(3):
        # The first listing of each seed hands out partitions of a task's keys.
        keys_per_task = 1000 if round == 0 else rng.choice([1, 300, 999, 1000, 1500, 2500])
        conns = rng.choice([1, 3, 16])
        spare = round == 0 or rng.random() < 0.5
        monkeypatch.setattr(sd, "_spare_cores", lambda c, spare=spare: spare)
        plan = f"seed {seed}: {len(keys)} keys, {keys_per_task} a task, {conns} connections, spare cores {spare}"
        stats = sd.ListingStats()
        ranges = sd._list_ranges(
            f"{s3_bucket}/r/", client, keys_per_task, None, "name", stats, s, connections=conns, as_partitions=True
        )
        assert ranges[0].start == "r/" and ranges[-1].stop is None, plan
        assert all(a.stop == b.start for a, b in zip(ranges, ranges[1:], strict=False)), plan
        got = []
        for r, data in zip(ranges, client.gather([r.data for r in ranges]), strict=True):
            part = [x["key"] for x in data]
            assert all(r.start <= k and (r.stop is None or k < r.stop) for k in part), (plan, r.start, r.stop)
            if spare and keys_per_task >= 1000:
                assert len(part) <= keys_per_task, (plan, len(part))
            got += part
        assert got == want, (plan, stats)
        if spare and keys_per_task >= 1000 and len(keys) > keys_per_task:
            assert len(ranges) > stats.tasks, (plan, stats, len(ranges))
        if len(keys) > 1000 and keys_per_task < 1000:
            assert stats.tasks > 1, (plan, stats)
    parts = sd.list_partitions(f"{s3_bucket}/r/", client=client, keys_per_task=700)
    assert [r["key"] for p in client.gather(parts) for r in p] == want, seed


def _tree_model(prefix: str, rng) -> dict[str, bytes]:
    """A small random tree of awkward names below ``prefix`` (a key
    prefix ending in ``/``)."""
    names = ["a", "b", "a-b", "a.b", "sub", "é", "z z"]
    out = {}
    for _ in range(rng.randint(1, 7)):
        depth = rng.randint(1, 3)
        key = prefix + "/".join(rng.choice(names) for _ in range(depth))
        # A name is either an object or a folder, never both.
        if any(k.startswith(key + "/") or key.startswith(k + "/") for k in out):
            continue
        out[key] = rng.randbytes(rng.randint(0, 3000))
    return out


def _bucket_state(bucket: str) -> dict[str, bytes]:
    return {o.key: shoal.cat(o.url) for o in shoal.glob(f"{bucket}/**")}


@pytest.mark.parametrize("seed", range(int(__import__("os").environ.get("SHOAL_DASK_PLANS", "12"))))
def test_random_copy_plans_never_write_what_they_read(client, s3_bucket, gs_bucket, seed):
    """Randomized plans for ``shoal.dask.copy`` (the Dask member of the
    plan test, beside the CLI's random_plans.rs): a random tree, a source
    given as a prefix or a ``**`` glob, a destination outside it, inside
    it, the same place, or above it, in the same bucket or the other
    store, small task budgets so the plan spreads over many tasks and
    sometimes splits one object across tasks. The model: a destination
    overlapping the source (as folders; for the glob, below its literal
    folder) is refused with nothing changed; otherwise every source
    object lands at the destination with its bytes and nothing outside
    the destination changes."""
    import os
    import random

    rng = random.Random(int(os.environ.get("SHOAL_PLAN_SEED", "38")) * 1000 + seed)
    bucket = rng.choice([s3_bucket, gs_bucket])
    src_key = "t/src/"
    tree = _tree_model(src_key, rng)
    big = rng.random() < 0.25 and bucket.startswith("s3")
    if big:
        tree[src_key + "big.bin"] = os.urandom(11 << 20)
    for k, v in tree.items():
        shoal.put(f"{bucket}/{k}", v)
    shoal.put(f"{bucket}/t/other", b"outside")
    glob = rng.random() < 0.5
    src = f"{bucket}/{src_key}" + ("**" if glob else "")
    where = rng.choice(["outside", "inside", "same", "above", "other-store"])
    dst_bucket = {"other-store": gs_bucket if bucket == s3_bucket else s3_bucket}.get(where, bucket)
    dst_key = {
        "outside": "t/out/",
        "inside": src_key + rng.choice(["sub/", "a/", "new/"]),
        "same": src_key,
        "above": "t/",
        "other-store": src_key,
    }[where]
    dst = f"{dst_bucket}/{dst_key}"
    overlap = dst_bucket == bucket and (dst_key.startswith(src_key) or src_key.startswith(dst_key))
    before = {b: _bucket_state(b) for b in {bucket, dst_bucket}}
    plan = f"seed {seed}: copy {src} -> {dst} ({len(tree)} objects{', one split' if big else ''})"
    if overlap:
        with pytest.raises(ValueError, match="nothing was done"):
            sd.copy(src, dst, client=client, bytes_per_task=8 << 20, keys_per_task=rng.randint(1, 3), part_size=5 << 20)
        assert {b: _bucket_state(b) for b in before} == before, plan
        return
    res = sd.copy(src, dst, client=client, bytes_per_task=8 << 20, keys_per_task=rng.randint(1, 3), part_size=5 << 20)
    assert res.failures == [] and res.copied == len(tree), (plan, res)
    want = dict(before[dst_bucket])
    for k, v in tree.items():
        want[dst_key + k[len(src_key) :]] = v
    after = _bucket_state(dst_bucket)
    assert after == want, plan
    if dst_bucket != bucket:
        assert _bucket_state(bucket) == before[bucket], plan


def test_inventory_report_as_partitions(client, tmp_path):
    """An S3 Inventory report (manifest, two gzipped CSV files, URL-encoded
    keys) as a bag: one partition per data file, every current object
    once; a report whose file does not match its manifest raises."""
    import gzip
    import hashlib
    import json

    data = tmp_path / "inv/src/cfg/data"
    data.mkdir(parents=True)
    rows = [["b+c", 3], ["%C3%A9", 1], ["d/a", 5], ["old", 7]]
    files = []
    for i, part in enumerate([rows[:2], rows[2:]]):
        text = "".join(
            f'"src","{k}","{n}","2026-11-19T10:00:00.000Z","{"false" if k == "old" else "true"}"\n' for k, n in part
        )
        p = data / f"f{i}.csv.gz"
        p.write_bytes(gzip.compress(text.encode()))
        files.append(
            {
                "key": f"inv/src/cfg/data/f{i}.csv.gz",
                "size": p.stat().st_size,
                "MD5checksum": hashlib.md5(p.read_bytes()).hexdigest(),
            }
        )
    m = tmp_path / "inv/src/cfg/2026-11-20T00-00Z/manifest.json"
    m.parent.mkdir(parents=True)
    m.write_text(
        json.dumps(
            {
                "sourceBucket": "src",
                "fileFormat": "CSV",
                "fileSchema": "Bucket, Key, Size, LastModifiedDate, IsLatest",
                "files": files,
                "creationTimestamp": "1795000000000",
            }
        )
    )
    bag = sd.inventory_bag(str(m))
    assert bag.npartitions == 2
    got = sorted((r["url"], r["size"]) for r in bag.compute())
    assert got == [("s3://src/b c", 3), ("s3://src/d/a", 5), ("s3://src/é", 1)]
    assert sorted(r["key"] for r in sd.inventory_bag(str(m), prefix="d/").compute()) == ["d/a"]
    (data / "f1.csv.gz").write_bytes(gzip.compress(b'"src","x","1","",""\n'))
    with pytest.raises(ValueError, match="manifest"):
        sd.inventory_bag(str(m))


def test_inventory_reports_read_from_their_bucket(client, s3_bucket, gs_bucket):
    """A report named by URL, where the stores write them: an S3 Inventory
    report (data files keyed from the bucket's root) and a GCS report
    (shards beside the manifest). The client copies and checks it whole,
    each task copies its own file; a file swapped for another report's,
    a manifest naming a file that is not there, and a name that would
    leave the copy's folder are refused before any task runs."""
    import gzip
    import hashlib
    import json

    rows = [["b+c", 3], ["%C3%A9", 1], ["d/a", 5]]
    files = []
    for i, part in enumerate([rows[:2], rows[2:]]):
        body = gzip.compress("".join(f'"src","{k}","{n}","2026-11-19T10:00:00.000Z"\n' for k, n in part).encode())
        key = f"inv/src/cfg/data/f{i}.csv.gz"
        shoal.put(f"{s3_bucket}/{key}", body)
        files.append({"key": key, "size": len(body), "MD5checksum": hashlib.md5(body).hexdigest()})
    manifest = {
        "sourceBucket": "src",
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate",
        "files": files,
    }
    m = f"{s3_bucket}/inv/src/cfg/2026-11-20T00-00Z/manifest.json"
    shoal.put(m, json.dumps(manifest).encode())
    bag = sd.inventory_bag(m)
    assert bag.npartitions == 2
    assert sorted((r["url"], r["size"]) for r in bag.compute()) == [
        ("s3://src/b c", 3),
        ("s3://src/d/a", 5),
        ("s3://src/é", 1),
    ]
    shoal.put(f"{s3_bucket}/inv/src/cfg/data/f1.csv.gz", gzip.compress(b'"src","x","1",""\n'))
    with pytest.raises(ValueError, match="manifest"):
        sd.inventory_bag(m)
    for bad, why in [
        ("inv/src/cfg/data/missing.csv.gz", "missing.csv.gz, which is not there"),
        ("inv/..", "cannot be saved"),
    ]:
        shoal.put(m, json.dumps(dict(manifest, files=[dict(files[0], key=bad)])).encode())
        with pytest.raises((FileNotFoundError, ValueError), match=why):
            sd.inventory_bag(m)
    # GCS: shards named beside the manifest, counted against it.
    shards = ["bucket,name,size,updated\ngb,x/1,4,2026-11-19T10:00:00Z\n", "bucket,name,size,updated\ngb,x/2,6,\n"]
    names = [f"rep/cfg_2026_{i}.csv" for i in range(2)]
    for n, text in zip(names, shards, strict=True):
        shoal.put(f"{gs_bucket}/{n}", text.encode())
    gm = f"{gs_bucket}/rep/cfg_2026_manifest.json"
    shoal.put(
        gm,
        json.dumps(
            {"records_processed": 2, "shard_count": 2, "report_shards_file_names": [n.split("/")[1] for n in names]}
        ).encode(),
    )
    assert sorted((r["url"], r["size"]) for r in sd.inventory_bag(gm).compute()) == [
        ("gs://gb/x/1", 4),
        ("gs://gb/x/2", 6),
    ]
    shoal.put(
        gm,
        json.dumps(
            {"records_processed": 3, "shard_count": 2, "report_shards_file_names": [n.split("/")[1] for n in names]}
        ).encode(),
    )
    with pytest.raises(ValueError, match="3 records"):
        sd.inventory_bag(gm)
    # Counts written as strings (proto3's JSON) are checked as numbers;
    # a missing count is refused.
    shoal.put(
        gm,
        json.dumps(
            {"records_processed": "3", "shard_count": "2", "report_shards_file_names": [n.split("/")[1] for n in names]}
        ).encode(),
    )
    with pytest.raises(ValueError, match="3 records"):
        sd.inventory_bag(gm)
    shoal.put(gm, json.dumps({"shard_count": 2, "report_shards_file_names": [n.split("/")[1] for n in names]}).encode())
    with pytest.raises(ValueError, match='no "records_processed"'):
        sd.inventory_bag(gm)


def _s3_inventory(put, rows_per_file: list[list[tuple[str, int]]], bucket: str = "src") -> dict:
    """An S3 Inventory manifest (as a dict) whose gzipped CSV data files
    ``inv/src/cfg/data/f{i}.csv.gz`` hold ``rows_per_file``, each file
    written by ``put(key, body)``."""
    import gzip
    import hashlib

    files = []
    for i, rows in enumerate(rows_per_file):
        body = gzip.compress("".join(f'"{bucket}","{k}","{n}","2026-11-19T10:00:00.000Z"\n' for k, n in rows).encode())
        key = f"inv/src/cfg/data/f{i}.csv.gz"
        put(key, body)
        files.append({"key": key, "size": len(body), "MD5checksum": hashlib.md5(body).hexdigest()})
    return {
        "sourceBucket": bucket,
        "fileFormat": "CSV",
        "fileSchema": "Bucket, Key, Size, LastModifiedDate",
        "files": files,
        "creationTimestamp": "1795000000000",
    }


def test_inventory_tasks_read_the_report_that_was_checked(client, tmp_path, s3_bucket, gs_bucket):
    """Issue 52: ``inventory_bag()`` checks the report, but its tasks used
    to open the manifest and data files again at ``compute()``: a report
    folder refreshed in between gave the new report's rows, unchecked,
    and silently missed the old one's. Each task now reads its file as
    the check saw it (size, MD5, and in a bucket the generation or ETag),
    so a refreshed report raises, naming the manifest, for a local
    report, one on MinIO and one on fake-gcs-server."""
    import json

    old = [[("a", 1), ("b", 2)], [("c", 3), ("d", 4), ("e", 5)]]
    new = [[("a", 1), ("b", 2)], [("x", 9)]]

    # A local report, rewritten in place.
    def put_local(key: str, body: bytes) -> None:
        p = tmp_path / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body)

    m = tmp_path / "inv/src/cfg/2026-11-20T00-00Z/manifest.json"
    m.parent.mkdir(parents=True)
    m.write_text(json.dumps(_s3_inventory(put_local, old)))
    bag = sd.inventory_bag(str(m))
    assert sorted(r["key"] for r in bag.compute()) == ["a", "b", "c", "d", "e"]
    m.write_text(json.dumps(_s3_inventory(put_local, new)))
    with pytest.raises(ValueError, match="not the file checked") as e:
        bag.compute()
    assert str(m) in str(e.value)

    # The same on MinIO: the file replaced in the bucket after the check.
    def put_s3(key: str, body: bytes) -> None:
        shoal.put(f"{s3_bucket}/{key}", body)

    sm = f"{s3_bucket}/inv/src/cfg/2026-11-20T00-00Z/manifest.json"
    shoal.put(sm, json.dumps(_s3_inventory(put_s3, old)).encode())
    bag = sd.inventory_bag(sm)
    assert sorted(r["key"] for r in bag.compute()) == ["a", "b", "c", "d", "e"]
    shoal.put(sm, json.dumps(_s3_inventory(put_s3, new)).encode())
    with pytest.raises(ValueError, match="replaced since|not the file checked") as e:
        bag.compute()
    assert sm in str(e.value)

    # A GCS report: a shard rewritten (a new generation) after the check.
    shards = ["bucket,name,size\ngb,a,1\ngb,b,2\n", "bucket,name,size\ngb,c,3\ngb,d,4\ngb,e,5\n"]
    for i, text in enumerate(shards):
        shoal.put(f"{gs_bucket}/rep/cfg_{i}.csv", text.encode())
    gm = f"{gs_bucket}/rep/cfg_manifest.json"
    shoal.put(
        gm,
        json.dumps(
            {"records_processed": "5", "shard_count": "2", "report_shards_file_names": ["cfg_0.csv", "cfg_1.csv"]}
        ).encode(),
    )
    bag = sd.inventory_bag(gm)
    assert sorted(r["key"] for r in bag.compute()) == ["a", "b", "c", "d", "e"]
    shoal.put(f"{gs_bucket}/rep/cfg_1.csv", b"bucket,name,size\ngb,x,9\n")
    shoal.put(
        gm,
        json.dumps(
            {"records_processed": "3", "shard_count": "2", "report_shards_file_names": ["cfg_0.csv", "cfg_1.csv"]}
        ).encode(),
    )
    with pytest.raises(ValueError, match="replaced since|not the file checked") as e:
        bag.compute()
    assert gm in str(e.value)


def test_parquet_inventory_report_as_partitions(client, tmp_path):
    """An S3 Inventory report in Parquet as pyarrow writes it (snake-case
    columns, keys as they are, a millisecond timestamp, Snappy), two data
    files: one partition per file, older versions and delete markers left
    out; a file swapped for another report's raises."""
    import hashlib
    import json

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    data = tmp_path / "inv/src/cfg/data"
    data.mkdir(parents=True)
    schema = pa.schema(
        [
            ("bucket", pa.string()),
            ("key", pa.string()),
            ("is_latest", pa.bool_()),
            ("is_delete_marker", pa.bool_()),
            ("size", pa.int64()),
            ("last_modified_date", pa.timestamp("ms", tz="UTC")),
            ("e_tag", pa.string()),
        ]
    )
    parts = [
        [("b+c%2B", True, False, 3), ("é", True, False, 1)],
        [("d/a", True, False, 5), ("old", False, False, 7), ("gone", True, True, None)],
    ]
    files = []
    for i, part in enumerate(parts):
        cols = list(zip(*part, strict=True))
        t = pa.table(
            {
                "bucket": ["src"] * len(part),
                "key": list(cols[0]),
                "is_latest": list(cols[1]),
                "is_delete_marker": list(cols[2]),
                "size": list(cols[3]),
                "last_modified_date": [1795000000123] * len(part),
                "e_tag": ["x"] * len(part),
            },
            schema=schema,
        )
        p = data / f"f{i}.parquet"
        pq.write_table(t, p, compression="snappy")
        files.append(
            {
                "key": f"inv/src/cfg/data/f{i}.parquet",
                "size": p.stat().st_size,
                "MD5checksum": hashlib.md5(p.read_bytes()).hexdigest(),
            }
        )
    m = tmp_path / "inv/src/cfg/2026-11-20T00-00Z/manifest.json"
    m.parent.mkdir(parents=True)
    m.write_text(
        json.dumps(
            {
                "sourceBucket": "src",
                "fileFormat": "Parquet",
                "fileSchema": "message s3.inventory { required binary bucket (STRING); "
                "required binary key (STRING); optional int64 size; }",
                "files": files,
                "creationTimestamp": "1795000000000",
            }
        )
    )
    bag = sd.inventory_bag(str(m))
    assert bag.npartitions == 2
    got = sorted((r["url"], r["size"]) for r in bag.compute())
    assert got == [("s3://src/b+c%2B", 3), ("s3://src/d/a", 5), ("s3://src/é", 1)]
    pq.write_table(pa.table({"bucket": ["src"], "key": ["x"]}), data / "f1.parquet")
    with pytest.raises(ValueError, match="manifest"):
        sd.inventory_bag(str(m))


def _toxiproxy(upstream: str, toxics: list[dict]) -> tuple[str, str, Any]:
    """A toxiproxy proxy in front of ``upstream`` (an http URL) with
    ``toxics``; returns (its name, its URL, a function that removes it)."""
    import json
    import urllib.request
    import uuid

    api = os.environ.get("SHOAL_TEST_TOXIPROXY")
    if not api:
        from .conftest import _need

        _need(None, "toxiproxy")

    def call(method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(api + path, data=data, method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as r:
            out = r.read()
        return json.loads(out) if out else {}

    name = f"dask-{uuid.uuid4().hex[:8]}"
    p = call(
        "POST",
        "/proxies",
        {"name": name, "listen": "127.0.0.1:0", "upstream": upstream.split("://", 1)[1], "enabled": True},
    )
    for t in toxics:
        call("POST", f"/proxies/{name}/toxics", t)
    return name, f"http://{p['listen']}", lambda: call("DELETE", f"/proxies/{name}")


def _running_tasks(dask_worker: Any) -> list[str]:
    """The tasks whose threads still run on this worker, cancelled ones
    included."""
    return [
        str(ts.key) for ts in dask_worker.state.tasks.values() if ts.state in ("executing", "long-running", "cancelled")
    ]


@pytest.mark.parametrize("dst_scheme", ["s3", "gs"])
@pytest.mark.parametrize("allowed_failures", [0, 3])
def test_a_worker_lost_mid_copy_leaves_the_object_whole_or_absent(s3_bucket, dst_scheme, allowed_failures):
    """A worker process killed (SIGKILL) while it copies a part of an
    object split across tasks. With Dask's retries (allowed-failures 3)
    the part runs again elsewhere and the object is complete and equal to
    the source; with none (0) the task fails with KilledWorker, the copy
    reports the failure naming the URL, the upload is aborted only after
    every other part task has ended, and nothing is left: no destination,
    no multipart upload, no composite part. The source reads go through a
    bandwidth-limited proxy so the parts are still running when the kill
    comes; which worker and part are hit does not matter to the outcome."""
    import os
    import signal
    import threading
    import time

    import dask

    from .conftest import GCS, S3, _need, new_bucket

    _need(GCS if dst_scheme == "gs" else S3, dst_scheme)
    mib = 1 << 20
    data = os.urandom(24 * mib + 777)
    shoal.put(f"{s3_bucket}/big.bin", data)
    dst_bucket = new_bucket(dst_scheme)
    # 4 MiB/s a connection, each way, on the S3 side (source, and the
    # destination when it is S3).
    slow = [{"type": "bandwidth", "stream": s, "attributes": {"rate": 4096}} for s in ("downstream", "upstream")]
    name, url, drop = _toxiproxy(S3, slow)
    session = shoal.Session(s3_endpoint_url=url)
    with dask.config.set({"distributed.scheduler.allowed-failures": allowed_failures}):
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        c = distributed.Client(cluster)
    killed: list[str] = []
    stop = threading.Event()
    try:
        pids = c.run(os.getpid)

        def kill_one_part() -> None:
            # The first worker seen running a part task is killed, once.
            while not stop.is_set():
                for addr, keys in c.processing().items():
                    if any(str(k).startswith("shoal-copy-part") for k in keys) and addr in pids:
                        os.kill(pids[addr], signal.SIGKILL)
                        killed.append(addr)
                        return
                stop.wait(0.02)

        t = threading.Thread(target=kill_one_part, daemon=True)
        t.start()
        res = sd.copy(
            f"{s3_bucket}/big.bin",
            f"{dst_bucket}/out/",
            client=c,
            bytes_per_task=8 * mib,
            part_size=8 * mib,
            session=session,
        )
        stop.set()
        t.join()
        assert killed, "no part task was seen running"
        if allowed_failures:
            assert res.failures == [] and res.copied == 1 and res.split_objects == 1, res
            assert shoal.cat(f"{dst_bucket}/out/big.bin") == data
        else:
            assert res.copied == 0 and len(res.failures) == 1, res
            msg = res.failures[0][2]
            assert f"{s3_bucket}/big.bin" in msg and "aborted" in msg, msg
        # A part task Dask cancelled keeps running on its worker until its
        # thread returns: wait until no worker runs one, so a part written
        # after the abort would be seen below.
        for _ in range(600):
            if not any(c.run(_running_tasks).values()):
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"part tasks still running: {c.run(_running_tasks)}")
        if not allowed_failures:
            # The destination is a folder: nothing at all was written there.
            assert shoal.ls(f"{dst_bucket}/", recursive=True).objects == []
        assert _uploads_left(dst_bucket) == []
    finally:
        stop.set()
        c.close()
        cluster.close()
        drop()


from .test_versions import _vid, versioned  # noqa: E402,F401 - the fixture, shared


def test_versions_listed_by_the_workers(client, versioned):  # noqa: F811 - the fixture
    """``ls_bag(versions=True)`` on a cluster: the live listing cuts the
    key space into ranges, each range's versions are listed by a task, and
    together they are exactly what one ``shoal.ls(versions=True)`` lists:
    noncurrent versions and the versions (S3: delete marker) of a key with
    no live object too."""
    url = f"{versioned}/v/"
    for i in range(6):
        shoal.put(f"{url}k{i}", b"a")
        shoal.put(f"{url}k{i}", b"bb")
    shoal.rm(f"{url}k0")
    want = sorted((o.key, _vid(o)) for o in shoal.ls(url, recursive=True, versions=True).objects)
    assert len(want) >= 12

    def ids(recs):
        return sorted(
            (r["key"], r["version_id"] if r["version_id"] is not None else str(r["generation"])) for r in recs
        )

    recs = sd.ls_bag(url, client=client, versions=True, keys_per_task=2).compute()
    assert ids(recs) == want
    # A task's range holds every version of its keys and no other key's
    # (a range is cut where a page of the live listing ends; a few keys
    # make one page, so the ranges are cut by hand here).
    s = shoal.Session()
    cuts = ["v/", "v/k1", "v/k3", "v/k3\x00", None]
    parts = [sd._versions_part(s, url, lo, hi) for lo, hi in itertools.pairwise(cuts)]
    assert [sorted({r["key"] for r in p}) for p in parts] == [["v/k0"], ["v/k1", "v/k2"], ["v/k3"], ["v/k4", "v/k5"]]
    assert ids([r for p in parts for r in p]) == want
    assert sum(1 for r in recs if r["is_latest"] and not r["delete_marker"]) == 5
    assert not any(r["key"] == "v/k0" and r["is_latest"] and not r["delete_marker"] for r in recs)
    df = sd.ls_dataframe(url, client=client, versions=True, keys_per_task=2).compute()
    assert len(df) == len(want) and set(df.columns) >= {"version_id", "generation", "is_latest", "delete_marker"}
    # Without a cluster (npartitions given): listed here, same versions.
    local = sd.ls_bag(url, npartitions=3, versions=True).compute()
    assert (
        sorted((r["key"], r["version_id"] if r["version_id"] is not None else str(r["generation"])) for r in local)
        == want
    )


def test_encryption_keys_reach_the_workers(client):
    """A Session's customer key travels with every task: a copy on the
    cluster reads and writes under it (storage-testbench keeps
    ``customerEncryption``), a read on the workers needs it."""
    import base64
    import json
    import urllib.request
    import uuid

    tb = os.environ.get("SHOAL_TEST_GCS_TESTBENCH")
    if not tb:
        pytest.skip("no storage-testbench (SHOAL_TEST_GCS_TESTBENCH)")
    raw = b"0123456789abcdef0123456789ABCDEF"
    key = base64.b64encode(raw).decode()
    s = shoal.Session(gcs_endpoint_url=tb, encryption_key=key)
    bucket = f"gs://py-{uuid.uuid4().hex[:12]}"
    shoal.mb(bucket, session=s)
    data = {f"f{i}": os.urandom(1000 + i) for i in range(4)}
    for name, body in data.items():
        shoal.put(f"{bucket}/in/{name}", body, session=s)
    res = sd.copy(f"{bucket}/in/", f"{bucket}/out/", client=client, npartitions=2, session=s)
    assert (res.copied, res.failures) == (4, [])
    import hashlib

    sha = base64.b64encode(hashlib.sha256(raw).digest()).decode()
    meta = json.load(urllib.request.urlopen(f"{tb}/storage/v1/b/{bucket[5:]}/o/out%2Ff0"))
    assert meta["customerEncryption"]["keySha256"] == sha
    got = sd.read_bag(f"{bucket}/out/", lines=False, session=s).compute()
    assert sorted(got) == sorted(data.values())
    with pytest.raises(shoal.ShoalError):
        sd.read_bag(f"{bucket}/out/", lines=False, gcs_endpoint_url=tb).compute()


def test_a_listing_task_lists_at_its_own_connections(monkeypatch):
    """A listing task started without ``list_connections`` lists with
    :data:`TASK_LIST_CONNECTIONS` (24) requests in flight, beside another
    task or not (it took what 16 a thread had left, 4 beside a running
    task, and kept it after that task ended); ``list_connections`` sets it."""
    import shoal.dask as sd

    asked = []

    def list_range(session, url, **kw):
        asked.append(kw["connections"])
        return [], None, None

    monkeypatch.setattr(sd._shoal, "list_range", list_range)
    sd._list_task(None, "s3://b/p/", "p/", None, 10, "size")
    sd._list_task(None, "s3://b/p/", "p/", None, 10, "size", connections=5)
    assert asked == [24, 5]
    assert sd.TASK_LIST_CONNECTIONS == 24


def test_listing_tasks_take_more_connections_only_where_threads_have_cores_to_spare():
    """24 requests a listing task where every host has two cores or more
    a worker thread (counting every worker on the host), 16 elsewhere and
    when the workers cannot be asked."""
    import shoal.dask as sd

    class Cluster:
        def __init__(self, workers, cores, fail=False):
            self.workers, self.cores, self.fail = workers, cores, fail

        def scheduler_info(self, **kw):
            return {"workers": {a: {"host": h, "nthreads": n} for a, (h, n) in self.workers.items()}}

        def run(self, fn):
            assert fn is sd._cores
            if self.fail:
                raise OSError("worker gone")
            return self.cores

    one = Cluster({"w1": ("10.0.0.1", 1)}, {"w1": 2})
    assert sd._task_connections(one) == sd.TASK_LIST_CONNECTIONS == 24
    four = Cluster({f"w{i}": ("10.0.0.1", 1) for i in range(4)}, {f"w{i}": 2 for i in range(4)})
    assert sd._task_connections(four) == sd.TASK_LIST_CONNECTIONS_BUSY == 16
    two_hosts = Cluster({"a": ("10.0.0.1", 2), "b": ("10.0.0.2", 2)}, {"a": 8, "b": 4})
    assert sd._task_connections(two_hosts) == 24
    one_short = Cluster({"a": ("10.0.0.1", 2), "b": ("10.0.0.2", 2)}, {"a": 8, "b": 3})
    assert sd._task_connections(one_short) == 16
    assert sd._task_connections(Cluster({"w1": ("10.0.0.1", 1)}, {"w1": 2}, fail=True)) == 16
    assert sd._task_connections(Cluster({}, {})) == 16
    assert sd._cores() >= 1


def test_a_listing_tasks_keys_are_cut_into_near_equal_partitions():
    import shoal.dask as sd

    assert sd._part_bounds(0, 100) == []
    assert sd._part_bounds(100, 100) == []
    assert sd._part_bounds(101, 100) == [50]
    assert sd._part_bounds(250, 100) == [83, 166]
    for n in range(1, 2000, 37):
        for per in (1, 7, 100, 999):
            b = [0, *sd._part_bounds(n, per), n]
            sizes = [y - x for x, y in itertools.pairwise(b)]
            assert all(0 < z <= per for z in sizes) and max(sizes) - min(sizes) <= 1, (n, per, sizes)


def test_a_partitions_part_is_its_records_between_the_bounds():
    """``Records.part`` (shoal-py's own Rust tests do not run in CI): the
    records ``lo..hi`` as a partition of their own, clamped as a slice."""
    import struct

    from shoal import _shoal

    keys = ["a", "b/é", "c", "d", "e"]
    ends, at = [], 0
    for k in keys:
        at += len(k.encode())
        ends.append(at)
    wire = (
        "s3://b/",
        "".join(keys),
        struct.pack("<5Q", *ends),
        struct.pack("<5Q", 5, 0, 20, 3, 4),
        struct.pack("<5d", 5.0, float("nan"), 20.0, 3.0, 4.0),
    )
    recs = _shoal.Records._restore(wire)
    parts = [recs.part(0, 2), recs.part(2, 3), recs.part(3, 9)]
    assert [len(p) for p in parts] == [2, 1, 2]
    assert [r for p in parts for r in p] == list(recs)
    assert parts[0][1] == {"url": "s3://b/b/é", "key": "b/é", "size": 0, "updated": None}
    assert parts[2].keys() == ["d", "e"] and parts[2].sizes() == [3, 4]
    assert len(recs.part(4, 2)) == 0 and len(recs.part(7, 9)) == 0
    assert recs.part(0, 5) == recs


def test_the_rest_of_a_listing_task_is_cut_by_the_page_past_its_stop():
    """A task that stopped at the end of a folder (``misc/``, then
    ``warehouse/``, as on shoal-benchserver's ``list-1000000``) says
    nothing of the keys to come: cut by its own last keys, the rest kept
    every key above the cut. The page listed past the stop puts keys on
    both sides; a page with nothing after it is not cut."""
    import bisect

    import shoal.dask as sd
    from shoal import _shoal

    keys = sorted(
        [f"misc/shard-{i % 100:03d}/obj-{i:07d}.bin" for i in range(100_000)]
        + [f"warehouse/events/dt=2024-06-01/hour=13/part-{i:08d}-{i * 7919 % 65536:04x}.json" for i in range(900_000)]
    )
    stop = 100_000  # the task listed every misc/ key
    page = keys[stop : stop + 1_000]
    alphabet = "".join(sorted({c for k in (keys[0], keys[stop - 1], page[0], page[-1]) for c in k}))
    span = keys[sd._split_from(keys.__getitem__, stop)]
    old = _shoal.cut_range(keys[stop - 1], None, prefix="", alphabet=alphabet, page_first=span)
    new = sd._cut_rest((page[0], page[-1], len(page), True), None, 100_000, "", alphabet)
    below = {m: bisect.bisect_left(keys, m) - stop for m in (old, new)}
    assert below[old] == 0, old
    assert 1_000 < below[new] < len(keys) - stop, (new, below[new])
    assert sd._cut_rest((page[0], page[-1], len(page), False), None, 100_000, "", alphabet) is None


def test_the_rest_of_a_listing_task_is_cut_in_decimal_on_counted_keys():
    """Keys numbered by a decimal counter with a hash after it
    (``part-00016162-cf335071``): read in the base of every character seen,
    the counter leaves most of each digit's room empty, and a cut of the
    rest aimed three tasks on landed a fifth of a task on (the other task
    then listed alone). Advanced in decimal, it lands where it is aimed; a
    cut aimed past the end of a range numbered the same way lands
    halfway."""
    import bisect

    import shoal.dask as sd
    from shoal import _shoal

    keys = [f"w/hour=13/part-{i:08d}-{i * 7919 % 65536:04x}.json" for i in range(900_000)]
    stop = 178_200
    page = keys[stop : stop + 1_000]
    alphabet = "".join(sorted({c for k in (keys[0], keys[stop - 1], page[0], page[-1]) for c in k}))
    ahead = (page[0], page[-1], len(page), True)
    cut = sd._cut_rest(ahead, None, 100_000, "w/", alphabet)
    below = bisect.bisect_left(keys, cut) - stop
    aim = int(sd._AHEAD_TASKS * 100_000)
    assert 0.9 * aim <= below <= 1.1 * aim, (cut, below)
    rough = _shoal.cut_range(page[-1], None, prefix="w/", alphabet=alphabet, page_first=page[0], pages=aim // 1_000)
    assert bisect.bisect_left(keys, rough) - stop < aim / 3, rough
    end = keys[stop + 100_000][: len("w/hour=13/part-00000000")]
    half = sd._cut_rest(ahead, end, 100_000, "w/", alphabet)
    assert 45_000 <= bisect.bisect_left(keys, half) - stop <= 55_000, half


def test_a_listing_split_leaves_keys_on_both_sides():
    """The client cuts what is left of a listed range from the spacing of
    the task's last eighth of keys in its last key's folder
    (``_split_from``), so the cut lands about one task's keys past the
    task's last key. On a layout like shoal-benchserver's ``list-1000000``
    (10% under ``misc/``, the rest under one deep prefix; tasks of 100,000
    keys) most splits leave keys on both sides; from the task's whole span
    (what the client used to pass) every cut landed past the last key."""
    import bisect

    import shoal.dask as sd
    from shoal import _shoal

    same = [f"a/{i:06d}" for i in range(100_000)]
    assert [sd._split_from(same.__getitem__, n) for n in (1, 2, 8, 9, 17, 100_000)] == [0, 1, 7, 7, 14, 87_500]
    two = [f"a/{i:06d}" for i in range(99_000)] + [f"b/{i:06d}" for i in range(1_000)]
    assert sd._split_from(two.__getitem__, len(two)) == 99_000  # the last folder's keys only
    assert sd._split_from([*same[:-1], "b/0"].__getitem__, 100_000) == 87_500  # one key alone: not a span
    keys = sorted(
        [f"misc/shard-{i % 100:03d}/obj-{i:07d}.bin" for i in range(100_000)]
        + [f"warehouse/events/dt=2024-06-01/hour=13/part-{i:08d}-{i * 7919 % 65536:04x}.json" for i in range(900_000)]
    )

    def splits(whole_span: bool) -> list[tuple[int, int]]:
        """(keys below the cut, keys above) at each split of one chain of
        tasks of 106,000 keys, going on above the cut, or below it when
        nothing is above."""
        alphabet: set[str] = set()
        start, end, out = 0, None, []
        while start < len(keys) - 100_000 and len(out) < 8:
            last = start + 106_000 - 1  # tasks ran past their budget (the trace's first: 106,000)
            alphabet.update(keys[start] + keys[last])
            at = start if whole_span else start + sd._split_from(lambda i, s=start: keys[s + i], last + 1 - start)
            mid = _shoal.cut_range(keys[last], end, prefix="", alphabet="".join(sorted(alphabet)), page_first=keys[at])
            if mid is None:
                break
            cut = bisect.bisect_left(keys, mid)
            stop = len(keys) if end is None else bisect.bisect_left(keys, end)
            out.append((cut - last - 1, stop - cut))
            start, end = (cut, end) if stop > cut else (last + 1, mid)
        return out

    old, new = splits(True), splits(False)
    empty_old, empty_new = sum(up == 0 for _, up in old), sum(up == 0 for _, up in new)
    assert empty_new < empty_old and empty_new <= len(new) // 2, (old, new)
