"""shoal.dask on a real distributed.LocalCluster with 2 worker processes."""

from __future__ import annotations

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
    assert sorted(o.key[4:] for o in shoal.glob(f"{bucket}/out/**")) == sorted(o.key[3:] for o in shoal.glob(f"{bucket}/in/**"))
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
    mirror = sorted(o.key[len("mirror/"):] for o in shoal.ls(dst, recursive=True).objects)
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
