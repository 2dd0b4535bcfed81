"""shoal.read through the `shoal cat` engine: decompression (zstd, gzip,
Content-Encoding), order, lines, errors, against fake-gcs-server and MinIO.

zstd data is made and checked with the `zstd` command (no Python zstd
module is pinned in requirements-test.txt); gzip with Python's gzip."""

from __future__ import annotations

import asyncio
import gzip
import os
import shutil
import subprocess

import pytest

import shoal

ZSTD = shutil.which("zstd")
needs_zstd = pytest.mark.skipif(ZSTD is None, reason="the zstd command is not installed")


def zstd(data: bytes, level: int = 3) -> bytes:
    return subprocess.run([ZSTD, "-q", "-c", f"-{level}"], input=data, capture_output=True, check=True).stdout


def unzstd(data: bytes) -> bytes:
    return subprocess.run([ZSTD, "-q", "-d", "-c"], input=data, capture_output=True, check=True).stdout


def text(n_lines: int, seed: int) -> bytes:
    return b"".join(b"line %d of object %d: %s\n" % (i, seed, b"xyz" * (i % 7)) for i in range(n_lines))


def lines_of(content: bytes) -> list[bytes]:
    """What lines mode yields for one object: split at ``\\n``, a final
    newline ending the last line (not starting an empty one)."""
    parts = content.split(b"\n")
    if parts[-1] == b"":
        parts.pop()
    return parts


def mixed(bucket: str) -> dict[str, tuple[bytes, bytes]]:
    """Stores a mix of encodings below ``{bucket}/d/``; key → (stored bytes,
    what ``zstd -dc`` / ``gzip -dc`` make of them, or the same bytes)."""
    big = os.urandom(3 << 20) + text(20_000, 9)  # several 1 MiB ranges when read_ahead is small
    two_frames = zstd(text(500, 4)) + zstd(text(300, 5), 19)  # `cat a.zst b.zst`
    two_members = gzip.compress(text(400, 6)) + gzip.compress(b"tail without newline")
    objects = {
        "d/a/1.txt.zst": zstd(text(2_000, 1)),
        "d/a/2.gz": gzip.compress(text(1_000, 2)),
        "d/b/3.txt": text(700, 3),  # plain
        "d/b/c/4.log": two_frames,  # zstd by magic bytes, whatever the name says
        "d/b/c/5.gz": two_members,
        "d/b/empty.zst": b"",  # empty is empty, whatever the name
        "d/big.zst": zstd(big, 1),
    }
    out = {}
    for key, stored in objects.items():
        shoal.put(f"{bucket}/{key}", stored)
        if stored[:4] == b"\x28\xb5\x2f\xfd":
            out[key] = (stored, unzstd(stored))
        elif stored[:2] == b"\x1f\x8b":
            out[key] = (stored, gzip.decompress(stored))
        else:
            out[key] = (stored, stored)
    return out


@needs_zstd
def test_decompress_true_matches_local_decompression_in_key_order(bucket):
    objs = mixed(bucket)
    want = b"".join(objs[k][1] for k in sorted(objs))
    got = b"".join(shoal.read(f"{bucket}/d/**", decompress=True))
    assert got == want
    # The same through a small budget: the big object is read as parallel
    # ranges, fed to its decoder in order.
    chunks = list(shoal.read(f"{bucket}/d/**", decompress=True, read_ahead=4 << 20))
    assert b"".join(chunks) == want
    assert all(chunks)  # no empty items outside lines mode


@needs_zstd
def test_default_and_false_yield_stored_bytes(bucket):
    objs = mixed(bucket)
    stored = b"".join(objs[k][0] for k in sorted(objs))
    assert b"".join(shoal.read(f"{bucket}/d/**")) == stored
    assert b"".join(shoal.read(f"{bucket}/d/**", decompress=False)) == stored


def test_content_encoding_gzip_is_always_decoded_unless_false(bucket):
    body = text(5_000, 7)
    gz = gzip.compress(body)
    shoal.put(f"{bucket}/enc/a.txt", gz, content_type="text/plain", content_encoding="gzip")
    shoal.put(f"{bucket}/enc/b.txt", b"plain\n")
    assert shoal.stat(f"{bucket}/enc/a.txt").content_encoding == "gzip"
    # Its content is the decoded bytes: by default, and with decompress=True
    # (decoded once, not twice).
    assert b"".join(shoal.read(f"{bucket}/enc/*")) == body + b"plain\n"
    assert b"".join(shoal.read(f"{bucket}/enc/*", decompress=True)) == body + b"plain\n"
    assert b"".join(shoal.read(f"{bucket}/enc/*", decompress=False)) == gz + b"plain\n"


@needs_zstd
def test_lines_are_whole_lines_of_the_decoded_objects(bucket):
    objs = mixed(bucket)
    want = [line for k in sorted(objs) for line in lines_of(objs[k][1])]
    got = list(shoal.read(f"{bucket}/d/**", decompress=True, lines=True))
    assert got == want
    assert b"tail without newline" in got  # an object's last line ends with it


@needs_zstd
def test_unordered_yields_every_object_whole(bucket):
    objs = mixed(bucket)
    got = list(shoal.read(f"{bucket}/d/**", decompress=True, unordered=True, lines=True))
    want = [line for k in objs for line in lines_of(objs[k][1])]
    assert sorted(got) == sorted(want)


@needs_zstd
def test_corrupt_zstd_object_raises_naming_it_and_the_offset(bucket):
    good = text(3_000, 1)
    shoal.put(f"{bucket}/z/1.txt", good)
    frame = bytearray(zstd(text(50_000, 2)))
    for i in range(len(frame) // 2, len(frame) // 2 + 64):
        frame[i] ^= 0x5A
    url = f"{bucket}/z/2.zst"
    shoal.put(url, bytes(frame))
    got = bytearray()
    with pytest.raises(shoal.IntegrityError) as e:
        for chunk in shoal.read(f"{bucket}/z/*", decompress=True):
            got += chunk
    assert e.value.url == url and url in str(e.value)
    assert "zstd data" in str(e.value) and "compressed offset" in str(e.value)
    assert "decompress=False" in str(e.value)
    assert bytes(got).startswith(good)  # what came before was yielded
    # As stored, it is just bytes.
    assert b"".join(shoal.read(url, decompress=False)) == bytes(frame)


@needs_zstd
def test_truncated_zstd_is_an_error_not_a_short_read(bucket):
    z = zstd(os.urandom(200_000))
    shoal.put(f"{bucket}/t.zst", z[:-10])
    with pytest.raises(shoal.IntegrityError, match="truncated"):
        list(shoal.read(f"{bucket}/t.zst", decompress=True))


def test_glob_matching_nothing_and_missing_object_in_a_list(bucket):
    shoal.put(f"{bucket}/x/1", b"one")
    with pytest.raises(shoal.NotFoundError, match="matched no objects"):
        list(shoal.read([f"{bucket}/x/*", f"{bucket}/y/*"]))
    it = shoal.read([f"{bucket}/x/1", f"{bucket}/x/2"])
    assert next(it) == b"one"
    with pytest.raises(FileNotFoundError):
        next(it)


def test_bad_arguments_raise_at_the_call(bucket):
    with pytest.raises(ValueError, match="unknown scheme"):
        shoal.read("ftp://x/y")
    with pytest.raises(shoal.InvalidInputError):
        shoal.read(f"{bucket}/[unclosed")
    with pytest.raises(ValueError, match="read_ahead"):
        shoal.read(f"{bucket}/k", read_ahead=0)


def test_local_files_are_read_like_cat(tmp_path):
    p = tmp_path / "a.gz"
    p.write_bytes(gzip.compress(b"local\nfile"))
    assert list(shoal.read(p, decompress=True, lines=True)) == [b"local", b"file"]
    assert b"".join(shoal.read(os.fspath(p))) == p.read_bytes()


def test_stopping_early_does_not_read_everything(bucket):
    data = os.urandom(6 << 20)
    shoal.put(f"{bucket}/big", data)
    it = shoal.read([f"{bucket}/big"] * 20, read_ahead=2 << 20)
    first = next(it)
    assert data.startswith(first)
    it.close()  # the reader stops; nothing is left running or held
    with pytest.raises(StopIteration):
        next(it)


@needs_zstd
def test_read_async_decompresses_and_splits_lines(bucket):
    shoal.put(f"{bucket}/a/1.zst", zstd(b"one\ntwo\n"))
    shoal.put(f"{bucket}/a/2.gz", gzip.compress(b"three"))

    async def main():
        data = b"".join([c async for c in shoal.read_async(f"{bucket}/a/*", decompress=True)])
        lines = [x async for x in shoal.read_async(f"{bucket}/a/*", decompress=True, lines=True)]
        return data, lines

    data, lines = asyncio.run(main())
    assert data == b"one\ntwo\nthree"
    assert lines == [b"one", b"two", b"three"]
