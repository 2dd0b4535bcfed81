"""Named stores (issue #55) from Python: a config file's ``[stores.NAME]``
as ``NAME://bucket/key`` in the API and ``shoal://NAME/bucket/key`` in
fsspec; two S3 endpoints (MinIO, moto) and fake-gcs-server side by side."""

from __future__ import annotations

import os
import uuid

import fsspec
import pytest

import shoal
import shoal.fsspec
from shoal import _shoal

from .conftest import GCS, S3, _need

MOTO = os.environ.get("SHOAL_TEST_MOTO")
MOTO_SECRET = "py-named-secret-Kq7"


@pytest.fixture
def named(tmp_path, monkeypatch):
    """A session over a config file of three stores: minio, moto, fake-gcs."""
    _need(S3, "s3")
    _need(MOTO, "moto")
    _need(GCS, "gs")
    config = tmp_path / "config.toml"
    key = os.environ.get("SHOAL_TEST_S3_KEY", "minioadmin")
    secret = os.environ.get("SHOAL_TEST_S3_SECRET", "minioadmin")
    config.write_text(
        f'[stores.py-minio]\ntype = "s3"\nendpoint_url = "{S3}"\n'
        f'access_key_id = "{key}"\nsecret_access_key = "{secret}"\n\n'
        f'[stores.py-moto]\ntype = "s3"\nendpoint_url = "{MOTO}"\n'
        f'access_key_id = "AKIDPYNAMED"\nsecret_access_key = "{MOTO_SECRET}"\n\n'
        f'[stores.py-gcs]\ntype = "gs"\nendpoint_url = "{GCS}"\nno_sign_request = true\n'
    )
    monkeypatch.setenv("SHOAL_CONFIG", str(config))
    return _shoal.Session()


def bucket(session, store: str) -> str:
    url = f"{store}://py-{uuid.uuid4().hex[:12]}"
    shoal.mb(url, session=session)
    return url


def test_api_copies_between_named_stores(named, tmp_path):
    minio, moto, gcs = (bucket(named, s) for s in ("py-minio", "py-moto", "py-gcs"))
    data = os.urandom(3 << 20) + b"tail"
    shoal.put(f"{minio}/a.bin", data, session=named)
    shoal.copy(f"{minio}/a.bin", f"{moto}/b.bin", session=named)
    shoal.copy(f"{moto}/b.bin", f"{gcs}/c.bin", session=named)
    assert shoal.cat(f"{gcs}/c.bin", session=named) == data
    assert [o.url for o in shoal.ls(f"{moto}/", session=named).objects] == [f"{moto}/b.bin"]
    assert f"{moto}/" in shoal.ls("py-moto://", session=named).prefixes
    shoal.download(f"{moto}/b.bin", tmp_path / "back.bin", session=named)
    assert (tmp_path / "back.bin").read_bytes() == data
    assert MOTO_SECRET not in repr(named)


def test_fsspec_shoal_protocol_with_a_named_store(named):
    moto = bucket(named, "py-moto")
    name = moto.partition("://")[2]
    fs = fsspec.filesystem("shoal", session=named)
    root = f"shoal://py-moto/{name}"
    fs.pipe(f"{root}/dir/x.txt", b"hello")
    assert fs.cat(f"{root}/dir/x.txt") == b"hello"
    assert fs.cat(f"{moto}/dir/x.txt") == b"hello"
    assert fs.find(root) == [f"py-moto/{name}/dir/x.txt"]
    assert f"py-moto/{name}" in fs.ls("py-moto", detail=False)
    fs.rm(f"{root}/dir", recursive=True)
    assert not fs.exists(f"{root}/dir/x.txt")


def test_a_bad_config_file_names_file_and_line(tmp_path, monkeypatch):
    config = tmp_path / "bad.toml"
    config.write_text('[stores.x]\ntype = "s3"\nsecret_acess_key = "py-hush-hush"\n')
    monkeypatch.setenv("SHOAL_CONFIG", str(config))
    with pytest.raises(shoal.errors.InvalidInputError) as e:
        _shoal.Session()
    msg = str(e.value)
    assert str(config) in msg and "line 3" in msg and "secret_acess_key" in msg
    assert "py-hush-hush" not in msg
