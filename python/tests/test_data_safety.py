"""Data safety of the Python API: what a failure, a concurrent writer or a
URL naming a bucket leaves behind. Each destination ends old or new, never
mixed, half written or somewhere else than named."""

from __future__ import annotations

import concurrent.futures
import ctypes
import itertools
import json
import os
import signal
import socket
import urllib.request

import fsspec
import pytest

import shoal
import shoal.dask as sd
from shoal import transfer_manager

from .conftest import GCS, S3


def path_of(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"shoal://{scheme}/{rest}"


def keys(bucket: str) -> list[str]:
    return sorted(o.key for o in shoal.ls(bucket, recursive=True).objects)


def content_type(url: str) -> str | None:
    """The stored Content-Type, asked of the server itself."""
    scheme, _, rest = url.partition("://")
    bucket, _, key = rest.partition("/")
    if scheme == "gs":
        q = urllib.parse.quote(key, safe="")
        with urllib.request.urlopen(f"{GCS}/storage/v1/b/{bucket}/o/{q}") as r:
            return json.load(r).get("contentType")
    import boto3

    s3 = boto3.client("s3", endpoint_url=S3, region_name="us-east-1")
    return s3.head_object(Bucket=bucket, Key=key)["ContentType"]


# 13: an exception inside `with fs.open(..., "wb")` or a transaction
# commits nothing; autocommit=False waits for commit() or discard().


def test_failed_writes_and_rolled_back_transactions_keep_the_old_objects(bucket):
    fs = fsspec.filesystem("shoal")
    p = path_of(f"{bucket}/f")
    shoal.put(f"{bucket}/f", b"old")
    # Past the block size (parts are held) and in text mode too.
    with pytest.raises(RuntimeError):
        with fs.open(p, "wb", block_size=5 << 20) as f:
            f.write(os.urandom(6 << 20))
            raise RuntimeError("half way")
    with pytest.raises(RuntimeError):
        with fs.open(p, "w") as f:
            f.write("half")
            raise RuntimeError("half way")
    assert shoal.cat(f"{bucket}/f") == b"old"

    with pytest.raises(RuntimeError):
        with fs.transaction:
            with fs.open(p, "wb") as f:
                f.write(b"new")
            with fs.open(path_of(f"{bucket}/g"), "wb") as f:
                f.write(b"new g")
            raise RuntimeError("roll back")
    assert shoal.cat(f"{bucket}/f") == b"old"

    f = fs.open(p, "wb", autocommit=False)
    f.write(b"discarded")
    f.close()
    assert shoal.cat(f"{bucket}/f") == b"old"
    f.discard()
    assert shoal.cat(f"{bucket}/f") == b"old"
    # Nothing temporary left behind (no parts, no composite pieces).
    assert keys(bucket) == ["f"]

    with fs.transaction:
        with fs.open(p, "wb") as f:
            f.write(b"new")
        with fs.open(path_of(f"{bucket}/g"), "wb") as f:
            f.write(b"new g")
        assert shoal.cat(f"{bucket}/f") == b"old"  # not before the commit
    assert (shoal.cat(f"{bucket}/f"), shoal.cat(f"{bucket}/g")) == (b"new", b"new g")
    assert keys(bucket) == ["f", "g"]


def test_compressed_writes_commit_only_on_a_clean_close(bucket):
    import gc
    import gzip

    fs = fsspec.filesystem("shoal")
    p = path_of(f"{bucket}/c.gz")
    shoal.put(f"{bucket}/c.gz", b"old")
    for mode in ("wb", "wt"):
        with pytest.raises(RuntimeError):
            with fs.open(p, mode, compression="gzip") as f:
                f.write(b"half" if mode == "wb" else "half")
                raise RuntimeError("half way")
        del f
        gc.collect()
        assert shoal.cat(f"{bucket}/c.gz") == b"old", mode
    with fs.open(p, "wb", compression="gzip") as f:
        f.write(b"whole")
    assert gzip.decompress(shoal.cat(f"{bucket}/c.gz")) == b"whole"
    with fs.open(p, "wt", compression="infer") as f:
        f.write("text")
    assert gzip.decompress(shoal.cat(f"{bucket}/c.gz")) == b"text"
    with fs.open(p, "rt", compression="gzip") as f:
        assert f.read() == "text"
    assert keys(bucket) == ["c.gz"]


# 14: "ab" never replaces an object with the appended bytes alone.


def test_append_keeps_what_was_there_or_is_refused(bucket):
    fs = fsspec.filesystem("shoal")
    p = path_of(f"{bucket}/log")
    shoal.put(f"{bucket}/log", b"hello")
    try:
        with fs.open(p, "ab") as f:
            f.write(b" world")
    except NotImplementedError as e:
        assert f"{bucket}/log" in str(e) and "wb" in str(e)
        assert shoal.cat(f"{bucket}/log") == b"hello"
    else:
        assert shoal.cat(f"{bucket}/log") == b"hello world"
    # Appending to nothing creates the object.
    with fs.open(path_of(f"{bucket}/new"), "ab") as f:
        f.write(b"first")
    assert shoal.cat(f"{bucket}/new") == b"first"


# 15: a file open for reading stays on the version it first saw.


def test_a_file_open_for_reading_never_mixes_two_versions(bucket):
    fs = fsspec.filesystem("shoal")
    p = path_of(f"{bucket}/v")
    # Bigger than what an open reads at once (the footer and the first
    # read-ahead), so the rest is asked of the server after the change.
    old, new = b"a" * (16 << 20), b"b" * (16 << 20)
    shoal.put(f"{bucket}/v", old)
    with fs.open(p, "rb", block_size=64 << 10) as f:
        assert f.read(10) == b"a" * 10
        shoal.put(f"{bucket}/v", new)
        with pytest.raises(shoal.ChangedError, match=f"{bucket}/v"):
            f.read()


# 16: transfer_manager honours its keywords or refuses them by name.


def test_transfer_manager_keywords_are_honoured_or_refused(bucket, tmp_path):
    (tmp_path / "f").write_bytes(b"new")
    shoal.put(f"{bucket}/f", b"old")
    pairs = [(str(tmp_path / "f"), f"{bucket}/f")]
    # google-cloud-storage: the precondition fails (412) and is reported;
    # raised only when asked for by upload_kwargs, not by skip_if_exists.
    for kw in ({"upload_kwargs": {"if_generation_match": 0}}, {"skip_if_exists": True, "raise_exception": True}):
        (r,) = transfer_manager.upload_many(pairs, **kw)
        assert isinstance(r, shoal.PreconditionError), kw
    with pytest.raises(shoal.PreconditionError):
        transfer_manager.upload_many(pairs, upload_kwargs={"if_generation_match": 0}, raise_exception=True)
    assert shoal.cat(f"{bucket}/f") == b"old"
    assert transfer_manager.upload_many([(str(tmp_path / "f"), f"{bucket}/new")], skip_if_exists=True) == [None]

    transfer_manager.upload_many_from_filenames(
        bucket,
        ["f"],
        source_directory=str(tmp_path),
        blob_name_prefix="ct/",
        additional_blob_attributes={"content_type": "text/csv"},
    )
    assert content_type(f"{bucket}/ct/f") == "text/csv"
    transfer_manager.upload_many(pairs, upload_kwargs={"content_type": "text/x-one"})
    assert content_type(f"{bucket}/f") == "text/x-one"
    transfer_manager.upload_chunks_concurrently(str(tmp_path / "f"), f"{bucket}/chunks", content_type="text/x-two")
    assert content_type(f"{bucket}/chunks") == "text/x-two"

    bad = [
        (transfer_manager.upload_many, (pairs,), {"upload_kwargs": {"predefined_acl": "private"}}, "predefined_acl"),
        (
            transfer_manager.download_many,
            ([(f"{bucket}/f", str(tmp_path / "o"))],),
            {"download_kwargs": {"if_generation_match": 1}},
            "if_generation_match",
        ),
        (
            transfer_manager.upload_many_from_filenames,
            (bucket, ["f"]),
            {"source_directory": str(tmp_path), "blob_constructor_kwargs": {"kms_key_name": "k"}},
            "kms_key_name",
        ),
        (
            transfer_manager.upload_many_from_filenames,
            (bucket, ["f"]),
            {"source_directory": str(tmp_path), "additional_blob_attributes": {"cache_control": "no-cache"}},
            "cache_control",
        ),
        (transfer_manager.upload_many, (pairs,), {"worker_type": "bogus"}, "worker_type"),
        (
            transfer_manager.upload_chunks_concurrently,
            (str(tmp_path / "f"), f"{bucket}/c"),
            {"checksum": "bogus"},
            "checksum",
        ),
        (
            transfer_manager.download_chunks_concurrently,
            (f"{bucket}/f", str(tmp_path / "o")),
            {"deadline": -1},
            "deadline",
        ),
        (transfer_manager.download_many, ([(f"{bucket}/f", str(tmp_path / "o"))],), {"max_workers": -5}, "max_workers"),
    ]
    for fn, args, kwargs, name in bad:
        with pytest.raises((ValueError, TypeError, NotImplementedError), match=name):
            fn(*args, **kwargs)
    assert shoal.cat(f"{bucket}/f") == b"new"  # from the content_type upload above
    assert not (tmp_path / "o").exists()


def test_transfer_manager_deadline_cancels_what_is_running(tmp_path):
    # A server that takes connections and never answers: only the
    # deadline can end these calls (the read timeout is a minute away).
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
    (tmp_path / "f").write_bytes(b"x" * 1000)
    try:
        for call in (
            lambda: transfer_manager.upload_many(
                [(str(tmp_path / "f"), "s3://b/f")], deadline=0.5, endpoint_url=endpoint, attempts=1
            ),
            lambda: transfer_manager.download_chunks_concurrently(
                "s3://b/f", str(tmp_path / "o"), deadline=0.5, endpoint_url=endpoint, attempts=1
            ),
        ):
            with pytest.raises(concurrent.futures.TimeoutError, match="deadline"):
                call()
    finally:
        silent.close()
    assert sorted(os.listdir(tmp_path)) == ["f"]  # no working file left


# 17: a URL naming only a bucket is not an object.


def test_bucket_urls_are_not_objects(bucket, tmp_path):
    (tmp_path / "x.txt").write_bytes(b"x")
    with pytest.raises(shoal.InvalidInputError, match="bucket"):
        shoal.put(bucket, b"data")
    with pytest.raises(shoal.InvalidInputError, match="bucket"):
        shoal.download(bucket, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(shoal.InvalidInputError, match="bucket"):
        shoal.rm(bucket)
    with pytest.raises(shoal.InvalidInputError, match="bucket"):
        shoal.cat(bucket)
    # A destination ending in "/" (or a bare bucket) is a folder: the copy
    # lands inside it under the source's name, as with `shoal cp`.
    shoal.copy(tmp_path / "x.txt", f"{bucket}/d/")
    shoal.upload(tmp_path / "x.txt", bucket)
    shoal.copy(f"{bucket}/d/x.txt", f"{bucket}/e/")
    assert keys(bucket) == ["d/x.txt", "e/x.txt", "x.txt"]  # the bucket is still there
    (tmp_path / "dl").mkdir()
    shoal.download(f"{bucket}/x.txt", f"{tmp_path}/dl/")
    assert (tmp_path / "dl" / "x.txt").read_bytes() == b"x"


# 18: Ctrl-C stops a read that is draining data already fetched.


def test_ctrl_c_stops_a_read_that_is_draining(bucket):
    # Python's own Ctrl-C handler, whatever this process inherited: one
    # started in the background by a shell without job control inherits
    # SIGINT ignored, and PyErr_SetInterrupt then does nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_stops_a_draining_read(bucket)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_stops_a_draining_read(bucket):
    data = os.urandom(32 << 20)
    shoal.put(f"{bucket}/big", data)
    interrupt = ctypes.pythonapi.PyErr_SetInterrupt
    interrupt.restype = None
    stream = shoal.read(f"{bucket}/big")
    # Consumed in C (no Python bytecode runs between items, so Python
    # never gets to look at the signal itself), with Ctrl-C "pressed"
    # after the first batch.
    with pytest.raises(KeyboardInterrupt):
        b"".join(filter(None, itertools.chain(itertools.islice(stream, 1), itertools.starmap(interrupt, [()]), stream)))
    # Stopped there: most of the object was never handed over.
    rest = next(stream, None)
    stream.close()
    assert rest is not None


# 19: fsspec `get` never writes two keys into one file; a Dask copy or read
# of nothing is an error, not zero.


def test_get_refuses_keys_that_alias_and_dask_of_nothing_raises(gs_bucket, tmp_path):
    # MinIO refuses `a//b`; fake-gcs-server stores it, like GCS and S3.
    fs = fsspec.filesystem("shoal")
    shoal.put(f"{gs_bucket}/p/a//b", b"double")
    shoal.put(f"{gs_bucket}/p/a/b", b"single")
    dst = tmp_path / "dst"
    with pytest.raises(shoal.InvalidInputError, match="a//b"):
        fs.get(path_of(f"{gs_bucket}/p"), str(dst), recursive=True)
    got = dst / "a" / "b"
    assert not got.exists() or got.read_bytes() == b"single"

    with pytest.raises(FileNotFoundError, match="nothing"):
        sd.copy(f"{gs_bucket}/nothing/", str(tmp_path / "c"))
    with pytest.raises(FileNotFoundError, match="nothing"):
        sd.read_bag(f"{gs_bucket}/nothing/")


# fsspec's own `mv` is copy-then-rm: moving a folder into its own
# subfolder copies p/a to p/sub/p/a, then `rm -r p` removes the copies
# too. shoal's runs as one plan through the engine, which deletes only
# each pair's source once its copy is in place.


def test_fsspec_mv_into_its_own_subfolder_loses_nothing_and_clashing_pairs_are_refused(bucket):
    fs = fsspec.filesystem("shoal")
    for k in ("p/a", "p/b", "p/sub/a"):
        shoal.put(f"{bucket}/{k}", k.encode())
    fs.mv(path_of(f"{bucket}/p"), path_of(f"{bucket}/p/sub"), recursive=True)
    assert keys(bucket) == ["p/sub/p/a", "p/sub/p/b", "p/sub/p/sub/a"]
    assert shoal.cat(f"{bucket}/p/sub/p/sub/a") == b"p/sub/a"

    # Pairs where one writes what another moves away: refused whole.
    before = keys(bucket)
    src = [path_of(f"{bucket}/p/sub/p/a"), path_of(f"{bucket}/p/sub/p/b")]
    with pytest.raises(ValueError, match="pair 2: .* by pair 1"):
        fs.mv(src, [path_of(f"{bucket}/p/sub/p/b"), path_of(f"{bucket}/c")])
    with pytest.raises(ValueError, match="by pair 1"):
        fs.copy(src, [path_of(f"{bucket}/p/sub/p/b"), path_of(f"{bucket}/c")])
    assert keys(bucket) == before

    # A plain move of one file; onto itself is nothing; a missing source
    # is FileNotFoundError.
    fs.mv(path_of(f"{bucket}/p/sub/p/a"), path_of(f"{bucket}/r"))
    assert shoal.cat(f"{bucket}/r") == b"p/a" and "p/sub/p/a" not in keys(bucket)
    fs.mv(path_of(f"{bucket}/r"), path_of(f"{bucket}/r"))
    assert shoal.cat(f"{bucket}/r") == b"p/a"
    with pytest.raises(FileNotFoundError):
        fs.mv(path_of(f"{bucket}/missing"), path_of(f"{bucket}/elsewhere"))


def test_copy_many_pairs_are_one_plan(bucket):
    shoal.put(f"{bucket}/a", b"a")
    shoal.put(f"{bucket}/b", b"b")
    # b is read by pair 2 and written by pair 1: refused, nothing copied.
    with pytest.raises(ValueError, match="pair 2: .*b is read here and written by pair 1"):
        shoal._shoal.copy_many(
            shoal._session.resolve(None, {}), [(f"{bucket}/a", f"{bucket}/b"), (f"{bucket}/b", f"{bucket}/c")]
        )
    assert keys(bucket) == ["a", "b"]
    with pytest.raises(ValueError, match="written here and by pair 1"):
        shoal._shoal.move_many(
            shoal._session.resolve(None, {}), [(f"{bucket}/a", f"{bucket}/c"), (f"{bucket}/b", f"{bucket}/c")]
        )
    assert keys(bucket) == ["a", "b"]


def test_fsspec_get_never_follows_a_link_out_of_the_destination(bucket, tmp_path):
    fs = fsspec.filesystem("shoal")
    shoal.put(f"{bucket}/d/top", b"top")
    shoal.put(f"{bucket}/d/sub/x", b"x")
    dst = tmp_path / "dst"
    outside = tmp_path / "outside"
    dst.mkdir()
    outside.mkdir()
    (dst / "sub").symlink_to(outside)
    with pytest.raises(Exception, match="link"):
        fs.get(path_of(f"{bucket}/d/"), str(dst) + "/", recursive=True)
    assert list(outside.iterdir()) == []
    # Without the link, the same get lands inside.
    (dst / "sub").unlink()
    fs.get(path_of(f"{bucket}/d/"), str(dst) + "/", recursive=True)
    assert (dst / "sub" / "x").read_bytes() == b"x" and (dst / "top").read_bytes() == b"top"
