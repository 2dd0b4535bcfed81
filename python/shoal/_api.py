"""The plain functions: ls, glob, du, stat, cat, put, read, rm, copy,
download, upload, each with an ``_async`` twin.

Every call releases the GIL for its whole duration; the work runs on one
tokio runtime per process. Configuration keywords (see ``shoal.session``)
may be given to any call, or a ``session=``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterable, Iterator, Sequence

from . import _shoal
from ._session import resolve
from ._shoal import ObjectInfo, Report


def _urls(urls: str | os.PathLike | Iterable[str]) -> list[str]:
    if isinstance(urls, (str, os.PathLike)):
        return [os.fspath(urls)]
    return [os.fspath(u) for u in urls]


def _has_wildcard(url: str) -> bool:
    key = url.split("://", 1)[-1].partition("/")[2]
    return any(c in key for c in "*?[")


@dataclass(frozen=True)
class Listing:
    """What :func:`ls` returns: objects, and "directories" (common prefixes,
    as URLs ending in ``/``)."""

    objects: list[ObjectInfo]
    prefixes: list[str]

    def urls(self) -> list[str]:
        """Every URL, objects and prefixes, sorted."""
        return sorted([o.url for o in self.objects] + self.prefixes)


@dataclass(frozen=True)
class DiskUsage:
    """What :func:`du` returns."""

    bytes: int
    objects: int
    groups: dict[str, tuple[int, int]]


def _ls_args(url: str, recursive: bool):
    if _has_wildcard(url):
        return ("glob", url)
    if recursive:
        return ("expand", url)
    key = url.split("://", 1)[-1].partition("/")[2]
    if key and not key.endswith("/"):
        url += "/"
    return ("prefix", url)


def ls(url: str, *, recursive: bool = False, session: _shoal.Session | None = None, **options: Any) -> Listing:
    """Lists a bucket, a "directory" or a glob (gcloud glob semantics).

    ``ls("gs://b/dir")`` lists one level below ``dir/``; ``recursive=True``
    lists everything below, in parallel for big listings.
    """
    s = resolve(session, options)
    how, u = _ls_args(url, recursive)
    if how == "glob":
        if recursive:
            return Listing(_shoal.expand(s, u, True), [])
        objs, prefixes = _shoal.entries(s, u)
        return Listing(objs, prefixes)
    if how == "expand":
        return Listing(_shoal.expand(s, u, True), [])
    objs, prefixes = _shoal.list_prefix(s, u, True)
    return Listing(objs, prefixes)


async def ls_async(url: str, *, recursive: bool = False, session: _shoal.Session | None = None, **options: Any) -> Listing:
    """:func:`ls` for asyncio."""
    s = resolve(session, options)
    how, u = _ls_args(url, recursive)
    if how == "glob":
        if recursive:
            return Listing(await _shoal.expand_async(s, u, True), [])
        objs, prefixes = await _shoal.entries_async(s, u)
        return Listing(objs, prefixes)
    if how == "expand":
        return Listing(await _shoal.expand_async(s, u, True), [])
    objs, prefixes = await _shoal.list_prefix_async(s, u, True)
    return Listing(objs, prefixes)


def glob(pattern: str, *, recursive: bool = False, session: _shoal.Session | None = None, **options: Any) -> list[ObjectInfo]:
    """Every object a glob names, in key order (``*`` and ``?`` within a
    level, ``**`` across levels, ``[...]`` classes); a literal URL is that
    one object (``NotFoundError`` when missing)."""
    return _shoal.expand(resolve(session, options), pattern, recursive)


async def glob_async(pattern: str, *, recursive: bool = False, session: _shoal.Session | None = None, **options: Any) -> list[ObjectInfo]:
    """:func:`glob` for asyncio."""
    return await _shoal.expand_async(resolve(session, options), pattern, recursive)


def iter_objects(url: str, *, recursive: bool = False, detail: str = "full", session: _shoal.Session | None = None, **options: Any) -> Iterator[ObjectInfo]:
    """Every object a URL or glob names, in key order, as an iterator: what
    :func:`glob` returns, without holding it. The listing is streamed page
    by page (in parallel for big listings), so memory stays bounded however
    many keys there are. ``recursive`` takes everything below each match;
    ``detail`` is ``"name"``, ``"size"`` or ``"full"``. A glob matching
    nothing raises ``NotFoundError`` when the iteration reaches its end."""
    stream = _shoal.iter_objects(resolve(session, options), url, recursive, detail)
    try:
        for page in stream:
            yield from page
    finally:
        stream.close()


async def iter_objects_async(url: str, *, recursive: bool = False, detail: str = "full", session: _shoal.Session | None = None, **options: Any) -> AsyncIterator[ObjectInfo]:
    """:func:`iter_objects` for asyncio (``async for``)."""
    stream = _shoal.iter_objects(resolve(session, options), url, recursive, detail)
    try:
        async for page in stream:
            for o in page:
                yield o
    finally:
        stream.close()


def _du(res) -> DiskUsage:
    groups, (b, n) = res
    return DiskUsage(b, n, {label: (gb, gn) for label, gb, gn in groups})


def du(url: str, *, group_by: str | None = None, session: _shoal.Session | None = None, **options: Any) -> DiskUsage:
    """Total bytes and objects below a URL or glob; ``group_by`` is
    ``"prefix:N"``, ``"suffix"``, ``"age"`` or ``"storage-class"``."""
    return _du(_shoal.du(resolve(session, options), url, group_by))


async def du_async(url: str, *, group_by: str | None = None, session: _shoal.Session | None = None, **options: Any) -> DiskUsage:
    """:func:`du` for asyncio."""
    return _du(await _shoal.du_async(resolve(session, options), url, group_by))


def stat(url: str, *, session: _shoal.Session | None = None, **options: Any) -> ObjectInfo:
    """Metadata of one object."""
    return _shoal.stat(resolve(session, options), url)


async def stat_async(url: str, *, session: _shoal.Session | None = None, **options: Any) -> ObjectInfo:
    """:func:`stat` for asyncio."""
    return await _shoal.stat_async(resolve(session, options), url)


def cat(url: str, start: int | None = None, end: int | None = None, *, session: _shoal.Session | None = None, **options: Any) -> bytes:
    """The object's bytes ``[start, end)``, fetched with parallel ranged reads."""
    return _shoal.cat(resolve(session, options), url, start, end)


async def cat_async(url: str, start: int | None = None, end: int | None = None, *, session: _shoal.Session | None = None, **options: Any) -> bytes:
    """:func:`cat` for asyncio."""
    return await _shoal.cat_async(resolve(session, options), url, start, end)


def put(url: str, data: bytes, *, content_type: str | None = None, content_encoding: str | None = None, session: _shoal.Session | None = None, **options: Any) -> int:
    """Writes ``data`` as the object (a URL naming only a bucket is refused);
    returns its size. ``content_encoding``
    is stored as the object's ``Content-Encoding`` (``"gzip"``: ``data`` is
    gzip, and :func:`read` yields it decoded)."""
    return _shoal.put(resolve(session, options), url, data, content_type, False, content_encoding)


async def put_async(url: str, data: bytes, *, content_type: str | None = None, content_encoding: str | None = None, session: _shoal.Session | None = None, **options: Any) -> int:
    """:func:`put` for asyncio."""
    return await _shoal.put_async(resolve(session, options), url, data, content_type, False, content_encoding)


def _raise_first(results: Sequence[Any]) -> None:
    for r in results:
        if isinstance(r, BaseException):
            raise r


def rm(urls: str | Iterable[str], *, max_workers: int | None = None, session: _shoal.Session | None = None, **options: Any) -> None:
    """Deletes objects (a URL or a list of them); raises the first failure.
    A URL naming only a bucket is refused (``InvalidInputError``), never
    sent: on S3 it would delete the bucket."""
    u = _urls(urls)
    _raise_first(_shoal.delete_many(resolve(session, options), u, max_workers))


async def rm_async(urls: str | Iterable[str], *, max_workers: int | None = None, session: _shoal.Session | None = None, **options: Any) -> None:
    """:func:`rm` for asyncio."""
    u = _urls(urls)
    _raise_first(await _shoal.delete_many_async(resolve(session, options), u, max_workers))


def mb(url: str, *, session: _shoal.Session | None = None, **options: Any) -> None:
    """Creates a bucket."""
    _shoal.make_bucket(resolve(session, options), url)


async def mb_async(url: str, *, session: _shoal.Session | None = None, **options: Any) -> None:
    """:func:`mb` for asyncio."""
    await _shoal.make_bucket_async(resolve(session, options), url)


def copy(src: str | os.PathLike, dst: str | os.PathLike, *, max_workers: int | None = None, chunk_size: int | None = None, session: _shoal.Session | None = None, **options: Any) -> int:
    """Copies one object or file (local ↔ cloud, cloud ↔ cloud); returns
    bytes. A destination ending in ``/`` (or a bare bucket, or a local
    folder) receives it under the source's name, as ``shoal cp`` does."""
    r = _shoal.copy_many(resolve(session, options), [(os.fspath(src), os.fspath(dst))], max_workers, chunk_size)[0]
    if isinstance(r, BaseException):
        raise r
    return r


async def copy_async(src: str | os.PathLike, dst: str | os.PathLike, *, max_workers: int | None = None, chunk_size: int | None = None, session: _shoal.Session | None = None, **options: Any) -> int:
    """:func:`copy` for asyncio."""
    s = resolve(session, options)
    r = (await _shoal.copy_many_async(s, [(os.fspath(src), os.fspath(dst))], max_workers, chunk_size))[0]
    if isinstance(r, BaseException):
        raise r
    return r


def copy_many(pairs: Iterable[tuple[str, str]], *, max_workers: int | None = None, chunk_size: int | None = None, session: _shoal.Session | None = None, **options: Any) -> list[int | BaseException]:
    """Copies ``(source, destination)`` pairs under one budget of
    ``max_workers`` requests; one result per pair (bytes, or the exception)."""
    p = [(os.fspath(a), os.fspath(b)) for a, b in pairs]
    return _shoal.copy_many(resolve(session, options), p, max_workers, chunk_size)


async def copy_many_async(pairs: Iterable[tuple[str, str]], *, max_workers: int | None = None, chunk_size: int | None = None, session: _shoal.Session | None = None, **options: Any) -> list[int | BaseException]:
    """:func:`copy_many` for asyncio."""
    p = [(os.fspath(a), os.fspath(b)) for a, b in pairs]
    return await _shoal.copy_many_async(resolve(session, options), p, max_workers, chunk_size)


def download(url: str, filename: str | os.PathLike, *, max_workers: int | None = None, chunk_size: int | None = None, session: _shoal.Session | None = None, **options: Any) -> Report:
    """Downloads one object to a file (sliced, verified, renamed into
    place); a folder, or a path ending in ``/``, receives it under the
    object's name."""
    return _shoal.download(resolve(session, options), url, os.fspath(filename), max_workers, chunk_size)


async def download_async(url: str, filename: str | os.PathLike, *, max_workers: int | None = None, chunk_size: int | None = None, session: _shoal.Session | None = None, **options: Any) -> Report:
    """:func:`download` for asyncio."""
    return await _shoal.download_async(resolve(session, options), url, os.fspath(filename), max_workers, chunk_size)


def upload(filename: str | os.PathLike, url: str, *, max_workers: int | None = None, chunk_size: int | None = None, session: _shoal.Session | None = None, **options: Any) -> Report:
    """Uploads one file (multipart when big: S3's, GCS's XML API's, or
    parallel composite); a URL ending in ``/`` (or a bare bucket) receives
    it under the file's name."""
    return _shoal.upload(resolve(session, options), os.fspath(filename), url, max_workers, chunk_size)


async def upload_async(filename: str | os.PathLike, url: str, *, max_workers: int | None = None, chunk_size: int | None = None, session: _shoal.Session | None = None, **options: Any) -> Report:
    """:func:`upload` for asyncio."""
    return await _shoal.upload_async(resolve(session, options), os.fspath(filename), url, max_workers, chunk_size)


def _stream(urls, lines, decompress, unordered, read_ahead, session, options) -> _shoal.ReadStream:
    return _shoal.read(resolve(session, options), _urls(urls), lines, decompress, not unordered, read_ahead)


def read(
    urls: str | os.PathLike | Iterable[str],
    *,
    lines: bool = False,
    decompress: bool | None = None,
    unordered: bool = False,
    read_ahead: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> Iterator[bytes]:
    """Streams the content of every object the URLs and globs name (globs
    in key order; local paths are files), through the engine ``shoal cat``
    uses: objects fetched ahead on many connections within ``read_ahead``
    bytes (default 256 MiB), big objects as parallel ranges, each object
    checked against the store's checksum (CRC32C, CRC32, CRC64NVME or a
    composite one). Memory stays within that budget however much is read.

    Decompression is ``shoal cat``'s: objects stored with
    ``Content-Encoding: gzip`` are always decoded (that is their content);
    ``decompress=True`` also decodes zstd and gzip recognised by their magic
    bytes, else by a ``.zst``/``.zstd``/``.gz``/``.gzip`` extension
    (``cat -d``); ``decompress=False`` yields the bytes as stored
    (``cat --no-decompress``).

    With ``lines=True``, yields lines (without their ``\\n``); an object's
    last line ends with the object. ``unordered=True`` yields each object
    whole as soon as it is ready instead of in listing order.

    The first failure (a missing object, a glob matching nothing, a
    checksum mismatch, a corrupt compressed object, named with its URL and
    offset) is raised as a :class:`shoal.ShoalError` and ends the stream;
    bytes before it have already been yielded.
    """
    stream = _stream(urls, lines, decompress, unordered, read_ahead, session, options)
    if not lines:
        return iter(stream)
    return _lines(stream)


def _split(carry: bytes, chunk: bytes) -> tuple[list[bytes], bytes]:
    """The whole lines of ``carry + chunk``, and what is left after them."""
    parts = chunk.split(b"\n")
    if len(parts) == 1:
        return [], carry + chunk
    parts[0] = carry + parts[0]
    rest = parts.pop()
    return parts, rest


def _lines(stream: Iterable[bytes]) -> Iterator[bytes]:
    """Lines from a stream whose empty items mark the end of each object."""
    carry = b""
    for chunk in stream:
        if not chunk:  # end of an object
            if carry:
                yield carry
            carry = b""
            continue
        parts, carry = _split(carry, chunk)
        yield from parts
    if carry:
        yield carry


async def read_async(
    urls: str | os.PathLike | Iterable[str],
    *,
    lines: bool = False,
    decompress: bool | None = None,
    unordered: bool = False,
    read_ahead: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> AsyncIterator[bytes]:
    """:func:`read` for asyncio: an async iterator (waiting never blocks
    the event loop)."""
    stream = _stream(urls, lines, decompress, unordered, read_ahead, session, options)
    carry = b""
    async for chunk in stream:
        if not lines:
            yield chunk
            continue
        if not chunk:
            if carry:
                yield carry
            carry = b""
            continue
        parts, carry = _split(carry, chunk)
        for p in parts:
            yield p
    if carry:
        yield carry
