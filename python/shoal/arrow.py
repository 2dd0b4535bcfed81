"""A pyarrow filesystem on shoal's engine: ``shoal.arrow.filesystem()``.

::

    import pyarrow.parquet as pq, shoal.arrow
    fs = shoal.arrow.filesystem()
    pq.read_table("s3://bucket/table/", filesystem=fs, columns=["a"])
    pandas.read_parquet("gs://bucket/t.parquet", filesystem=fs)

Paths are shoal URLs (``gs://bucket/key``, ``s3://bucket/key``); one
filesystem serves both stores. It is a ``pyarrow.fs.PyFileSystem`` whose
handler answers pyarrow's questions with shoal's listing and stat, and
whose input files read through the engine (``shoal_transfer``'s
``read_into_memory``: a ranged GET, parallel slices for a big range, the
GIL released while the bytes travel). Why this shape, and not pyarrow's
fsspec bridge:

- No HEAD per file. Arrow asks for a file's size when it opens it; the
  handler keeps the size and version each listing (``FileSelector``) or
  stat (``get_file_info``) gave for :data:`KEEP` seconds, and a file
  opened meanwhile takes them, so a dataset read costs one listing and no
  HEAD, and a single file one HEAD. An object replaced after it was
  listed is never read as a mix: its file is pinned to the listed
  version, so its first read raises ``ChangedError`` (and the kept answer
  is dropped: open it again).
- No read-ahead. Arrow reads the footer (the last 64 KiB), then exactly
  the column chunks it needs, joined by its own ``pre_buffer`` coalescing;
  each read here is one request for those bytes (fsspec's buffered file
  turned every small read into a 5 MiB one).
- The footer comes with the first read, and a file of at most
  :data:`WHOLE` bytes is read whole on its first read, so it costs one
  request and is verified against the store's checksum as ``shoal cat``
  verifies (CRC32C, CRC32, CRC64NVME, composite, MD5). Those first
  bytes are kept for the next open of the same version (at most
  :data:`TAILS` bytes in all): Arrow opens a dataset's first file twice,
  for its schema and then for its rows, and reads the footer each time.
- A read's bytes are the buffer the engine filled, the GIL released:
  nothing is copied on the way to Arrow. Arrow asks with ``read_buffer``,
  and gets a ``pyarrow.Buffer`` over memory shoal keeps and reuses (a
  new ``bytes`` of a row group is fresh pages, a page fault each: the
  filter row of bench/py_read_bench.py took 0.131 s with them, 0.113 s
  reusing, pyarrow's own S3 0.120).

Every read of an open file is pinned to the version it was opened at: an
object replaced meanwhile raises ``shoal.ChangedError`` rather than mixing
two versions. Errors are Python's: a missing object ``FileNotFoundError``,
a refused one ``PermissionError``, each naming the URL; a damaged parquet
file is pyarrow's ``ArrowInvalid``.

A script may end right after its read: pyarrow releases the read's files
on its own threads after ``read_table`` returns, which aborted the
interpreter at exit about half the time; exit waits for them
(``shoal._exit``).

Writing (``open_output_stream``) uploads on close through shoal's
multipart path; moves, appends and directory removal are refused: object
stores have no such operations worth pretending.
"""

from __future__ import annotations

import io
import threading
import time
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from . import _exit, _shoal
from ._session import resolve
from ._tails import Tails

#: A file this small is read whole on its first read (one request,
#: checksum-verified) instead of footer first: a footer read of a small
#: file would be most of it anyway.
WHOLE = 1 << 20
#: What Arrow's parquet reader asks for first (its default footer read).
FOOTER = 64 << 10
#: Bytes of first reads (footers, small files) kept for later opens of
#: the same version of the same object.
TAILS = 4 << 20
#: Seconds a listing's or stat's size and version serve opens: long enough
#: for a dataset's discovery and read (Arrow opens the first file twice),
#: short enough that a long-lived filesystem does not keep old listings.
KEEP = 30.0


def filesystem(store: str | None = None, *, session: _shoal.Session | None = None, **options: Any) -> pafs.PyFileSystem:
    """A ``pyarrow.fs.FileSystem`` reading ``gs://`` and ``s3://`` URLs with
    shoal. With ``store`` (``"gs"`` or ``"s3"``), paths may also be
    ``bucket/key`` as pyarrow's own S3/GCS filesystems take them (Dask
    strips the scheme before it asks the filesystem), and paths come back
    in that form. Keywords: shoal's configuration (``endpoint_url``,
    ``key``, ``secret``, ``workers``… see :func:`shoal.session`), or
    ``session=``."""
    if store not in (None, "gs", "s3"):
        raise ValueError(f"store must be 'gs', 's3' or None, not {store!r}")
    handler = ShoalHandler(resolve(session, options), store)
    fs = pafs.PyFileSystem(handler)
    _exit.track(handler, owner=fs)  # pyarrow's threads may release it last
    return fs


def _url(path: str, store: str | None = None) -> str:
    path = str(path)
    if path.startswith(("gs://", "s3://")):
        return path.rstrip("/")
    if path.startswith("gcs://"):
        return "gs://" + path[6:].rstrip("/")
    if path.startswith("s3a://"):
        return "s3://" + path[6:].rstrip("/")
    if store is not None and "://" not in path:
        return f"{store}://{path.strip('/')}"
    raise ValueError(
        f"{path!r}: shoal's arrow filesystem takes gs://bucket/key or s3://bucket/key URLs (or bucket/key with "
        "shoal.arrow.filesystem('gs'/'s3'))"
    )


class ShoalHandler(pafs.FileSystemHandler):
    """Answers ``PyFileSystem``'s calls with shoal (see the module)."""

    def __init__(self, session: _shoal.Session, store: str | None = None) -> None:
        self.session = session
        self.store = store
        self._lock = threading.Lock()
        # URL -> (size, version, when): what the last listing or stat
        # said, for opens within KEEP seconds.
        self._known: dict[str, tuple[int, str | None, float]] = {}
        # First reads, for the next open of the same version.
        self._tails = Tails(TAILS)

    def __reduce__(self) -> Any:
        return (ShoalHandler, (self.session, self.store))

    def __eq__(self, other: Any) -> bool:
        # Same configuration (a session pickles as its keywords: Dask
        # compares a filesystem with its unpickled copy).
        return (
            isinstance(other, ShoalHandler)
            and other.store == self.store
            and (other.session is self.session or other.session.__reduce__() == self.session.__reduce__())
        )

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return "shoal"

    def normalize_path(self, path: str) -> str:
        return self._out(self._u(path))

    def _u(self, path: str) -> str:
        return _url(path, self.store)

    def _out(self, url: str) -> str:
        """A URL as this filesystem's paths spell it."""
        return url.partition("://")[2] if self.store is not None else url

    # -- metadata --------------------------------------------------------

    def _keep(self, url: str, size: int, version: str | None) -> None:
        with self._lock:
            self._known[url] = (size, version, time.monotonic())

    def _file(self, o: _shoal.ObjectInfo) -> pafs.FileInfo:
        self._keep(o.url, o.size, o.version)
        mtime = o.updated
        return pafs.FileInfo(self._out(o.url), pafs.FileType.File, size=o.size, mtime=mtime)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [self._info(self._u(p)) for p in paths]

    def _info(self, url: str) -> pafs.FileInfo:
        rest = url.partition("://")[2]
        if "/" not in rest:  # a bucket
            try:
                _shoal.list_prefix(self.session, url + "/", delimiter=True, detail="name", limit=1)
            except FileNotFoundError:
                return pafs.FileInfo(self._out(url), pafs.FileType.NotFound)
            return pafs.FileInfo(self._out(url), pafs.FileType.Directory)
        try:
            return self._file(_shoal.stat(self.session, url))
        except FileNotFoundError:
            pass
        objs, prefixes = _shoal.list_prefix(self.session, url + "/", delimiter=True, detail="name", limit=1)
        kind = pafs.FileType.Directory if objs or prefixes else pafs.FileType.NotFound
        return pafs.FileInfo(self._out(url), kind)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = self._u(selector.base_dir)
        try:
            objs, prefixes = _shoal.list_prefix(
                self.session, base + "/", delimiter=not selector.recursive, detail="full"
            )
        except FileNotFoundError:
            if selector.allow_not_found:
                return []
            raise
        out: dict[str, pafs.FileInfo] = {}
        for o in objs:
            if o.key.endswith("/"):
                continue
            out[o.url] = self._file(o)
            if selector.recursive:
                parent = o.url.rsplit("/", 1)[0]
                while len(parent) > len(base) and parent not in out:
                    out[parent] = pafs.FileInfo(self._out(parent), pafs.FileType.Directory)
                    parent = parent.rsplit("/", 1)[0]
        for p in prefixes:
            p = p.rstrip("/")
            out.setdefault(p, pafs.FileInfo(self._out(p), pafs.FileType.Directory))
        if not out and not selector.allow_not_found and self._info(base).type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"{base}: no such object or prefix")
        return [out[k] for k in sorted(out)]

    # -- reading ---------------------------------------------------------

    def _opened(self, path: str) -> ShoalInputFile:
        url = self._u(path)
        with self._lock:
            known = self._known.get(url)
        if known is None or time.monotonic() - known[2] > KEEP:
            o = _shoal.stat(self.session, url)
            known = (o.size, o.version, 0.0)
        held = self._tails.get(url, known[1])
        return ShoalInputFile(self.session, url, known[0], known[1], self._forget, self._tails.put, held)

    def _forget(self, url: str) -> None:
        with self._lock:
            self._known.pop(url, None)
        self._tails.drop(url)

    def open_input_file(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(self._opened(path), mode="r")

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.PythonFile(self._opened(path), mode="r")

    # -- writing ---------------------------------------------------------

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return pa.PythonFile(_Upload(self.session, self._u(path)), mode="w")

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        raise NotImplementedError(f"append {self._u(path)}: object stores cannot append to an object (write a new one)")

    def create_dir(self, path: str, recursive: bool) -> None:
        pass  # no directories in object stores; a bucket must exist

    def delete_dir(self, path: str) -> None:
        raise NotImplementedError(f"delete_dir {self._u(path)}: not supported here; use shoal.rm or the CLI's rm -r")

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        raise NotImplementedError(
            f"delete_dir_contents {self._u(path)}: not supported here; use shoal.rm or the CLI's rm -r"
        )

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError("deleting every bucket's contents is not supported")

    def delete_file(self, path: str) -> None:
        from ._api import rm

        rm(self._u(path), session=self.session)

    def move(self, src: str, dest: str) -> None:
        raise NotImplementedError(f"move {self._u(src)}: not supported here; use the CLI's mv")

    def copy_file(self, src: str, dest: str) -> None:
        from ._api import copy

        copy(self._u(src), self._u(dest), session=self.session)


class ShoalInputFile(io.RawIOBase):
    """One object as a seekable file for ``pyarrow.PythonFile``: each read
    is a ranged read of the version opened (see the module)."""

    def __init__(
        self,
        session: _shoal.Session,
        url: str,
        size: int,
        version: str | None,
        forget: Any = None,
        keep: Any = None,
        held: tuple[int, bytes] | None = None,
    ) -> None:
        """``forget(url)`` is called when the object turned out replaced,
        ``keep(url, version, start, bytes)`` with the first read; ``held``
        is an earlier open's first read of this version."""
        super().__init__()
        self._forget = forget
        self._keep = keep
        self.session = session
        self.url = url
        self._size = size
        self.version = version
        self._pos = 0
        # (start, bytes) of the footer or whole file read on the first read.
        self._held = held
        self._first = held is None
        _exit.track(self)  # pyarrow releases it on its own threads

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def size(self) -> int:
        return self._size

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0:
            pos = offset
        elif whence == 1:
            pos = self._pos + offset
        elif whence == 2:
            pos = self._size + offset
        else:
            raise ValueError(f"seek {self.url}: whence must be 0, 1 or 2, not {whence}")
        if pos < 0:
            raise ValueError(f"seek {self.url}: negative position {pos}")
        self._pos = pos
        return pos

    def read(self, n: int = -1) -> bytes:
        return self._read(n, False)

    def read_buffer(self, n: int = -1) -> Any:
        """What ``pyarrow.PythonFile`` asks for when it can (every read of
        a parquet file): the bytes in a ``pyarrow.Buffer`` over memory
        shoal reuses, where each big ``bytes`` is new pages, a page fault
        each (see ``_shoal.cat_buffer``)."""
        return self._read(n, True)

    def _read(self, n: int | None, buffer: bool) -> Any:
        start = self._pos
        end = self._size if n is None or n < 0 else min(self._size, start + n)
        if end <= start:
            return b""
        try:
            data = self._range(start, end, buffer)
        except _changed():
            if self._forget is not None:
                self._forget(self.url)  # the next open asks the store again
            raise
        self._pos = end
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def _range(self, start: int, end: int, buffer: bool = False) -> Any:
        held = self._held
        if held is not None and held[0] <= start and end <= held[0] + len(held[1]):
            return held[1][start - held[0] : end - held[0]]
        if self._first:
            self._first = False
            if self._size <= WHOLE:
                # Whole: one request, verified against the store's checksum.
                data = _shoal.cat(self.session, self.url, version=self.version)
                self._hold(0, data)
                return data[start:end]
            if end > self._size - FOOTER:
                # The footer read: the tail, kept for the metadata reads after.
                at = min(start, self._size - FOOTER)
                data = _shoal.cat(self.session, self.url, start=at, end=self._size, version=self.version)
                self._hold(at, data)
                return data[start - at : end - at]
        cat = _shoal.cat_buffer if buffer else _shoal.cat
        return cat(self.session, self.url, start=start, end=end, version=self.version)

    def _hold(self, at: int, data: bytes) -> None:
        self._held = (at, data)
        if self._keep is not None:
            self._keep(self.url, self.version, at, data)


def _changed() -> type:
    from .errors import ChangedError

    return ChangedError


class _Upload(io.RawIOBase):
    """A write held in memory and uploaded whole on close (an object is
    the old one or the whole new one)."""

    def __init__(self, session: _shoal.Session, url: str) -> None:
        super().__init__()
        self.session = session
        self.url = url
        self._buf = io.BytesIO()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        return self._buf.write(b)

    def tell(self) -> int:
        return self._buf.tell()

    def close(self) -> None:
        if self.closed:
            return
        data = self._buf.getvalue()
        super().close()
        _shoal.put(self.session, self.url, data)
