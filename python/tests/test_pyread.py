"""Reading datasets from Python (issue #41): shoal.arrow's pyarrow
filesystem, and the fsspec file's reads (no HEAD after a listing, a
read-ahead that fetches column chunks exactly, cat_ranges at once)."""

from __future__ import annotations

import gc
import io
import itertools
import time
import weakref

import fsspec
import fsspec.parquet
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import shoal
import shoal.arrow
import shoal.fsspec
from shoal import _shoal


def parquet_bytes(rows: int = 120_000, groups: int = 4) -> bytes:
    t = pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "x": pa.array([i * 0.5 for i in range(rows)]),
            "s": pa.array([f"v{i % 97}" for i in range(rows)]),
        }
    )
    buf = io.BytesIO()
    pq.write_table(t, buf, row_group_size=rows // groups, compression="none")
    return buf.getvalue()


@pytest.fixture
def dataset(bucket):
    data = parquet_bytes()
    for i in range(3):
        shoal.put(f"{bucket}/ds/part-{i}.parquet", data)
    return bucket, data


class StatCounter:
    """Counts the stats (HEADs) shoal's Python layer asks the engine for."""

    def __init__(self, monkeypatch) -> None:
        self.urls: list[str] = []
        for name in ("stat", "stat_async"):
            real = getattr(_shoal, name)

            def spy(session, url, _real=real):
                self.urls.append(url)
                return _real(session, url)

            monkeypatch.setattr(_shoal, name, spy)

    @property
    def n(self) -> int:
        """HEADs of files (a directory's probe, a HEAD answered 404 before
        its listing, is not counted)."""
        return sum(1 for u in self.urls if u.endswith((".parquet", ".bin")))


class CatCounter:
    """Records the reads (url, start, end) shoal's arrow files ask the
    engine for."""

    def __init__(self, monkeypatch) -> None:
        self.reads: list[tuple[str, int | None, int | None]] = []
        for name in ("cat", "cat_buffer"):  # bytes, and pyarrow's read_buffer
            real = getattr(_shoal, name)

            def spy(session, url, *, start=None, end=None, version=None, _real=real):
                self.reads.append((url, start, end))
                return _real(session, url, start=start, end=end, version=version)

            monkeypatch.setattr(_shoal, name, spy)


def test_arrow_reads_a_footer_once_per_version(dataset, monkeypatch):
    bucket, data = dataset
    fs = shoal.arrow.filesystem()
    url = f"{bucket}/ds/part-0.parquet"
    fs.get_file_info(url)
    cats = CatCounter(monkeypatch)
    for _ in range(2):
        with fs.open_input_file(url) as f:
            assert f.read_at(8, len(data) - 8) == data[-8:]
    # The second open took the first one's tail: one request.
    assert len(cats.reads) == 1 and cats.reads[0][2] == len(data)
    # A new version is read anew, never answered from the old one's tail.
    new = parquet_bytes(rows=80_000)
    shoal.put(url, new)
    fs.get_file_info(url)
    with fs.open_input_file(url) as f:
        assert f.read_at(8, len(new) - 8) == new[-8:]
    assert len(cats.reads) == 2
    # A dataset read on a new filesystem (Arrow opens its first file
    # twice, for the schema and for the rows): one footer read per file.
    cats.reads.clear()
    t = pq.read_table(f"{bucket}/ds/", filesystem=shoal.arrow.filesystem(), columns=["x"])
    assert t.num_rows == 80_000 + 2 * 120_000
    footers = [
        u for u, start, end in cats.reads if start is not None and end is not None and end - start == shoal.arrow.FOOTER
    ]
    assert sorted(footers) == [f"{bucket}/ds/part-{i}.parquet" for i in range(3)], cats.reads


def test_cat_fills_the_bytes_it_returns(bucket):
    body = bytes(range(256)) * 12_000
    shoal.put(f"{bucket}/big.bin", body)
    shoal.put(f"{bucket}/empty.bin", b"")
    s = shoal.session()
    assert _shoal.cat(s, f"{bucket}/big.bin") == body
    assert _shoal.cat(s, f"{bucket}/big.bin", start=7, end=3_000_007) == body[7:3_000_007]
    assert _shoal.cat(s, f"{bucket}/big.bin", start=7, end=9_000_007) == body[7:]
    assert _shoal.cat(s, f"{bucket}/big.bin", start=-5) == body[-5:]
    assert _shoal.cat(s, f"{bucket}/empty.bin") == b""
    assert _shoal.cat(s, f"{bucket}/big.bin", start=10, end=10) == b""


def test_cat_buffer_reads_into_memory_it_reuses(bucket):
    """What pyarrow's read_buffer gets: a pyarrow.Buffer over memory shoal
    keeps when pyarrow lets go of it and fills again (a big bytes is new
    pages each time), pinned to a version as cat is."""
    body = bytes(range(256)) * 12_000
    shoal.put(f"{bucket}/big.bin", body)
    shoal.put(f"{bucket}/empty.bin", b"")
    s = shoal.session()
    b = _shoal.cat_buffer(s, f"{bucket}/big.bin", start=7, end=3_000_007)
    assert isinstance(b, pa.Buffer) and b.to_pybytes() == body[7:3_000_007]
    idle = _shoal.read_pool_idle_bytes()  # the pool is the process's
    part = b[10:20]
    del b
    assert _shoal.read_pool_idle_bytes() == idle, "a slice still holds it"
    assert part.to_pybytes() == body[17:27]
    del part
    kept = _shoal.read_pool_idle_bytes()
    assert kept >= idle + 3_000_000
    again = _shoal.cat_buffer(s, f"{bucket}/big.bin", start=100, end=2_900_100)
    assert _shoal.read_pool_idle_bytes() < kept, "the kept memory taken again"
    assert again.to_pybytes() == body[100:2_900_100]
    del again
    assert _shoal.cat_buffer(s, f"{bucket}/big.bin").to_pybytes() == body
    assert _shoal.cat_buffer(s, f"{bucket}/big.bin", start=-5).to_pybytes() == body[-5:]
    assert _shoal.cat_buffer(s, f"{bucket}/empty.bin").to_pybytes() == b""
    version = shoal.stat(f"{bucket}/big.bin").version
    shoal.put(f"{bucket}/big.bin", b"new")
    with pytest.raises(shoal.ChangedError, match="big.bin"):
        _shoal.cat_buffer(s, f"{bucket}/big.bin", start=0, end=10, version=version)


def test_fsspec_read_buffer_and_read_share_a_cache_and_read_gives_bytes(bucket):
    """pyarrow reads a ShoalFile with read_buffer (a pyarrow.Buffer); a
    read of the same file after it still gives bytes, from what is held."""
    fs = fsspec.filesystem("shoal")
    body = bytes(range(256)) * 12_000  # 3 MB: footer first, then exact ranges
    fs.pipe(f"{bucket}/rb.bin", body)
    with fs.open(f"{bucket}/rb.bin") as f:
        f.seek(len(body) - 8)
        assert f.read_buffer(8) == body[-8:]  # the footer read, held as bytes
        f.seek(100)
        got = f.read_buffer(2_000_000)
        assert isinstance(got, pa.Buffer) and got.to_pybytes() == body[100:2_000_100]
        f.seek(200)
        again = f.read(1_000)
        assert isinstance(again, bytes) and again == body[200:1_200]
        assert f.cache.miss_count == 2
        f.seek(2_000_000)
        assert f.read(100) == body[2_000_000:2_000_100]  # the end of what read_buffer fetched
        f.seek(len(body) - 3)
        assert f.read_buffer(-1) == body[-3:]
        assert f.read_buffer(10) == b""


def test_arrow_filesystem_reads_a_dataset_as_users_write_it(dataset, monkeypatch):
    bucket, data = dataset
    fs = shoal.arrow.filesystem()
    heads = StatCounter(monkeypatch)
    t = pq.read_table(f"{bucket}/ds/", filesystem=fs, columns=["x"])
    assert t.num_rows == 360_000 and t.column_names == ["x"]
    assert pa.compute.sum(t["x"]).as_py() == 3 * sum(i * 0.5 for i in range(120_000))
    # The listing gave every file's size and version: no HEAD per file.
    assert heads.n == 0
    f = pq.read_table(f"{bucket}/ds/", filesystem=fs, filters=[("id", "<", 100)])
    assert f.num_rows == 300
    df = pd.read_parquet(f"{bucket}/ds/part-1.parquet", filesystem=fs)
    assert len(df) == 120_000 and list(df.columns) == ["id", "x", "s"]
    # One file: one HEAD (its size and version), none for the open after.
    assert heads.n == 1
    # With a store, paths may be bucket/key (as Dask hands them over).
    scheme, _, name = bucket.partition("://")
    one = shoal.arrow.filesystem(scheme)
    assert pq.read_table(f"{name}/ds", filesystem=one, columns=["id"]).num_rows == 360_000
    assert one.get_file_info(f"{bucket}/ds/part-0.parquet").path == f"{name}/ds/part-0.parquet"


def test_arrow_input_file_reads_ranges_pinned_to_the_version_opened(bucket):
    fs = shoal.arrow.filesystem()
    body = bytes(range(256)) * 12_000  # 3 MB: footer first, then exact ranges
    shoal.put(f"{bucket}/r.bin", body)
    with fs.open_input_file(f"{bucket}/r.bin") as f:
        assert f.size() == len(body)
        assert f.read_at(10, len(body) - 10) == body[-10:]
        assert f.read_at(100, 5) == body[5:105]
        shoal.put(f"{bucket}/r.bin", b"new")
        with pytest.raises(shoal.ChangedError):
            f.read_at(100, 1_000_000)


def test_arrow_bad_input_raises_python_errors_naming_the_url(bucket):
    fs = shoal.arrow.filesystem()
    with pytest.raises(FileNotFoundError, match="nope.parquet"):
        pq.read_table(f"{bucket}/nope.parquet", filesystem=fs)
    shoal.put(f"{bucket}/cut.parquet", parquet_bytes()[:-100])
    with pytest.raises(pa.ArrowInvalid, match="cut.parquet"):
        pq.read_table(f"{bucket}/cut.parquet", filesystem=fs)


def test_fsspec_open_after_a_listing_costs_no_head_and_reads_chunks_exactly(dataset, monkeypatch):
    bucket, data = dataset
    fs = fsspec.filesystem("shoal")
    root = fs._strip_protocol(f"{bucket}/ds")
    heads = StatCounter(monkeypatch)
    t = pq.read_table(root, filesystem=fs, columns=["x"])
    assert t.num_rows == 360_000
    assert heads.n == 0
    # A file read for one column fetched its footer and that column's
    # chunks, not fsspec's 5 MiB blocks.
    fs.ls(root)
    with fs.open(f"{root}/part-0.parquet") as f:
        pf = pq.ParquetFile(f)
        pf.read(columns=["id"])
        md = pf.metadata
        need = sum(md.row_group(g).column(0).total_compressed_size for g in range(md.num_row_groups))
        assert f.cache.total_requested_bytes < need + 64 * 1024 + 4096 < len(data)
    assert heads.n == 0
    # Without a listing or stat first: one HEAD, for size and version.
    fs.invalidate_cache()
    with fs.open(f"{root}/part-0.parquet") as f:
        assert f.read(4) == b"PAR1"
    assert heads.n == 1


def test_fsspec_sequential_reads_grow_a_read_ahead(bucket):
    fs = fsspec.filesystem("shoal")
    body = bytes(range(256)) * 16_384  # 4 MiB
    fs.pipe(f"{bucket}/seq.bin", body)
    with fs.open(f"{bucket}/seq.bin", block_size=2 << 20) as f:
        got = b"".join(iter(lambda: f.read(64 * 1024), b""))
        assert got == body
        # 1 MiB then 2 MiB then the rest: three requests, not 64.
        assert f.cache.miss_count <= 4


def test_fsspec_dataset_read_fetches_each_footer_once(dataset, monkeypatch):
    """pyarrow through its fsspec bridge opens a dataset's first file
    twice (schema, then rows): the second open takes the first one's
    footer, as shoal.arrow's files do; a new version is read anew."""
    bucket, data = dataset
    fs = shoal.fsspec.ShoalFileSystem(skip_instance_cache=True)
    root = fs._strip_protocol(f"{bucket}/ds")
    cats = CatCounter(monkeypatch)
    t = pq.read_table(root, filesystem=fs, columns=["x"])
    assert t.num_rows == 360_000
    tails = [u for u, start, end in cats.reads if end == len(data)]
    assert sorted(tails) == [f"{bucket}/ds/part-{i}.parquet" for i in range(3)], cats.reads
    new = parquet_bytes(rows=80_000)
    shoal.put(f"{bucket}/ds/part-0.parquet", new)
    fs.invalidate_cache()
    cats.reads.clear()
    t = pq.read_table(root, filesystem=fs, columns=["x"])
    assert t.num_rows == 80_000 + 2 * 120_000
    assert sum(1 for u, _, end in cats.reads if u.endswith("part-0.parquet") and end == len(new)) == 1, cats.reads


def test_fsspec_consecutive_big_reads_are_fetched_exactly(bucket, monkeypatch):
    """Arrow's coalesced column chunks of consecutive row groups: each
    read of 1 MiB or more is one request for exactly its bytes, never a
    read-ahead past it (which fetched more and copied every chunk twice)."""
    fs = fsspec.filesystem("shoal")
    body = bytes(range(256)) * 40_960  # 10 MiB
    fs.pipe(f"{bucket}/rg.bin", body)
    fs.ls(bucket)
    cats = CatCounter(monkeypatch)
    cuts = [0, 3 << 20, (5 << 20) + 7, 8 << 20, len(body) - (64 << 10)]
    with fs.open(f"{bucket}/rg.bin") as f:
        for a, b in itertools.pairwise(cuts):
            f.seek(a)
            assert f.read(b - a) == body[a:b]
        assert f.cache.total_requested_bytes == cuts[-1]
    assert [(s, e) for _, s, e in cats.reads] == list(itertools.pairwise(cuts)), cats.reads


class LoopCounter:
    """Counts the calls fsspec's sync wrappers hand to the filesystem's
    event-loop thread."""

    def __init__(self, monkeypatch) -> None:
        self.calls: list[str] = []
        real = fsspec.asyn.sync

        def spy(loop, func, *args, **kwargs):
            self.calls.append(getattr(func, "__name__", repr(func)))
            return real(loop, func, *args, **kwargs)

        monkeypatch.setattr(fsspec.asyn, "sync", spy)


def test_fsspec_dataset_read_makes_the_arrow_paths_requests_on_the_callers_threads(dataset, monkeypatch):
    """pq.read_table through pyarrow's fsspec bridge: info, isdir, find
    and one isfile per file opened are answered without a trip through
    fsspec's event-loop thread, and the engine is asked for the same
    listings, stats and byte ranges as through shoal.arrow."""
    bucket, _ = dataset
    calls: list[tuple] = []
    for name in ("stat", "stat_async", "list_prefix", "list_prefix_async", "cat", "cat_async", "cat_buffer"):
        real = getattr(_shoal, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            what = (_name.removesuffix("_async"), args[1], kwargs.get("start"), kwargs.get("end"))
            calls.append(what)
            return _real(*args, **kwargs)

        monkeypatch.setattr(_shoal, name, spy)
    loop = LoopCounter(monkeypatch)
    fs = shoal.fsspec.ShoalFileSystem(skip_instance_cache=True)
    t = pq.read_table(fs._strip_protocol(f"{bucket}/ds"), filesystem=fs, columns=["x"])
    assert t.num_rows == 360_000
    assert loop.calls == []
    through_fsspec = sorted(c for c in calls if c[0].startswith("cat"))
    listings = [c for c in calls if c[0] == "list_prefix"]
    calls.clear()
    t = pq.read_table(f"{bucket}/ds", filesystem=shoal.arrow.filesystem(), columns=["x"])
    assert t.num_rows == 360_000
    assert through_fsspec == sorted(c for c in calls if c[0].startswith("cat"))
    # A footer and 4 row groups' chunk of x, per file; the chunks into
    # pyarrow's memory pool (read_buffer), the footer kept as bytes.
    assert [c[0] for c in through_fsspec].count("cat_buffer") == 3 * 4
    assert len(through_fsspec) == 3 * 5
    assert len(listings) <= len([c for c in calls if c[0] == "list_prefix"])


def test_fsspec_files_go_when_pyarrow_lets_go_of_them(dataset, monkeypatch):
    """pyarrow never closes the files it reads through its fsspec bridge:
    they must go by reference counting, with the bytes their caches hold,
    not wait for a garbage collection (nor make exit wait for them)."""
    bucket, _ = dataset
    opened: list[weakref.ref] = []
    real = shoal.fsspec.ShoalFile.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        opened.append(weakref.ref(self))

    monkeypatch.setattr(shoal.fsspec.ShoalFile, "__init__", spy)
    fs = shoal.fsspec.ShoalFileSystem(skip_instance_cache=True)
    gc.disable()
    try:
        t = pq.read_table(fs._strip_protocol(f"{bucket}/ds"), filesystem=fs, columns=["x"])
        assert t.num_rows == 360_000
        del t
        deadline = time.monotonic() + 10  # pyarrow lets go on its own threads
        while any(r() is not None for r in opened) and time.monotonic() < deadline:
            time.sleep(0.01)
        left = sum(1 for r in opened if r() is not None)
    finally:
        gc.enable()
    assert len(opened) == 4  # the first file twice (schema, then rows)
    assert left == 0
    # A file read after the filesystem's own references are gone still reads.
    assert fs.open(f"{fs._strip_protocol(bucket)}/ds/part-1.parquet").read(4) == b"PAR1"


def test_fsspec_sync_answers_are_the_async_ones(bucket):
    """info, isfile, isdir, exists and find answered on the caller's
    thread say what the event-loop path says, and an asynchronous
    filesystem still answers through its loop."""
    fs = shoal.fsspec.ShoalFileSystem(skip_instance_cache=True)
    root = fs._strip_protocol(bucket)
    fs.pipe(f"{root}/d/e/f.bin", b"x" * 10)
    fs.pipe(f"{root}/g.bin", b"y")
    paths = [root, f"{root}/d", f"{root}/d/e", f"{root}/d/e/f.bin", f"{root}/g.bin", f"{root}/nope", f"{root}/d/nope"]
    for p in paths:
        fs.invalidate_cache()
        try:
            want = fsspec.asyn.sync(fs.loop, fs._info, p)
        except FileNotFoundError:
            want = None
        fs.invalidate_cache()
        if want is None:
            with pytest.raises(FileNotFoundError):
                fs.info(p)
        else:
            assert fs.info(p) == want
        fs.invalidate_cache()
        assert fs.isfile(p) == (want is not None and want["type"] == "file")
        assert fs.isdir(p) == (want is not None and want["type"] == "directory")
        assert fs.exists(p) == (want is not None)
        for withdirs, detail in itertools.product((False, True), (False, True)):
            fs.invalidate_cache()
            want_found = fsspec.asyn.sync(fs.loop, fs._find, p, withdirs=withdirs, detail=detail)
            fs.invalidate_cache()
            assert fs.find(p, withdirs=withdirs, detail=detail) == want_found
    assert fs.find(root, withdirs=True) == [f"{root}/d", f"{root}/d/e", f"{root}/d/e/f.bin", f"{root}/g.bin"]
    assert fs.find(root, maxdepth=1) == [f"{root}/g.bin"]

    async def asynchronous():
        afs = shoal.fsspec.ShoalFileSystem(asynchronous=True, skip_instance_cache=True)
        assert (await afs._info(f"{root}/g.bin"))["size"] == 1
        with pytest.raises((NotImplementedError, RuntimeError)):
            afs.info(f"{root}/g.bin")  # a sync call on the loop's thread: refused, as fsspec's wrappers refuse it

    import asyncio

    asyncio.run(asynchronous())


def test_fsspec_cat_ranges_at_once_in_order_with_errors_in_place(bucket):
    fs = fsspec.filesystem("shoal")
    body = bytes(range(256)) * 4096
    fs.pipe(f"{bucket}/a.bin", body)
    paths = [f"{bucket}/a.bin", f"{bucket}/missing.bin", f"{bucket}/a.bin", f"{bucket}/a.bin"]
    got = fs.cat_ranges(paths, [1000, 0, 10, 5000], [2000, 10, 20, 5010])
    assert got[0] == body[1000:2000] and got[2] == body[10:20] and got[3] == body[5000:5010]
    assert isinstance(got[1], FileNotFoundError) and "missing.bin" in str(got[1])
    with pytest.raises(FileNotFoundError):
        fs.cat_ranges(paths, [1000, 0, 10, 5000], [2000, 10, 20, 5010], on_error="raise")
    # fsspec.parquet's reader (Dask's) goes through cat_ranges.
    fs.pipe(f"{bucket}/t.parquet", parquet_bytes())
    with fsspec.parquet.open_parquet_file(f"{bucket}/t.parquet", fs=fs, columns=["x"]) as f:
        assert pq.read_table(f, columns=["x"]).num_rows == 120_000


def test_fsspec_open_reads_the_version_listed(bucket):
    fs = fsspec.filesystem("shoal")
    fs.pipe(f"{bucket}/v.bin", b"one" * 100_000)
    fs.ls(bucket)
    # Replaced through the same filesystem: the kept listing is dropped.
    fs.pipe(f"{bucket}/v.bin", b"two" * 100_000)
    with fs.open(f"{bucket}/v.bin") as f:
        assert f.read(3) == b"two"
    fs.ls(bucket)
    shoal.put(f"{bucket}/v.bin", b"three" * 100_000)  # behind its back
    with fs.open(f"{bucket}/v.bin") as f, pytest.raises(shoal.ChangedError):
        f.read(3)
    # The old listing is dropped then: opened again, the new version.
    with fs.open(f"{bucket}/v.bin") as f:
        assert f.read(5) == b"three"


def test_exit_waits_for_the_files_pyarrow_still_holds():
    from shoal import _exit

    class File:
        pass

    before = _exit.live()
    held = File()
    _exit.track(held)
    assert _exit.live() == before + 1
    # Held by the program: exit stops waiting once none goes for `quiet`.
    assert _exit.wait(quiet=0.05, limit=30) == before + 1
    # Released on another thread (as pyarrow's pool releases a file): the
    # wait ends when it is gone, however long `quiet` is.
    import threading

    box = [held]
    del held
    go = threading.Event()

    def release():
        go.wait()
        box.clear()

    t = threading.Thread(target=release)
    t.start()
    go.set()
    assert _exit.wait(quiet=60, limit=60) == before
    t.join()
    # A handler counts only while it outlives its filesystem object.
    handler, fs = File(), File()
    _exit.track(handler, owner=fs)
    assert _exit.live() == before
    del fs
    assert _exit.live() == before + 1
    del handler
    assert _exit.live() == before


def test_exit_waits_for_pyarrows_fsspec_handler_and_no_longer(dataset):
    """A file pyarrow opens through its fsspec bridge counts the bridge's
    ``FSSpecHandler`` (pyarrow's threads release it just after the
    files), once per handler; once the read's files and handler are gone,
    exit waits for nothing (it waited 50 ms past the last file)."""
    import pyarrow.parquet as pq

    import shoal.fsspec
    from shoal import _exit

    bucket, _ = dataset
    before = _exit.live()
    seen = []
    track = _exit.track

    def counting(obj, owner=None):
        seen.append(type(obj).__name__)
        track(obj, owner)

    _exit.track = counting
    try:
        fs = shoal.fsspec.ShoalFileSystem()
        t = pq.read_table(f"{bucket.replace('://', '/', 1)}/ds/", filesystem=fs, columns=["x"])
    finally:
        _exit.track = track
    assert t.num_rows == 360_000
    assert seen.count("FSSpecHandler") == 1, seen
    assert seen.count("ShoalFile") >= 2, seen
    # Released by pyarrow's threads (or already gone): the wait ends when
    # they are, however long `quiet` is; nothing lingers after.
    assert _exit.wait(quiet=60, limit=60) == before
    assert _exit.wait(quiet=60, limit=60) == before


@pytest.mark.parametrize("how", ["arrow", "fsspec"])
def test_a_script_that_ends_right_after_a_read_exits_cleanly(dataset, how):
    """pyarrow releases a read's files (and a dropped filesystem's handler)
    on its own threads after read_table returns; one released while the
    interpreter finalizes aborted the process (exit 134) about half the
    time. Six runs: all must exit 0."""
    import subprocess
    import sys

    bucket, _ = dataset
    fs = "shoal.arrow.filesystem()" if how == "arrow" else "shoal.fsspec.ShoalFileSystem()"
    path = f"{bucket}/ds/" if how == "arrow" else f"{bucket.replace('://', '/', 1)}/ds/"
    # The filesystem dropped when the function returns: pyarrow's threads
    # release the last of it too.
    script = (
        "import pyarrow.parquet as pq, shoal.arrow, shoal.fsspec\n"
        "def read():\n"
        f"    fs = {fs}\n"
        f"    return pq.read_table({path!r}, filesystem=fs, columns=['x'])\n"
        "assert read().num_rows == 360_000\n"
    )
    codes = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True) for _ in range(6)]
    assert [c.returncode for c in codes] == [0] * 6, [c.stderr[-300:] for c in codes if c.returncode]
