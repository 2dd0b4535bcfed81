"""shoal.update: metadata changed on the server, bytes untouched, pinned
to the version read; checked on fake-gcs-server and MinIO."""

from __future__ import annotations

import asyncio

import pytest

import shoal


def test_update_merges_with_what_is_stored(bucket):
    url = f"{bucket}/u/a.txt"
    shoal.put(url, b"hello", cache_control="no-cache", metadata={"keep": "1", "old": "x"})
    before = shoal.stat(url)
    assert shoal.update(url, content_type="text/csv", metadata={"new": "2"}, remove_metadata=["old"]) is True
    info = shoal.stat(url)
    assert info.content_type == "text/csv"
    assert info.cache_control == "no-cache"
    assert info.metadata.get("keep") == "1"
    assert info.metadata.get("new") == "2"
    assert "old" not in info.metadata
    assert info.size == before.size
    assert shoal.cat(url) == b"hello"
    # Already so: nothing sent.
    assert shoal.update(url, content_type="text/csv") is False
    # A dry run changes nothing.
    assert shoal.update(url, cache_control="max-age=5", dry_run=True) is False
    assert shoal.stat(url).cache_control == "no-cache"
    assert asyncio.run(shoal.update_async(url, cache_control="max-age=5")) is True
    assert shoal.stat(url).cache_control == "max-age=5"


def test_update_refuses_bad_input(bucket):
    url = f"{bucket}/u/b.txt"
    shoal.put(url, b"x")
    with pytest.raises(shoal.InvalidInputError, match="nothing to change"):
        shoal.update(url)
    with pytest.raises(shoal.InvalidInputError, match="unknown ACL"):
        shoal.update(url, acl="world", predefined_acl="world")
    with pytest.raises(TypeError, match="remove_metadata"):
        shoal.update(url, remove_metadata="old")
    with pytest.raises(shoal.NotFoundError):
        shoal.update(f"{bucket}/u/missing", cache_control="x")


def test_fsspec_setxattrs(bucket):
    import fsspec

    url = f"{bucket}/x/f.txt"
    shoal.put(url, b"data", metadata={"a": "1", "b": "2"})
    fs = fsspec.filesystem("shoal")
    fs.setxattrs(url, content_type="text/plain", fixed_key_metadata={"cache_control": "no-store"}, a="9", b=None)
    info = shoal.stat(url)
    assert info.content_type == "text/plain"
    assert info.cache_control == "no-store"
    assert info.metadata.get("a") == "9"
    assert "b" not in info.metadata
    with pytest.raises(ValueError, match="fixed_key_metadata"):
        fs.setxattrs(url, fixed_key_metadata={"custom_time": "x"})
