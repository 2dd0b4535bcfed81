"""The plain functions against fake-gcs-server and MinIO."""

from __future__ import annotations

import asyncio
import os

import pytest

import shoal


def test_put_cat_stat_round_trip(bucket):
    data = os.urandom(100_000)
    assert shoal.put(f"{bucket}/d/blob.bin", data) == len(data)
    assert shoal.cat(f"{bucket}/d/blob.bin") == data
    assert shoal.cat(f"{bucket}/d/blob.bin", 10, 20) == data[10:20]
    assert shoal.cat(f"{bucket}/d/blob.bin", -5) == data[-5:]
    info = shoal.stat(f"{bucket}/d/blob.bin")
    assert (info.size, info.key, info.url) == (len(data), "d/blob.bin", f"{bucket}/d/blob.bin")
    assert info.crc32c is not None and len(info.crc32c) == 8


def test_keys_are_kept_verbatim(bucket):
    # Spaces, unicode, % and + must not be decoded or normalised.
    key = "odd names/ünï cødé %41+b.txt"
    shoal.put(f"{bucket}/{key}", b"x")
    assert [o.key for o in shoal.ls(f"{bucket}/odd names/").objects] == [key]
    assert shoal.cat(f"{bucket}/{key}") == b"x"


def test_ls_one_level_recursive_and_glob(bucket):
    for k in ["a/1.txt", "a/2.csv", "a/b/3.txt", "top.txt"]:
        shoal.put(f"{bucket}/{k}", k.encode())
    top = shoal.ls(bucket)
    assert [o.key for o in top.objects] == ["top.txt"]
    assert top.prefixes == [f"{bucket}/a/"]
    assert shoal.ls(f"{bucket}/a").urls() == [f"{bucket}/a/1.txt", f"{bucket}/a/2.csv", f"{bucket}/a/b/"]
    assert sorted(o.key for o in shoal.ls(bucket, recursive=True).objects) == [
        "a/1.txt",
        "a/2.csv",
        "a/b/3.txt",
        "top.txt",
    ]
    assert [o.key for o in shoal.glob(f"{bucket}/a/*.txt")] == ["a/1.txt"]
    assert [o.key for o in shoal.glob(f"{bucket}/**.txt")] == ["a/1.txt", "a/b/3.txt", "top.txt"]
    assert shoal.glob(f"{bucket}/nothing*") == []


def test_du_totals_and_groups(bucket):
    shoal.put(f"{bucket}/x/a.txt", b"12345")
    shoal.put(f"{bucket}/x/b.csv", b"123")
    shoal.put(f"{bucket}/y/c.txt", b"1")
    d = shoal.du(bucket)
    assert (d.bytes, d.objects) == (9, 3)
    by_prefix = shoal.du(bucket, group_by="prefix:1")
    assert by_prefix.groups == {f"{bucket}/x/": (8, 2), f"{bucket}/y/": (1, 1)}
    assert shoal.du(bucket, group_by="suffix").groups == {".txt": (6, 2), ".csv": (3, 1)}


def test_read_streams_objects_in_key_order_and_lines(bucket):
    shoal.put(f"{bucket}/logs/2.log", b"c\nd")  # no final newline: ends with its object
    shoal.put(f"{bucket}/logs/1.log", b"a\nb\n")
    shoal.put(f"{bucket}/logs/3.log", b"")
    assert b"".join(shoal.read(f"{bucket}/logs/*.log")) == b"a\nb\nc\nd"
    assert list(shoal.read(f"{bucket}/logs/*.log", lines=True)) == [b"a", b"b", b"c", b"d"]


def test_read_big_object_in_chunks(bucket):
    data = os.urandom(12 << 20)  # past the whole-object prefetch limit: streamed
    shoal.put(f"{bucket}/big", data)
    chunks = list(shoal.read(f"{bucket}/big"))
    assert b"".join(chunks) == data


def test_read_missing_object_raises_not_found(bucket):
    with pytest.raises(FileNotFoundError):
        list(shoal.read(f"{bucket}/missing"))
    with pytest.raises(shoal.NotFoundError, match="matched no objects"):
        list(shoal.read(f"{bucket}/missing*"))


def test_upload_download_copy_rm(bucket, tmp_path):
    src = tmp_path / "src.bin"
    data = os.urandom(3 << 20)
    src.write_bytes(data)
    r = shoal.upload(src, f"{bucket}/f.bin")
    assert r.bytes == len(data)
    r = shoal.download(f"{bucket}/f.bin", tmp_path / "back.bin", chunk_size=1 << 20)
    assert (tmp_path / "back.bin").read_bytes() == data
    assert r.verified == "crc32c" and r.pieces > 1
    assert shoal.copy(f"{bucket}/f.bin", f"{bucket}/g.bin") == len(data)
    assert shoal.cat(f"{bucket}/g.bin") == data
    shoal.rm([f"{bucket}/f.bin", f"{bucket}/g.bin"])
    assert shoal.ls(bucket).objects == []


def test_cloud_to_cloud_copy_between_servers(gs_bucket, s3_bucket):
    shoal.put(f"{gs_bucket}/k", b"across")
    shoal.copy(f"{gs_bucket}/k", f"{s3_bucket}/k")
    assert shoal.cat(f"{s3_bucket}/k") == b"across"


def test_copy_many_reports_each_item(bucket, tmp_path):
    (tmp_path / "ok").write_bytes(b"ok")
    results = shoal.copy_many([(tmp_path / "ok", f"{bucket}/ok"), (tmp_path / "missing", f"{bucket}/missing")])
    assert results[0] == 2
    assert isinstance(results[1], FileNotFoundError) and isinstance(results[1], shoal.ShoalError)


def test_errors_are_typed_one_line_and_carry_the_url(bucket):
    with pytest.raises(shoal.NotFoundError) as e:
        shoal.stat(f"{bucket}/nope")
    assert isinstance(e.value, FileNotFoundError)
    assert (e.value.kind, e.value.url, e.value.status) == ("not_found", f"{bucket}/nope", 404)
    assert "\n" not in str(e.value) and f"{bucket}/nope" in str(e.value)
    with pytest.raises(ValueError, match="unknown scheme"):
        shoal.stat("ftp://x/y")
    with pytest.raises(shoal.InvalidInputError, match="local path"):
        shoal.stat("/tmp/x")
    with pytest.raises(FileNotFoundError):
        shoal.ls(f"{bucket[:5]}no-such-bucket-{bucket[-6:]}/")


def test_unreachable_endpoint_is_a_connect_error():
    with pytest.raises(shoal.ConnectError) as e:
        shoal.stat("s3://b/k", endpoint_url="http://127.0.0.1:9", attempts=1)
    assert isinstance(e.value, ConnectionError)


def test_async_variants(bucket):
    async def main():
        await shoal.put_async(f"{bucket}/a/1", b"one")
        await asyncio.gather(*(shoal.put_async(f"{bucket}/a/{i}", b"%d" % i) for i in range(2, 6)))
        listing = await shoal.ls_async(f"{bucket}/a/")
        data = await shoal.cat_async(f"{bucket}/a/1")
        info = await shoal.stat_async(f"{bucket}/a/1")
        lines = [x async for x in shoal.read_async(f"{bucket}/a/*", lines=True)]
        d = await shoal.du_async(bucket)
        with pytest.raises(FileNotFoundError):
            await shoal.cat_async(f"{bucket}/nope")
        await shoal.rm_async(f"{bucket}/a/1")
        return listing, data, info, lines, d

    listing, data, info, lines, d = asyncio.run(main())
    assert len(listing.objects) == 5 and data == b"one" and info.size == 3
    assert lines == [b"one", b"2", b"3", b"4", b"5"]
    assert d.objects == 5
    assert [o.key for o in shoal.ls(f"{bucket}/a/").objects] == ["a/2", "a/3", "a/4", "a/5"]


def test_blocking_calls_release_the_gil():
    # The server answering the call is Python code in another thread of this
    # process: it can only answer while the call has the GIL released.
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"name": "k", "bucket": "b", "size": "7", "generation": "1"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        info = shoal.stat("gs://b/k", gcs_endpoint_url=endpoint, no_sign_request=True, attempts=1)
        assert info.size == 7
    finally:
        server.shutdown()


def test_session_keywords_and_pickling(bucket):
    import pickle

    s = shoal.session(workers=3)
    assert s is shoal.session(workers=3)
    assert s.workers == 3
    t = pickle.loads(pickle.dumps(s))
    assert t.kwargs == s.kwargs
    shoal.put(f"{bucket}/k", b"v", session=t)
    assert shoal.cat(f"{bucket}/k", session=s) == b"v"
    with pytest.raises(ValueError, match="key and secret"):
        shoal.Session(key="only")


def test_session_timeouts():
    s = shoal.Session(read_timeout=30, connect_timeout=2.5)
    assert s.kwargs["read_timeout"] == 30 and s.kwargs["connect_timeout"] == 2.5
    for bad in (0, -1, float("nan"), 3601):
        with pytest.raises(ValueError, match="connect_timeout"):
            shoal.Session(connect_timeout=bad)
    # Nothing listens on port 9: the connect is refused, not timed out,
    # whatever the limit; the keyword is taken by a store.
    with pytest.raises(shoal.ShoalError):
        shoal.stat("s3://b/k", endpoint_url="http://127.0.0.1:9", attempts=1, connect_timeout=1)


def _boto3_s3():
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=Config(request_checksum_calculation="when_supported"),
    )


def test_checksums_boto3_leaves_are_shown_and_checked(s3_bucket, tmp_path):
    """boto3 stores a CRC32 on one-request uploads and a COMPOSITE CRC32
    (the CRC of the parts' CRCs) on multipart ones: both are in the
    ObjectInfo, and a download is checked against them."""
    import zlib

    from boto3.s3.transfer import TransferConfig

    s3 = _boto3_s3()
    bucket = s3_bucket.removeprefix("s3://")
    small = os.urandom(100_000)
    s3.put_object(Bucket=bucket, Key="one.bin", Body=small, ChecksumAlgorithm="CRC32")
    big = os.urandom(11 << 20)
    (tmp_path / "big.bin").write_bytes(big)
    five = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
    s3.upload_file(str(tmp_path / "big.bin"), bucket, "multi.bin", Config=five)

    one = shoal.stat(f"{s3_bucket}/one.bin")
    assert one.crc32 == f"{zlib.crc32(small):08x}"
    assert (one.crc32c, one.crc64nvme, one.composite) == (None, None, None)
    multi = shoal.stat(f"{s3_bucket}/multi.bin")
    assert multi.composite is not None and multi.composite.endswith("-3"), multi.composite
    assert multi.composite_algorithm == "CRC32"
    assert (multi.crc32c, multi.crc32) == (None, None)

    r = shoal.download(f"{s3_bucket}/one.bin", tmp_path / "one.out")
    assert r.verified == "crc32"
    r = shoal.download(f"{s3_bucket}/multi.bin", tmp_path / "multi.out", chunk_size=2 << 20)
    assert (tmp_path / "multi.out").read_bytes() == big
    assert r.verified == "crc32 per part" and r.pieces > 1
    # Listed (no checksum in the listing) and read in slices.
    assert b"".join(shoal.read(f"{s3_bucket}/m*", read_ahead=4 << 20)) == big


def test_iter_objects_streams_a_listing_in_key_order(s3_bucket, gs_bucket):
    # 1,200 objects: more than one listing page, handed over page by page.
    keys = sorted(f"d/{i:05}" for i in range(1200))
    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda k: shoal.put(f"{s3_bucket}/{k}", b"x"), keys))
    it = shoal.iter_objects(f"{s3_bucket}/d/", recursive=True, detail="name")
    assert iter(it) is it, "an iterator, not a list"
    assert [o.key for o in it] == keys
    assert [o.key for o in shoal.iter_objects(f"{s3_bucket}/d/0000*")] == keys[:10]
    # Stopping early is fine (the listing is cancelled).
    first = next(iter(shoal.iter_objects(f"{s3_bucket}/d/", recursive=True)))
    assert first.key == keys[0] and first.size == 1

    async def collect():
        return [o.key async for o in shoal.iter_objects_async(f"{s3_bucket}/d/00*", recursive=True)]

    assert asyncio.run(collect()) == keys[:1000]
    with pytest.raises(shoal.NotFoundError):
        list(shoal.iter_objects(f"{s3_bucket}/nothing-*"))
    shoal.put(f"{gs_bucket}/a/b", b"yz")
    assert [(o.key, o.size) for o in shoal.iter_objects(f"{gs_bucket}/**")] == [("a/b", 2)]
