"""Object versions from Python (``versions=True``, ``version_id=``) and
fsspec (``version_aware=True``), on buckets with versioning on: MinIO
(``PutBucketVersioning``) and fake-gcs-server (a bucket created with
``versioning.enabled``). What the stores hold is checked with another
client (boto3, the GCS JSON API), not with shoal."""

from __future__ import annotations

import json
import os
import urllib.request
import uuid

import pytest

import shoal
from shoal import errors

from .conftest import GCS, S3, _need


def _boto3():
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=S3,
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )


@pytest.fixture(params=["gs", "s3"])
def versioned(request) -> str:
    """A fresh bucket with versioning on."""
    scheme = request.param
    _need(GCS if scheme == "gs" else S3, scheme)
    name = f"pyv-{uuid.uuid4().hex[:12]}"
    if scheme == "gs":
        body = json.dumps({"name": name, "versioning": {"enabled": True}}).encode()
        req = urllib.request.Request(
            f"{GCS}/storage/v1/b?project=test", data=body, headers={"content-type": "application/json"}
        )
        urllib.request.urlopen(req).read()
    else:
        c = _boto3()
        c.create_bucket(Bucket=name)
        c.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return f"{scheme}://{name}"


def _stored(url: str) -> list[tuple[str, bool]]:
    """(version, is a delete marker) of every stored version of one key,
    as the store's own API lists them."""
    scheme, _, rest = url.partition("://")
    bucket, _, key = rest.partition("/")
    if scheme == "s3":
        r = _boto3().list_object_versions(Bucket=bucket, Prefix=key)
        out = [(v["VersionId"], False) for v in r.get("Versions", []) if v["Key"] == key]
        return out + [(m["VersionId"], True) for m in r.get("DeleteMarkers", []) if m["Key"] == key]
    q = urllib.parse.urlencode({"prefix": key, "versions": "true"})
    items = json.load(urllib.request.urlopen(f"{GCS}/storage/v1/b/{bucket}/o?{q}")).get("items", [])
    return [(i["generation"], False) for i in items if i["name"] == key]


def _vid(o: shoal.ObjectInfo) -> str:
    return o.version_id if o.version_id is not None else str(o.generation)


def test_versions_listed_read_restored_and_deleted(versioned):
    url = f"{versioned}/k.txt"
    shoal.put(url, b"one")
    shoal.put(url, b"two!")
    shoal.rm(url)  # a noncurrent version on GCS; a delete marker on S3
    listed = shoal.ls(url, versions=True).objects
    stored = _stored(url)
    assert sorted((_vid(o), o.delete_marker) for o in listed) == sorted((str(v), m) for v, m in stored)
    live = [o for o in listed if not o.delete_marker]
    assert sorted(o.size for o in live) == [3, 4]
    assert all(o.is_latest is False for o in live)
    if versioned.startswith("s3://"):
        (marker,) = [o for o in listed if o.delete_marker]
        assert marker.is_latest is True
    old = min(live, key=lambda o: o.size)
    # Read one version by its id, current or not.
    assert shoal.stat(url, version_id=_vid(old)).size == 3
    assert shoal.cat(url, version_id=_vid(old)) == b"one"
    assert shoal.cat(url, 1, 3, version_id=_vid(old)) == b"ne"
    # Restore: the old version becomes the current one; nothing is lost.
    assert shoal.copy(url, url, version_id=_vid(old)) == 3
    assert shoal.cat(url) == b"one"
    assert len(_stored(url)) == len(stored) + 1
    # Delete that one version: every other stays.
    shoal.rm(url, version_id=_vid(old))
    left = {str(v) for v, _ in _stored(url)}
    assert str(_vid(old)) not in left and len(left) == len(stored)
    assert shoal.cat(url) == b"one"  # the restored copy is its own version


def test_a_version_copies_to_a_file(versioned, tmp_path):
    url = f"{versioned}/d/f.bin"
    shoal.put(url, b"a" * 1000)
    first = shoal.stat(url)
    shoal.put(url, b"b" * 10)
    v = first.version_id if versioned.startswith("s3://") else first.generation
    if v is None:
        # An S3 HEAD of the current object names its ETag, not its version id.
        (v,) = [_vid(o) for o in shoal.ls(url, versions=True).objects if o.size == 1000]
    assert shoal.copy(url, str(tmp_path / "old.bin"), version_id=v) == 1000
    assert (tmp_path / "old.bin").read_bytes() == b"a" * 1000


def test_bad_version_ids_are_refused_before_any_request(versioned):
    url = f"{versioned}/k"
    shoal.put(url, b"x")
    if versioned.startswith("gs://"):
        with pytest.raises(errors.InvalidInputError, match="not a GCS generation"):
            shoal.stat(url, version_id="abc")
    with pytest.raises(errors.InvalidInputError, match="one object"):
        shoal.cat(f"{versioned}/dir/", version_id="1")
    with pytest.raises(TypeError):
        shoal.stat(url, version_id=1.5)
    with pytest.raises(ValueError, match="one URL"):
        shoal.rm([url, url], version_id="1")
    # MinIO takes version ids of UUID form only.
    missing = "1" if versioned.startswith("gs://") else str(uuid.uuid4())
    with pytest.raises(errors.NotFoundError):
        shoal.stat(url, version_id=missing)


def test_fsspec_version_aware(versioned):
    from shoal.fsspec import ShoalFileSystem

    url = f"{versioned}/f/k"
    shoal.put(url, b"old")
    shoal.put(url, b"newer")
    fs = ShoalFileSystem(version_aware=True)
    path = url.replace("://", "/", 1)
    infos = fs.ls(path.rpartition("/")[0], versions=True)
    names = [i["name"] for i in infos]
    assert len(names) == 2, names
    old = [i for i in infos if i["size"] == 3][0]
    # The listed name opens that version; so does version_id=.
    with fs.open(old["name"], "rb") as f:
        assert f.read() == b"old"
    vid = old["version_id"] if old["version_id"] is not None else old["generation"]
    with fs.open(path, "rb", version_id=vid) as f:
        assert f.read() == b"old"
    assert fs.cat_file(old["name"]) == b"old"
    assert fs.info(path, version_id=vid)["size"] == 3
    assert fs.cat_file(path) == b"newer"
    assert len(fs.object_version_info(path)) == 2
    plain = ShoalFileSystem()
    with pytest.raises(ValueError, match="version_aware"):
        plain.ls(path, versions=True)


def test_restore_fills_a_key_and_replaces_only_when_asked(versioned):
    url = f"{versioned}/r"
    shoal.put(url, b"first")
    shoal.put(url, b"second")
    (old,) = [o for o in shoal.ls(url, versions=True).objects if o.size == 5]
    with pytest.raises(errors.PreconditionError, match="live object"):
        shoal.restore(url, _vid(old))
    assert shoal.cat(url) == b"second"
    assert shoal.restore(url, _vid(old), allow_overwrite=True) is False
    assert shoal.cat(url) == b"first"
    shoal.rm(url)
    shoal.restore(url, _vid(old))
    assert shoal.cat(url) == b"first"


def test_soft_deleted_generations_on_the_testbench():
    """Google's storage-testbench keeps soft-deleted generations of a
    bucket with a soft-delete policy (fake-gcs-server has no soft delete:
    its listing is empty, never live objects)."""
    tb = os.environ.get("SHOAL_TEST_GCS_TESTBENCH")
    if not tb:
        pytest.skip("no storage-testbench (SHOAL_TEST_GCS_TESTBENCH)")
    s = shoal.session(gcs_endpoint_url=tb)
    name = f"pysoft-{uuid.uuid4().hex[:12]}"
    body = json.dumps({"name": name, "softDeletePolicy": {"retentionDurationSeconds": "604800"}}).encode()
    urllib.request.urlopen(
        urllib.request.Request(
            f"{tb}/storage/v1/b?project=test", data=body, headers={"content-type": "application/json"}
        )
    ).read()
    url = f"gs://{name}/k"
    shoal.put(url, b"soft", session=s)
    shoal.rm(url, session=s)
    (o,) = shoal.ls(url, soft_deleted=True, session=s).objects
    assert o.soft_deleted and o.generation is not None
    assert shoal.restore(url, o.generation, session=s) is True
    assert shoal.cat(url, session=s) == b"soft"
