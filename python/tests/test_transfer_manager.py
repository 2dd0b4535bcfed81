"""shoal.transfer_manager: google-cloud-storage's functions, same shapes."""

from __future__ import annotations

import os

import pytest

import shoal
from shoal import transfer_manager


def test_upload_many_from_filenames_then_download_many_to_path(bucket, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    names = ["a.txt", "sub/b.txt", "c d.bin"]
    for n in names:
        (src / n).write_bytes(n.encode() * 100)
    results = transfer_manager.upload_many_from_filenames(
        bucket, names, source_directory=str(src), blob_name_prefix="up/", max_workers=4
    )
    assert results == [None, None, None]
    assert sorted(o.key for o in shoal.glob(f"{bucket}/up/**")) == ["up/a.txt", "up/c d.bin", "up/sub/b.txt"]

    dst = tmp_path / "dst"
    results = transfer_manager.download_many_to_path(
        bucket, names, destination_directory=str(dst), blob_name_prefix="up/", max_workers=4
    )
    assert results == [None, None, None]
    for n in names:
        assert (dst / n).read_bytes() == n.encode() * 100


def test_failures_are_returned_per_item_or_raised(bucket, tmp_path):
    (tmp_path / "ok.txt").write_bytes(b"ok")
    results = transfer_manager.upload_many_from_filenames(
        bucket, ["ok.txt", "missing.txt"], source_directory=str(tmp_path)
    )
    assert results[0] is None
    assert isinstance(results[1], FileNotFoundError)
    assert "missing.txt" in str(results[1])
    with pytest.raises(FileNotFoundError):
        transfer_manager.download_many_to_path(
            bucket, ["nope"], destination_directory=str(tmp_path), raise_exception=True
        )


def test_skip_if_exists(bucket, tmp_path):
    # As google-cloud-storage: a precondition of the write (never replaced,
    # even by a multipart upload), its 412 the result but never raised.
    # A multipart upload on MinIO (If-None-Match on its completion); on
    # GCS a composite upload, whose compose fake-gcs-server runs whatever
    # its ifGenerationMatch says (GCS itself honours it).
    names = ["f", "big"] if bucket.startswith("s3://") else ["f"]
    (tmp_path / "f").write_bytes(b"new")
    (tmp_path / "big").write_bytes(os.urandom(17 << 20))
    shoal.put(f"{bucket}/f", b"old")
    shoal.put(f"{bucket}/big", b"old big")
    results = transfer_manager.upload_many_from_filenames(
        bucket, names, source_directory=str(tmp_path), skip_if_exists=True, raise_exception=True
    )
    assert all(isinstance(r, shoal.PreconditionError) for r in results)
    assert (shoal.cat(f"{bucket}/f"), shoal.cat(f"{bucket}/big")) == (b"old", b"old big")
    assert transfer_manager.upload_many_from_filenames(
        bucket, ["big"], source_directory=str(tmp_path), blob_name_prefix="new/", skip_if_exists=True
    ) == [None]
    assert shoal.cat(f"{bucket}/new/big") == (tmp_path / "big").read_bytes()
    assert sorted(o.key for o in shoal.ls(bucket, recursive=True).objects) == ["big", "f", "new/big"]


def test_upload_and_download_chunks_concurrently(bucket, tmp_path):
    data = os.urandom(21 << 20)
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    # 5 MiB parts: S3 multipart (its minimum part size), GCS composite.
    transfer_manager.upload_chunks_concurrently(str(src), f"{bucket}/big.bin", chunk_size=5 << 20, max_workers=4)
    assert shoal.stat(f"{bucket}/big.bin").size == len(data)
    out = tmp_path / "out.bin"
    transfer_manager.download_chunks_concurrently(f"{bucket}/big.bin", str(out), chunk_size=4 << 20, max_workers=4)
    assert out.read_bytes() == data


def test_upload_many_pairs_and_download_many_pairs(bucket, tmp_path):
    (tmp_path / "x").write_bytes(b"x")
    assert transfer_manager.upload_many([(str(tmp_path / "x"), f"{bucket}/p/x")]) == [None]
    assert transfer_manager.download_many([(f"{bucket}/p/x", str(tmp_path / "y"))]) == [None]
    assert (tmp_path / "y").read_bytes() == b"x"


def test_bucket_must_be_a_url():
    with pytest.raises(ValueError, match="expected a URL"):
        transfer_manager.download_many_to_path("just-a-name", ["k"])


def test_download_many_to_path_never_writes_outside_the_folder(gs_bucket, tmp_path):
    # fake-gcs-server stores any name, like real GCS (MinIO refuses dot segments).
    evil = ["../escaped", "a/../../escaped2", "/abs", "back\\slash", "ctl\x01x", "./dot", "dir/"]
    for n in evil + ["ok", "sub/ok2"]:
        shoal.put(f"{gs_bucket}/t/{n}", b"payload")
    jail = tmp_path / "jail"
    out = jail / "out"
    results = transfer_manager.download_many_to_path(
        gs_bucket, evil + ["ok", "sub/ok2"], destination_directory=str(out), blob_name_prefix="t/"
    )
    for n, r in zip(evil, results[: len(evil)], strict=True):
        assert isinstance(r, shoal.errors.ShoalError), (n, r)
        assert "not copied" in str(r), str(r)
    assert isinstance(results[0], ValueError)  # InvalidInputError is a ValueError
    assert results[-2:] == [None, None]
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == [
        "jail/out/ok",
        "jail/out/sub/ok2",
    ]
    with pytest.raises(shoal.errors.InvalidInputError):
        transfer_manager.download_many_to_path(
            gs_bucket, ["../escaped"], destination_directory=str(out), blob_name_prefix="t/", raise_exception=True
        )
