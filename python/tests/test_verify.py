"""Whole-object reads from Python are checked against whichever checksum
the store keeps, as ``shoal cp`` checks a download: objects boto3 leaves
on MinIO with only an MD5 (its ETag), a CRC32 or a composite
CRC32 (CRC32C needs botocore[crt] too), read by ``shoal.read``, ``shoal.cat`` and fsspec; and a byte
flipped on the way (by tests/proxies.py) is an IntegrityError.
CRC64NVME and CRC32C composites are left to the Rust tests
(other_checksums.rs, composite_checksums.rs): boto3 writes those only
with botocore[crt]."""

from __future__ import annotations

import os

import fsspec
import pytest

import shoal
from shoal import _shoal
from shoal.errors import IntegrityError
from shoal.fsspec import ShoalFileSystem

from .proxies import PROXY_VARS, RelayProxy


def _boto3_s3(calculation: str = "when_supported"):
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=Config(request_checksum_calculation=calculation),
    )


def _reads(url: str) -> list[bytes]:
    """The object read whole every way Python can."""
    fs = fsspec.filesystem("shoal")
    with fs.open(url, "rb") as f:
        opened = f.read()
    return [
        b"".join(shoal.read(url)),
        shoal.cat(url),
        fs.cat(url),
        fs.cat_file(url),
        opened,
    ]


def test_md5_crc32_and_composite_objects_read_whole(s3_bucket):
    s3 = _boto3_s3("when_required")
    bucket = s3_bucket.removeprefix("s3://")
    body = os.urandom(3 << 20)
    # No checksum asked for: MinIO keeps the MD5 (the ETag) only.
    s3.put_object(Bucket=bucket, Key="md5.bin", Body=body)
    md5_only = shoal.stat(f"{s3_bucket}/md5.bin")
    assert md5_only.md5 is not None
    assert (md5_only.crc32c, md5_only.crc32, md5_only.crc64nvme, md5_only.composite) == (None, None, None, None)
    s3 = _boto3_s3()
    s3.put_object(Bucket=bucket, Key="crc32.bin", Body=body, ChecksumAlgorithm="CRC32")
    assert shoal.stat(f"{s3_bucket}/crc32.bin").crc32 is not None
    big = os.urandom(11 << 20)
    up = s3.create_multipart_upload(Bucket=bucket, Key="multi.bin", ChecksumAlgorithm="CRC32")
    parts = []
    for n, at in enumerate(range(0, len(big), 5 << 20), 1):
        chunk = big[at : at + (5 << 20)]
        r = s3.upload_part(
            Bucket=bucket, Key="multi.bin", UploadId=up["UploadId"], PartNumber=n, Body=chunk, ChecksumAlgorithm="CRC32"
        )
        parts.append({"PartNumber": n, "ETag": r["ETag"], "ChecksumCRC32": r["ChecksumCRC32"]})
    s3.complete_multipart_upload(
        Bucket=bucket, Key="multi.bin", UploadId=up["UploadId"], MultipartUpload={"Parts": parts}
    )
    multi = shoal.stat(f"{s3_bucket}/multi.bin")
    assert multi.composite is not None and multi.composite.endswith("-3"), multi.composite
    assert multi.composite_algorithm == "CRC32"
    for key, want in [("md5.bin", body), ("crc32.bin", body), ("multi.bin", big)]:
        for i, got in enumerate(_reads(f"{s3_bucket}/{key}")):
            assert got == want, (key, i)


class FlippingProxy(RelayProxy):
    """Flips one byte of the first response body on each connection (the
    ``at``-th)."""

    def __init__(self, at: int = 10) -> None:
        self.at = at
        self.flipped = 0
        super().__init__()

    def back(self, data: bytes, state: dict) -> bytes:
        if state.get("done"):
            return data
        seen = state["seen"] = state.get("seen", b"") + data
        end = seen.find(b"\r\n\r\n")
        if end >= 0 and len(seen) > end + 4 + self.at:
            i = len(data) - (len(seen) - (end + 4 + self.at))
            data = data[:i] + bytes([data[i] ^ 1]) + data[i + 1 :]
            state["done"] = True
            with self.lock:
                self.flipped += 1
        return data


@pytest.fixture
def flipping(monkeypatch):
    for v in PROXY_VARS:
        monkeypatch.delenv(v, raising=False)
    p = FlippingProxy()
    yield p
    p.close()


def test_a_flipped_byte_of_an_md5_only_object_is_an_integrity_error(s3_bucket, flipping):
    """Before, only a CRC32C was checked: an MD5-only object passed on its
    length, damaged."""
    s3 = _boto3_s3("when_required")
    bucket = s3_bucket.removeprefix("s3://")
    body = os.urandom(100_000)
    s3.put_object(Bucket=bucket, Key="md5.bin", Body=body)
    url = f"{s3_bucket}/md5.bin"
    assert shoal.cat(url) == body  # the path itself is fine
    s = _shoal.Session(proxy=flipping.url)
    with pytest.raises(IntegrityError, match="MD5 mismatch"):
        shoal.cat(url, session=s)
    assert flipping.flipped == 1
    # fsspec's cat of several objects is checked the same way.
    fs = ShoalFileSystem(session=_shoal.Session(proxy=flipping.url), skip_instance_cache=True)
    with pytest.raises(IntegrityError, match="MD5 mismatch"):
        fs.cat([url, url])
    # A range of it cannot be checked against the whole object's MD5: it
    # is read by its length (the flipped byte passes).
    part = shoal.cat(url, 5, 50_000, session=_shoal.Session(proxy=flipping.url))
    assert len(part) == 50_000 - 5 and part != body[5:50_000]
