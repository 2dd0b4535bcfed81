"""Encryption keywords (issue #54) on the TLS MinIO with a KMS key
(``scripts/servers.sh start s3tls``): ``sse=``, ``sse_kms_key_id=``,
``sse_c_key=`` through the functions, a Session and fsspec."""

from __future__ import annotations

import os
import pickle
import uuid

import pytest

import shoal

from .conftest import _need

TLS = os.environ.get("SHOAL_TEST_S3_TLS")
CA = os.environ.get("SHOAL_TEST_CA_BUNDLE")
KEY_A = b"0123456789abcdef0123456789ABCDEF"
KEY_B = b"ffffffffffffffffeeeeeeeeeeeeeeee"


@pytest.fixture
def tls() -> dict:
    _need(TLS, "s3 over TLS (s3tls)")
    return dict(s3_endpoint_url=TLS, ca_bundle=CA)


def test_sse_c_round_trip_and_wrong_key(tls, tmp_path):
    bucket = f"s3://py-{uuid.uuid4().hex[:12]}"
    shoal.mb(bucket, **tls)
    data = os.urandom(3000)
    shoal.put(f"{bucket}/k", data, sse_c_key=KEY_A, **tls)
    assert shoal.cat(f"{bucket}/k", sse_c_key=KEY_A, **tls) == data
    assert shoal.cat(f"{bucket}/k", 10, 20, sse_c_key=KEY_A, **tls) == data[10:20]
    assert shoal.stat(f"{bucket}/k", sse_c_key=KEY_A, **tls).size == len(data)
    src = tmp_path / "up"
    src.write_bytes(data * 100)
    shoal.upload(str(src), f"{bucket}/up", sse_c_key=KEY_A, **tls)
    shoal.download(f"{bucket}/up", tmp_path / "down", sse_c_key=KEY_A, **tls)
    assert (tmp_path / "down").read_bytes() == data * 100
    # No key, or another: an error naming what to give, never the key.
    with pytest.raises(shoal.ShoalError) as e:
        shoal.cat(f"{bucket}/k", **tls)
    assert "sse_c_key" in str(e.value)
    with pytest.raises(shoal.ShoalError) as e:
        shoal.cat(f"{bucket}/k", sse_c_key=KEY_B, **tls)
    assert "MD5" in str(e.value) and KEY_B.decode() not in str(e.value)
    # A session shows no key, and carries it through pickling (Dask).
    s = shoal.Session(sse_c_key=KEY_A, **tls)
    assert KEY_A.decode() not in repr(s)
    assert shoal.cat(f"{bucket}/k", session=pickle.loads(pickle.dumps(s))) == data


def test_sse_kms_and_fsspec(tls):
    bucket = f"s3://py-{uuid.uuid4().hex[:12]}"
    shoal.mb(bucket, **tls)
    shoal.put(f"{bucket}/kms", b"x" * 100, sse="aws:kms", sse_kms_key_id="shoal-test-key", **tls)
    assert shoal.cat(f"{bucket}/kms", **tls) == b"x" * 100
    from shoal.fsspec import ShoalS3FileSystem

    # Storage options, as pandas or Dask pass them.
    fs = ShoalS3FileSystem(sse_c_key=KEY_A, **tls)
    fs.pipe_file(f"{bucket}/viafs", b"hello")
    assert fs.cat_file(f"{bucket}/viafs") == b"hello"
    assert shoal.cat(f"{bucket}/viafs", sse_c_key=KEY_A, **tls) == b"hello"
    with pytest.raises(ValueError):
        shoal.Session(sse_c_key=b"short")
    with pytest.raises(ValueError):
        shoal.Session(sse="aes")


def test_gcs_csek_on_testbench():
    tb = os.environ.get("SHOAL_TEST_GCS_TESTBENCH")
    if not tb:
        pytest.skip("no storage-testbench (SHOAL_TEST_GCS_TESTBENCH)")
    import base64

    opts = dict(gcs_endpoint_url=tb)
    bucket = f"gs://py-{uuid.uuid4().hex[:12]}"
    shoal.mb(bucket, **opts)
    key = base64.b64encode(KEY_A).decode()
    data = os.urandom(5000)
    shoal.put(f"{bucket}/k", data, encryption_key=key, **opts)
    assert shoal.cat(f"{bucket}/k", encryption_key=key, **opts) == data
    assert shoal.cat(f"{bucket}/k", 5, 50, encryption_key=key, **opts) == data[5:50]
    with pytest.raises(shoal.ShoalError) as e:
        shoal.cat(f"{bucket}/k", **opts)
    assert "encryption" in str(e.value)
    assert key not in str(e.value)
    # (A wrong key is not tried: storage-testbench checks a key only against
    # the SHA256 header sent with it; shoal-gcs tests/decryption_keys.rs.)
    # decryption_keys=, as gcloud's --decryption-keys: objects under
    # another key, and under none, are read with theirs.
    other = base64.b64encode(KEY_B).decode()
    shoal.put(f"{bucket}/b", b"under b", encryption_key=other, **opts)
    shoal.put(f"{bucket}/plain", b"plain", **opts)
    s = shoal.Session(encryption_key=key, decryption_keys=[other], **opts)
    assert shoal.cat(f"{bucket}/k", session=s) == data
    assert shoal.cat(f"{bucket}/b", session=s) == b"under b"
    assert shoal.cat(f"{bucket}/plain", session=s) == b"plain"
    assert shoal.cat(f"{bucket}/b", decryption_keys=[other], **opts) == b"under b"
    for shown in (repr(s), repr(pickle.loads(pickle.dumps(s)))):
        assert key not in shown and other not in shown
    with pytest.raises(ValueError) as e:
        shoal.Session(decryption_keys=[other, "c2VjcmV0"])
    assert "c2VjcmV0" not in str(e.value)
