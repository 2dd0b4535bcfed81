"""An fsspec filesystem on shoal's engine.

Protocol ``shoal``, with the store's scheme as the first path level:
``shoal://gs/bucket/key`` and ``shoal://s3/bucket/key``. One protocol name
of its own, so installing shoal never changes what ``gs://`` or ``s3://``
mean for code that uses gcsfs or s3fs; plain ``gs://…``/``s3://…`` URLs are
accepted as paths too. A store named in the config file
(``[stores.NAME]``, see the README's "Named stores") is a first level of its
own: ``shoal://NAME/bucket/key`` (or ``NAME://bucket/key``). To serve ``gs://`` and ``s3://`` themselves (pandas,
pyarrow, xarray…), opt in::

    import shoal.fsspec
    shoal.fsspec.register(override=True)
    pandas.read_csv("gs://bucket/table.csv")

What pandas does with a ``gs://`` or ``s3://`` URL after that: ``read_csv``,
``read_json`` and the other readers built on fsspec take the registered
filesystem, so shoal. ``read_parquet`` and ``to_parquet`` (pyarrow engine)
do not when ``storage_options`` is None, the default: pandas first asks
pyarrow for a filesystem of its own for the URL (``pyarrow.fs.
FileSystem.from_uri``), and gets pyarrow's GCS or S3 client, which knows
nothing of shoal's endpoint, credentials or retries (against an emulator it
may wait for metadata servers for many minutes). Any ``storage_options``,
even ``{}``, sends pandas to fsspec, hence to shoal; ``filesystem=`` does
too. :mod:`shoal.pandas` needs neither::

    import shoal.pandas
    df = shoal.pandas.read_parquet("gs://bucket/table.parquet")
    shoal.pandas.to_parquet(df, "s3://bucket/copy.parquet")

Object stores have no directories: a "directory" is a key prefix ending in
``/``; ``mkdir`` creates buckets only, and an empty directory cannot exist.
Buckets are the directories of a store: ``ls("gs")`` (``ls("gs://")``) and
``ls("s3")`` list them, ``ls("")`` both stores' (``gs/b1``, ``s3/b2``; on
the ``gs://``/``s3://`` filesystems of :func:`register`, that store's).

Writes store what the CLI's flags store, as keywords of ``open(path,
"wb", ...)``, ``pipe_file`` and ``put_file``: ``content_type`` (default:
guessed from the name), ``cache_control``, ``content_disposition``,
``metadata`` (a dict of str) and ``storage_class``; ``info`` shows them
back. ``sign(path, expiration)`` makes a presigned URL
(:func:`shoal.presign`).

Writes through ``open(..., "wb")`` are held in memory (or a temporary file
past 64 MiB) and uploaded on ``close`` with shoal's parallel multipart path,
so an object is always the old one or the whole new one:

- an exception leaving ``with fs.open(...)`` (binary or text mode) uploads
  nothing and keeps the old object;
- with ``autocommit=False``, or inside ``with fs.transaction:``, ``close``
  uploads nothing either: ``commit()`` does (the transaction commits every
  file when its block ends without an exception), ``discard()`` drops it,
  and a transaction left by an exception commits none of its files;
- ``"xb"`` and ``"ab"`` on a missing object create it only if it still does
  not exist when it is written (a server-side precondition). Object stores
  cannot append in place: ``"ab"`` on an existing object is refused (an
  ``UnsupportedError``, a ``NotImplementedError``) rather than replacing it
  with the appended bytes alone.

A file opened for reading reads the version it first saw (GCS generation,
S3 ETag): if the object is replaced while the file is open, the next read
raises ``ChangedError`` instead of returning a mix of both versions. The
size and version an ``ls``/``find``/``info`` gave are kept for 30 s for
the ``open`` of that file, so opening after a listing costs no HEAD
(pyarrow's fsspec bridge asks ``info`` then ``open``: one HEAD, not two);
otherwise the open costs one. A file changed between the listing and the
open is therefore ``ChangedError`` at its first read (never a mix of
versions): open it again.

Reads of an open file use :class:`ReadAheadCache` (``cache_type="shoal"``,
the default here): the footer first, then column chunks fetched exactly,
and a read-ahead only for sequential reads. ``cat_ranges`` reads all its
ranges at once in Rust (near ranges of one object joined), which is what
Dask's parquet reader and ``fsspec.parquet`` call. Figures:
docs/python-reads.md.

``cat``/``cat_file`` of a whole object, and a file whose first read takes
the whole object, are checked against the store's checksum (CRC32C,
CRC32, CRC64NVME, composite, else MD5: ``IntegrityError`` on a mismatch).
A byte range is not (no stored checksum covers part of an object): block
reads of a bigger file are only pinned to its version and their length.
"""

from __future__ import annotations

import functools
import io
import os
import re
import tempfile
import time
import weakref
from glob import has_magic
from typing import Any

import fsspec
import fsspec.asyn
from fsspec.asyn import AsyncFileSystem
from fsspec.caching import BaseCache, register_cache
from fsspec.implementations.local import make_path_posix, trailing_sep
from fsspec.spec import AbstractBufferedFile
from fsspec.utils import other_paths

from . import _exit, _shoal
from ._api import _split_shape, presign, write_keywords
from ._session import resolve
from ._tails import Tails

#: A store's name as a URL scheme (gs, s3, or a config file's NAME).
_STORE_NAME = re.compile(r"[a-z][a-z0-9._-]*")
_STORE_URL = re.compile(r"([a-z][a-z0-9._-]*)://")

#: Past this, a file opened for writing spills to a temporary file.
_SPILL = 64 << 20


class ShoalFileSystem(AsyncFileSystem):
    """``shoal://gs/bucket/key`` and ``shoal://s3/bucket/key``.

    Keywords are shoal's configuration (``endpoint_url``, ``key``,
    ``secret``, ``no_sign_request``, ``workers``…, see ``shoal.session``),
    or ``session=``.
    """

    protocol: Any = ("shoal",)
    root_marker = ""
    async_impl = True
    #: The store scheme when paths do not carry it (``gs``/``s3`` subclasses).
    scheme: str | None = None

    def __init__(
        self,
        *args: Any,
        session: _shoal.Session | None = None,
        asynchronous: bool = False,
        loop: Any = None,
        batch_size: int | None = None,
        version_aware: bool = False,
        **options: Any,
    ):
        super().__init__(
            *args,
            asynchronous=asynchronous,
            loop=loop,
            batch_size=batch_size,
            session=session,
            version_aware=version_aware,
            **options,
        )
        self.session = resolve(session, options)
        #: As s3fs's and gcsfs's: paths may name a stored version
        #: (``s3/b/k?versionId=V``, ``gs/b/k#GENERATION``), ``ls`` takes
        #: ``versions=True`` and ``open``/``info``/``cat_file`` take
        #: ``version_id=``.
        self.version_aware = version_aware
        # path -> (info of a file, when): what the last listing or stat
        # gave, for opens within _KEEP seconds (see `_open`).
        self._known: dict[str, tuple[dict[str, Any], float]] = {}
        # First reads (footers, small files), for the next open of the
        # same version (pyarrow opens a dataset's first file twice).
        self._tails = Tails(_TAILS)

    def _keep(self, info: dict[str, Any]) -> dict[str, Any]:
        self._known[info["name"]] = (info, time.monotonic())
        return info

    def _kept(self, path: str) -> dict[str, Any] | None:
        """What a listing or stat said of ``path`` in the last _KEEP s."""
        known = self._known.get(path)
        if known is not None and time.monotonic() - known[1] <= _KEEP:
            return known[0]
        return None

    def _forget(self, path: str) -> None:
        # The path, and its parents (a folder may have lost its last file).
        path = self._strip_protocol(path)
        try:
            self._tails.drop(self._url(path))
        except ValueError:
            pass  # not an object's path
        while path:
            self._known.pop(path, None)
            path = path.rpartition("/")[0]

    # -- paths -----------------------------------------------------------

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = fsspec.utils.stringify_path(path)
        for proto in cls._protocols():
            if path.startswith(proto + "://"):
                path = path[len(proto) + 3 :]
                break
            if path.startswith(proto + "::"):
                path = path[len(proto) + 2 :]
                break
        else:
            if cls.scheme is None:
                # gs://b/k, s3://b/k and NAME://b/k (a store of the config
                # file) name the same objects as gs/b/k, s3/b/k, NAME/b/k.
                m = _STORE_URL.match(path)
                if m:
                    path = m.group(1) + "/" + path[m.end() :]
        return path.rstrip("/")

    @classmethod
    def _protocols(cls) -> tuple[str, ...]:
        p = cls.protocol
        return (p,) if isinstance(p, str) else tuple(p)

    def unstrip_protocol(self, name: str) -> str:
        return f"{self._protocols()[0]}://{self._strip_protocol(name)}"

    def _url(self, path: str) -> str:
        """The shoal URL (``gs://bucket/key``) of an fsspec path."""
        path = self._strip_protocol(path)
        if self.scheme is not None:
            return f"{self.scheme}://{path}"
        scheme, _, rest = path.partition("/")
        if not _STORE_NAME.fullmatch(scheme) or scheme == "file" or not rest:
            raise ValueError(
                f"{path!r}: shoal paths start with the store, e.g. 'gs/bucket/key' (shoal://gs/bucket/key), or a "
                "store named in the config file (shoal://NAME/bucket/key)"
            )
        return f"{scheme}://{rest}"

    def _path(self, url: str) -> str:
        """The fsspec path of a shoal URL."""
        scheme, _, rest = url.partition("://")
        rest = rest.rstrip("/")
        return rest if self.scheme is not None else f"{scheme}/{rest}"

    def _split_version(self, path: str, version_id: Any = None) -> tuple[str, str | None]:
        """``path`` without a version suffix, and the version it or
        ``version_id`` names (None: the current object). Suffixes are read
        only by a ``version_aware`` filesystem, as s3fs and gcsfs do (a key
        may hold ``#`` or ``?``)."""
        path = self._strip_protocol(path)
        named = None
        if self.version_aware:
            if self._url(path).startswith("s3://"):
                base, sep, v = path.rpartition("?versionId=")
                if sep:
                    path, named = base, v
            else:
                base, sep, v = path.rpartition("#")
                if sep and v.isdigit():
                    path, named = base, v
        if version_id is not None:
            if not self.version_aware:
                raise ValueError("version_id= needs a filesystem made with version_aware=True")
            if named is not None and named != str(version_id):
                raise ValueError(f"{path}: the path names version {named} and version_id= {version_id}")
            named = str(version_id)
        return path, named

    def _versioned_name(self, o: _shoal.ObjectInfo) -> str:
        path = self._path(o.url)
        if o.version_id is not None:
            return f"{path}?versionId={o.version_id}"
        return f"{path}#{o.generation}" if o.generation is not None else path

    def _is_root(self, path: str) -> bool:
        path = self._strip_protocol(path)
        # Without a scheme, the first level is the stores: gs, s3, NAME.
        return path == "" or (self.scheme is None and "/" not in path)

    def _is_bucket(self, path: str) -> bool:
        return "/" not in self._url(path).partition("://")[2]

    # -- metadata --------------------------------------------------------

    def _file_info(self, o: _shoal.ObjectInfo) -> dict[str, Any]:
        return {
            "name": self._path(o.url),
            "size": o.size,
            "type": "file",
            "mtime": o.updated,
            "crc32c": o.crc32c,
            "md5": o.md5,
            "crc32": o.crc32,
            "crc64nvme": o.crc64nvme,
            "composite": o.composite,
            "composite_algorithm": o.composite_algorithm,
            "version": o.version,
            "generation": o.generation,
            "version_id": o.version_id,
            # s3fs's name for it.
            "VersionId": o.version_id,
            "is_latest": o.is_latest,
            "delete_marker": o.delete_marker,
            "storage_class": o.storage_class,
            "content_encoding": o.content_encoding,
            # What a stat shows (None/empty in listings).
            "content_type": o.content_type,
            "cache_control": o.cache_control,
            "content_disposition": o.content_disposition,
            "metadata": o.metadata,
        }

    def _dir_info(self, path: str) -> dict[str, Any]:
        return {"name": self._strip_protocol(path), "size": 0, "type": "directory"}

    async def _info(self, path: str, version_id: Any = None, **kwargs: Any) -> dict[str, Any]:
        return await _run_async(self._info_steps(path, version_id))

    def _info_steps(self, path: str, version_id: Any = None) -> Any:
        """``info``'s steps: a generator that yields the engine calls it
        needs (see :func:`_run_async`, :func:`_run_blocking`)."""
        path, version = self._split_version(path, version_id)
        if version is not None:
            # One stored version: never kept for opens of the current one.
            return self._file_info((yield _Call("stat_version", self.session, self._url(path), version)))
        if self._is_root(path):
            return self._dir_info(path)
        kept = self._kept(path)
        if kept is not None:
            return kept
        url = self._url(path)
        if self._is_bucket(path):
            # Raises NotFoundError when the bucket does not exist.
            yield _Call("list_prefix", self.session, url + "/", delimiter=True, detail="name", limit=1)
            return self._dir_info(path)
        try:
            return self._keep(self._file_info((yield _Call("stat", self.session, url))))
        except FileNotFoundError:
            pass
        objs, prefixes = yield _Call("list_prefix", self.session, url + "/", delimiter=True, detail="name", limit=1)
        if objs or prefixes:
            return self._keep(self._dir_info(path))
        raise FileNotFoundError(path)

    async def _ls(self, path: str, detail: bool = True, versions: bool = False, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        if self._is_root(path):
            out = await self._ls_buckets(path)
            return out if detail else [i["name"] for i in out]
        url = self._url(path)
        if versions:
            if not self.version_aware:
                raise ValueError("ls(versions=True) needs a filesystem made with version_aware=True")
            return await self._ls_versions(path, url, detail)
        objs, prefixes = await _shoal.list_prefix_async(self.session, url + "/", delimiter=True, detail="full")
        out = [self._keep(self._file_info(o)) for o in objs if not o.key.endswith("/")]
        out += [self._dir_info(self._path(p)) for p in prefixes]
        if not out:
            if self._is_bucket(path):
                return []
            info = await self._info(path)  # a file, or FileNotFoundError
            out = [info]
        out.sort(key=lambda i: i["name"])
        return out if detail else [i["name"] for i in out]

    async def _ls_versions(self, path: str, url: str, detail: bool) -> list[Any]:
        """Every stored version of the objects one level below ``path``
        (or of the object ``path``), named with their version suffix so
        each can be opened as it is; and the level's folders."""
        objs, prefixes = await _shoal.list_versions_async(self.session, url + "/", recursive=False)
        if not objs and not prefixes:
            objs, prefixes = await _shoal.list_versions_async(self.session, url, recursive=False)
        out = [dict(self._file_info(o), name=self._versioned_name(o)) for o in objs if not o.key.endswith("/")]
        out += [self._dir_info(self._path(p)) for p in prefixes]
        if not out and not self._is_bucket(path):
            raise FileNotFoundError(path)
        return out if detail else [i["name"] for i in out]

    def object_version_info(self, path: str) -> list[dict[str, Any]]:
        """Every stored version of one object, newest first on S3 (as
        s3fs's ``object_version_info``): noncurrent ones and delete
        markers too."""
        if not self.version_aware:
            raise ValueError("object_version_info needs a filesystem made with version_aware=True")
        path, _ = self._split_version(path)
        objs, _ = _shoal.list_versions(self.session, self._url(path), recursive=False)
        return [dict(self._file_info(o), name=self._versioned_name(o)) for o in objs]

    async def _ls_buckets(self, path: str) -> list[dict[str, Any]]:
        """The buckets below a root: one store's (``gs``, ``s3``, or the
        scheme of a ``gs://``/``s3://`` filesystem), or both stores' for
        ``""``, as directories. A store that cannot list (no credentials,
        no GCS project) raises, naming what to configure."""
        if self.scheme is not None:
            schemes = [self.scheme]
        else:
            schemes = [path] if path else ["gs", "s3"]
        out = []
        for scheme in schemes:
            for name, created in await _shoal.list_buckets_async(self.session, scheme):
                info = self._dir_info(self._path(f"{scheme}://{name}"))
                info["created"] = created
                out.append(info)
        out.sort(key=lambda i: i["name"])
        return out

    async def _glob(self, path: str, maxdepth: int | None = None, **kwargs: Any) -> Any:
        """fsspec's glob, and the patterns it refuses that the CLI and
        :func:`shoal.glob` take: ``**`` inside a level (``b/**.css``: every
        ``.css`` at any depth below ``b/``), expanded by shoal's lister (one
        listing of the literal prefix, matched in Rust). Objects only, as
        ``shoal.glob`` gives them; nothing matched is ``[]``."""
        stripped = self._strip_protocol(path)
        if maxdepth is not None or not any("**" in part and part != "**" for part in stripped.split("/")):
            return await super()._glob(path, maxdepth=maxdepth, **kwargs)
        try:
            objs = await _shoal.expand_async(self.session, self._url(stripped), recursive=False)
        except FileNotFoundError:
            objs = []
        infos = [self._keep(self._file_info(o)) for o in objs if not o.key.endswith("/")]
        if kwargs.get("detail", False):
            return {i["name"]: i for i in infos}
        return [i["name"] for i in infos]

    async def _find(
        self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False, **kwargs: Any
    ) -> Any:
        stripped = self._strip_protocol(path)
        if maxdepth is not None or self._is_root(stripped):
            return await super()._find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        return await _run_async(self._find_steps(stripped, withdirs, detail))

    def _find_steps(self, path: str, withdirs: bool, detail: bool) -> Any:
        """``find``'s steps below a bucket or folder (one listing), as
        :meth:`_info_steps`."""
        url = self._url(path)
        objs, _ = yield _Call("list_prefix", self.session, url + "/", delimiter=False, detail="full")
        out: dict[str, dict[str, Any]] = {}
        for o in objs:
            if o.key.endswith("/"):
                continue
            info = self._keep(self._file_info(o))
            out[info["name"]] = info
            if withdirs:
                parent = self._parent(info["name"])
                while len(parent) > len(path) and parent not in out:
                    out[parent] = self._dir_info(parent)
                    parent = self._parent(parent)
        if not out:
            try:
                info = yield from self._info_steps(path)
            except FileNotFoundError:
                info = None
            if info is not None and info["type"] == "file":
                out[path] = info
        elif withdirs and not self._is_bucket(path):
            out[path] = self._dir_info(path)
        names = sorted(out)
        return {n: out[n] for n in names} if detail else names

    # -- the same, answered on the caller's thread ---------------------
    #
    # pyarrow's fsspec bridge (``pq.read_table(..., filesystem=fs)``,
    # ``pd.read_parquet("shoal://...")``, Dask) asks ``info``, ``isdir``,
    # ``exists`` and ``find`` while it plans a read, and ``isfile`` before
    # each file it opens, from its own threads. fsspec's sync wrappers hand
    # each call to the filesystem's event-loop thread and wait for the
    # answer: two thread switches per call even when the answer is the
    # size a listing kept. A synchronous filesystem answers these on the
    # calling thread instead, with the engine's blocking calls (the GIL
    # released while a request is out); the steps are the async methods'.

    def info(self, path: str, version_id: Any = None, **kwargs: Any) -> dict[str, Any]:
        if self.asynchronous:
            return fsspec.asyn.sync(self.loop, self._info, path, version_id=version_id, **kwargs)
        return _run_blocking(self._info_steps(path, version_id))

    def isfile(self, path: str) -> bool:
        try:
            return self.info(path)["type"] == "file"
        except Exception:
            return False

    def isdir(self, path: str) -> bool:
        try:
            return self.info(path)["type"] == "directory"
        except OSError:
            return False

    def exists(self, path: str, **kwargs: Any) -> bool:
        try:
            self.info(path, **kwargs)
            return True
        except FileNotFoundError:
            return False

    def find(
        self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False, **kwargs: Any
    ) -> Any:
        stripped = self._strip_protocol(path)
        if self.asynchronous or maxdepth is not None or self._is_root(stripped):
            return fsspec.asyn.sync(
                self.loop, self._find, path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs
            )
        return _run_blocking(self._find_steps(stripped, withdirs, detail))

    def find_iter(self, path: str, detail: bool = False) -> Any:
        """:meth:`find` as an iterator: every file below ``path``, in name
        order, as names (or ``(name, info)`` pairs with ``detail``),
        streamed page by page from the store, so memory stays bounded
        however many there are (``find`` must return them all at once).
        A path naming one file yields that file; a path naming nothing
        yields nothing, as ``find`` returns nothing."""
        from ._api import iter_objects

        path = self._strip_protocol(path)
        if self._is_root(path):
            raise NotImplementedError("listing buckets is not supported; find below gs/BUCKET or s3/BUCKET")
        url = self._url(path)
        found = False
        for o in iter_objects(
            url.rstrip("/") + "/", recursive=True, detail="full" if detail else "name", session=self.session
        ):
            if o.key.endswith("/"):
                continue
            found = True
            name = self._path(o.url)
            yield (name, self._file_info(o)) if detail else name
        if not found and not self._is_bucket(path):
            try:
                info = self.info(path)
            except FileNotFoundError:
                return
            if info["type"] == "file":
                yield (path, info) if detail else path

    # -- bytes -----------------------------------------------------------

    async def _cat_file(
        self, path: str, start: int | None = None, end: int | None = None, version_id: Any = None, **kwargs: Any
    ) -> bytes:
        # One GET: its answer gives the size, version and checksum a HEAD
        # would have (shoal_transfer::into_memory).
        path, version = self._split_version(path, version_id)
        return await _shoal.cat_async(self.session, self._url(path), start=start, end=end, version_id=version)

    async def _cat(
        self, path: Any, recursive: bool = False, on_error: str = "raise", batch_size: int | None = None, **kwargs: Any
    ) -> Any:
        """``cat`` of one object or many (a list, a glob, ``recursive``):
        the objects are read by the engine in one call, every GET in flight
        at once (up to the session's small-object workers) with the GIL
        released, each whole object verified as ``shoal cat`` verifies it.
        fsspec's own ``_cat`` made one Python coroutine and one crossing
        into the engine per object, in batches of ``batch_size``. Answers
        as fsspec's does: the bytes of a single path, else a dict of path
        to bytes (``on_error``: ``"raise"`` the first error, ``"omit"`` the
        failed paths, ``"return"`` their exceptions). With ``recursive``,
        the objects below a folder (fsspec's own ``_cat`` failed on the
        folder itself)."""
        paths = await self._expand_path(path, recursive=recursive)
        if recursive:
            # fsspec's expansion names the folders too; only objects have
            # bytes (an object with a folder's name, stat'ed, stays).
            folders: set[str] = set()
            for q in paths:
                q = q.rpartition("/")[0]
                while q and q not in folders:
                    folders.add(q)
                    q = q.rpartition("/")[0]
            paths = [p for p in paths if p not in folders or (self._kept(p) or {}).get("type") == "file"]
        if not paths:  # only folders matched: nothing has bytes
            raise FileNotFoundError(f"{path}: no object to read")
        n = len(paths)
        start, end = kwargs.get("start"), kwargs.get("end")
        urls = [self._url(p) for p in paths]
        out = await _shoal.cat_ranges_async(self.session, urls, [start] * n, [end] * n)
        if on_error == "raise":
            for r in out:
                if isinstance(r, BaseException):
                    raise r
        if n > 1 or isinstance(path, list) or paths[0] != self._strip_protocol(path):
            return {
                k: v for k, v in zip(paths, out, strict=True) if on_error != "omit" or not isinstance(v, BaseException)
            }
        return out[0]

    async def _cat_ranges(
        self,
        paths: list[str],
        starts: Any,
        ends: Any,
        max_gap: int | None = None,
        batch_size: int | None = None,
        on_error: str = "return",
        **kwargs: Any,
    ) -> list[Any]:
        """Many ranges read at once by the engine (Dask's and
        ``fsspec.parquet``'s column-chunk reads): all in flight together
        with the GIL released, ranges of one object at most ``max_gap``
        bytes apart (default 8 KiB, Arrow's hole limit) joined into one
        request. A list in order: bytes, or (``on_error="return"``) the
        exception a range raised."""
        if not isinstance(paths, list):
            raise TypeError("paths must be a list")
        n = len(paths)
        starts = [starts] * n if not isinstance(starts, list) else starts
        ends = [ends] * n if not isinstance(ends, list) else ends
        if len(starts) != n or len(ends) != n:
            raise ValueError(
                f"cat_ranges: {n} paths, {len(starts)} starts and {len(ends)} ends: give one of each per path"
            )
        urls = [self._url(p) for p in paths]
        hole = _HOLE if max_gap is None else max_gap
        out = await _shoal.cat_ranges_async(self.session, urls, starts, ends, hole=hole)
        if on_error == "raise":
            for r in out:
                if isinstance(r, BaseException):
                    raise r
        return out

    async def _pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        """Writes ``value`` as the object; keywords: what it stores beside
        its bytes (see the module)."""
        write = write_keywords("pipe_file", kwargs)
        self._forget(path)
        try:
            await _shoal.put_async(self.session, self._url(path), bytes(value), if_not_exists=mode == "create", **write)
        except _shoal_errors().PreconditionError as e:
            raise FileExistsError(path) from e

    async def _put_file(
        self, lpath: str, rpath: str, callback: Any = None, mode: str = "overwrite", **kwargs: Any
    ) -> None:
        """Uploads a local file (multipart when big); keywords: what it
        stores beside its bytes (see the module; the type is guessed from
        the local file's name)."""
        write = write_keywords("put_file", kwargs)
        if os.path.isdir(lpath):
            return  # no directories in object stores
        self._forget(rpath)
        try:
            await _shoal.upload_async(
                self.session, os.fspath(lpath), self._url(rpath), if_not_exists=mode == "create", **write
            )
        except _shoal_errors().PreconditionError as e:
            raise FileExistsError(rpath) from e

    async def _get_file(self, rpath: str, lpath: str, callback: Any = None, **kwargs: Any) -> None:
        if os.path.isdir(lpath):
            return
        self._refuse_key(rpath, lpath)
        await _shoal.download_async(self.session, self._url(rpath), os.fspath(lpath))

    def _refuse_key(self, rpath: str, lpath: str) -> None:
        """fsspec's recursive `get` makes local paths by joining the remote
        names under the target folder as strings, so a key with a `..`
        segment would land outside it, and `a//b` or `a/./b` would land on
        the file of `a/b`. Such keys are refused before any download
        (shoal's rule for keys as paths: docs/keys.md)."""
        segments = self._strip_protocol(rpath).split("/")
        why = None
        if ".." in segments:
            why = f"the key has a '..' segment, which could write outside {os.path.dirname(os.fspath(lpath)) or '.'}"
        elif ("" in segments or "." in segments) and _aliased(os.fspath(lpath)):
            why = f"the key has an empty or '.' segment, so its local path {os.fspath(lpath)} is also another key's"
        if why is not None:
            url = self._url(rpath)
            errors = _shoal_errors()
            raise errors.new(errors.InvalidInputError, f"download {url}: not copied: {why} (see docs/keys.md)", url)

    async def _pairs(self, path1: Any, path2: Any, recursive: bool, maxdepth: int | None) -> list[tuple[str, str]]:
        """The ``(source, destination)`` paths fsspec's ``copy`` makes of
        its arguments (its own rules: a glob, a folder, a trailing ``/``)."""
        if isinstance(path1, list) and isinstance(path2, list):
            return list(zip(path1, path2, strict=False))
        source_is_str = isinstance(path1, str)
        paths1 = await self._expand_path(path1, maxdepth=maxdepth, recursive=recursive)
        if source_is_str and (not recursive or maxdepth is not None):
            paths1 = [p for p in paths1 if not (trailing_sep(p) or await self._isdir(p))]
        if not paths1:
            return []
        source_is_file = len(paths1) == 1
        dest_is_dir = isinstance(path2, str) and (trailing_sep(path2) or await self._isdir(path2))
        exists = source_is_str and (
            (has_magic(path1) and source_is_file) or (not has_magic(path1) and dest_is_dir and not trailing_sep(path1))
        )
        paths2 = other_paths(paths1, path2, exists=exists, flatten=not source_is_str)
        return [(a, b) for a, b in zip(paths1, paths2, strict=True) if not (trailing_sep(a) or await self._isdir(a))]

    async def _copy(
        self,
        path1: Any,
        path2: Any,
        recursive: bool = False,
        on_error: str | None = None,
        maxdepth: int | None = None,
        batch_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        """fsspec's ``copy``, run as one plan: every pair goes to the
        engine at once, which refuses a plan where one pair writes what
        another reads (copying a folder into its own subfolder, say)
        before anything is copied."""
        if on_error is None:
            on_error = "ignore" if recursive else "raise"
        pairs = await self._pairs(path1, path2, recursive, maxdepth)
        if not pairs:
            return
        results = await _shoal.copy_many_async(self.session, [(self._url(a), self._url(b)) for a, b in pairs])
        for _, b in pairs:
            self._forget(b)
        for r in results:
            if isinstance(r, BaseException) and not (on_error == "ignore" and isinstance(r, FileNotFoundError)):
                raise r

    async def _mv(
        self, path1: Any, path2: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any
    ) -> None:
        """Moves as ``shoal mv`` does, not as fsspec's copy-then-``rm``:
        each source is deleted only once its copy is verified, and only at
        the version that was copied; a plan where one pair writes or reads
        what another moves away is refused before anything runs."""
        if path1 == path2:
            return
        pairs = await self._pairs(path1, path2, recursive, maxdepth)
        if not pairs:
            raise FileNotFoundError(path1)
        results = await _shoal.move_many_async(self.session, [(self._url(a), self._url(b)) for a, b in pairs])
        self.invalidate_cache()
        for r in results:
            if isinstance(r, BaseException):
                raise r

    def mv(self, path1: Any, path2: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any) -> None:
        return fsspec.asyn.sync(self.loop, self._mv, path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    move = mv

    async def _get(
        self,
        rpath: Any,
        lpath: Any,
        recursive: bool = False,
        callback: Any = None,
        maxdepth: int | None = None,
        **kwargs: Any,
    ) -> None:
        """fsspec's ``get`` as one plan: the pairs fsspec's rules make, each
        key checked as a local name (:meth:`_get_file`), the local folders
        made by the engine from the destination down without following a
        link inside it (fsspec's own ``get`` makes them with
        ``os.makedirs``, which follows one out of the destination)."""
        if isinstance(lpath, list) and isinstance(rpath, list):
            pairs, root = list(zip(rpath, lpath, strict=False)), None
        else:
            source_is_str = isinstance(rpath, str)
            not_trailing = source_is_str and not trailing_sep(rpath)
            rpath = self._strip_protocol(rpath)
            rpaths = await self._expand_path(rpath, recursive=recursive, maxdepth=maxdepth)
            if source_is_str and (not recursive or maxdepth is not None):
                rpaths = [p for p in rpaths if not (trailing_sep(p) or await self._isdir(p))]
            if not rpaths:
                return
            lpath = make_path_posix(lpath)
            dest_is_dir = isinstance(lpath, str) and (trailing_sep(lpath) or os.path.isdir(lpath))
            exists = source_is_str and (
                (has_magic(rpath) and len(rpaths) == 1) or (not has_magic(rpath) and dest_is_dir and not_trailing)
            )
            lpaths = other_paths(rpaths, lpath, exists=exists, flatten=not source_is_str)
            pairs = [(r, lp) for r, lp in zip(rpaths, lpaths, strict=True) if not await self._isdir(r)]
            base = lpath.rstrip("/")
            root = base if all(lp.startswith(base + "/") for _, lp in pairs) else None
        for r, lp in pairs:
            self._refuse_key(r, lp)
        if root is None:
            # Each file's own folder is its destination: made as fsspec does.
            for _, lp in pairs:
                os.makedirs(os.path.dirname(os.path.abspath(lp)), exist_ok=True)
        elif not os.path.isdir(root):
            os.makedirs(root, exist_ok=True)
        if callback is not None:
            callback.set_size(len(pairs))
        results = await _shoal.copy_many_async(
            self.session, [(self._url(r), os.fspath(lp)) for r, lp in pairs], local_root=root
        )
        for r in results:
            if isinstance(r, BaseException):
                raise r
            if callback is not None:
                callback.relative_update(1)

    async def _cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        self._forget(path2)
        (r,) = await _shoal.copy_many_async(self.session, [(self._url(path1), self._url(path2))])
        if isinstance(r, BaseException):
            raise r

    async def _rm_file(self, path: str, **kwargs: Any) -> None:
        self._forget(path)
        (r,) = await _shoal.delete_many_async(self.session, [self._url(path)])
        if r is not None:
            raise r

    async def _rm(self, path: Any, recursive: bool = False, maxdepth: int | None = None, **kwargs: Any) -> None:
        paths = await self._expand_path(path, recursive=recursive, maxdepth=maxdepth)
        files = []
        for p in paths:
            try:
                if (await self._info(p))["type"] == "file":
                    files.append(p)
            except FileNotFoundError:
                pass
        for p in files:
            self._forget(p)
        results = await _shoal.delete_many_async(self.session, [self._url(p) for p in files])
        for r in results:
            if r is not None and not isinstance(r, FileNotFoundError):
                raise r

    async def _mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        if self._is_root(path):
            return
        if self._is_bucket(path):
            try:
                await _shoal.make_bucket_async(self.session, self._url(path))
            except _shoal_errors().PreconditionError:
                pass
            except _shoal_errors().RejectedError as e:
                if e.status != 409:  # already exists (and is ours)
                    raise

    async def _makedirs(self, path: str, exist_ok: bool = False) -> None:
        await self._mkdir(path)

    def setxattrs(
        self,
        path: str,
        content_type: str | None = None,
        content_encoding: str | None = None,
        fixed_key_metadata: dict[str, str] | None = None,
        **kwargs: str | None,
    ) -> None:
        """Changes an object's metadata on the server, as gcsfs's
        ``setxattrs``: ``content_type``, ``content_encoding``,
        ``fixed_key_metadata`` (``cache_control``, ``content_disposition``,
        ``content_encoding``) and custom metadata as keywords (a value of
        None removes the key); the rest is kept. Pinned to the version read
        (``shoal.update``): an object replaced meanwhile is left as it is
        and ``PreconditionError`` raised."""
        fixed = dict(fixed_key_metadata or {})
        unknown = set(fixed) - {"cache_control", "content_disposition", "content_encoding"}
        if unknown:
            raise ValueError(
                "setxattrs: fixed_key_metadata takes cache_control, content_disposition, content_encoding, not "
                f"{', '.join(sorted(unknown))}"
            )
        path, _ = self._split_version(self._strip_protocol(path))
        set_md = {k: v for k, v in kwargs.items() if v is not None}
        remove = [k for k, v in kwargs.items() if v is None]
        from ._api import update

        update(
            self._url(path),
            content_type=content_type,
            content_encoding=fixed.get("content_encoding", content_encoding),
            cache_control=fixed.get("cache_control"),
            content_disposition=fixed.get("content_disposition"),
            metadata=set_md or None,
            remove_metadata=remove or None,
            session=self.session,
        )
        self._forget(path)

    def sign(self, path: str, expiration: int = 100, **kwargs: Any) -> str:
        """A presigned URL for the object (:func:`shoal.presign`): usable
        without credentials for ``expiration`` seconds (1 s to 7 days);
        ``method="PUT"`` for a URL that writes it. The other keywords are
        those of Google's ``Blob.generate_signed_url``, as gcsfs passes
        them on (``headers``, ``query_parameters``, ``content_type``,
        ``virtual_hosted_style``, ``bucket_bound_hostname``,
        ``api_access_endpoint``...; see :func:`shoal.presign`). GCS signs
        with a service-account key (``GOOGLE_APPLICATION_CREDENTIALS``)."""
        method = kwargs.pop("method", "GET")
        shape = _split_shape(kwargs)
        if kwargs:
            raise TypeError(f"sign() got an unexpected keyword argument {next(iter(kwargs))!r}")
        return presign(self._url(path), expiration, method, session=self.session, **shape)

    def invalidate_cache(self, path: str | None = None) -> None:
        # Only what the next open takes (see _open) is kept.
        if path is None:
            self._known.clear()
        else:
            self._forget(path)

    def open(
        self,
        path: Any,
        mode: str = "rb",
        block_size: int | None = None,
        cache_options: Any = None,
        compression: str | None = None,
        **kwargs: Any,
    ) -> Any:
        # fsspec wraps text mode in a plain io.TextIOWrapper, whose exit
        # closes (and so would commit) the file even when an exception is
        # leaving the block; ours discards it then.
        if "b" not in mode:
            text = {k: kwargs.pop(k) for k in ("encoding", "errors", "newline") if k in kwargs}
            f = self.open(
                path,
                mode.replace("t", "") + "b",
                block_size=block_size,
                cache_options=cache_options,
                compression=compression,
                **kwargs,
            )
            return _TextFile(f, **text)
        if compression is not None and "r" not in mode:
            # fsspec's compressors (gzip.GzipFile and the like) never close
            # the file they write into, so ours would be committed when it
            # is collected, even after an exception: the wrapper closes it
            # (commits) only on a clean close.
            from fsspec.compression import compr
            from fsspec.core import get_compression

            raw = self.open(path, mode, block_size=block_size, cache_options=cache_options, **kwargs)
            raw._wrapped = True
            return _Compressed(compr[get_compression(path, compression)](raw, mode=mode[0]), raw)
        return super().open(
            path, mode, block_size=block_size, cache_options=cache_options, compression=compression, **kwargs
        )

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: int | None = None,
        autocommit: bool = True,
        cache_options: Any = None,
        **kwargs: Any,
    ) -> ShoalFile:
        if "x" in mode and self.exists(path):
            raise FileExistsError(path)
        if "a" in mode and self.exists(path):
            url = self._url(path)
            errors = _shoal_errors()
            raise errors.new(
                errors.UnsupportedError,
                f"append {url}: object stores cannot append to an existing object, and rewriting it whole is not done "
                "behind your back"
                " (read it and write the old and new bytes with mode 'wb', or write the new bytes as a new object)",
                url,
            )
        if mode != "rb":
            kwargs = write_keywords("open", kwargs)
            _shoal.check_write(self._url(path), **kwargs)
            self._forget(path)
        else:
            # The size and version a listing or stat gave in the last
            # _KEEP seconds serve this open, so it costs no HEAD (an object
            # replaced since fails its first read with ChangedError, which
            # drops them). Without them, one HEAD (size and version,
            # pinned from then on). A stored version is read by its id.
            path, version = self._split_version(path, kwargs.pop("version_id", None))
            known = self.info(path, version_id=version) if version is not None else self._kept(path)
            kwargs.setdefault("cache_type", ReadAheadCache.name)
            if known is not None and known["type"] == "file":
                kwargs["details"] = known
                if kwargs["cache_type"] == ReadAheadCache.name:
                    # An earlier open's first read of this version serves
                    # this one's; this one's first read serves the next.
                    url, version = self._url(path), known.get("version")
                    cache_options = {
                        "held": self._tails.get(url, version),
                        "keep": functools.partial(self._tails.put, url, version),
                        **(cache_options or {}),
                    }
        return ShoalFile(
            self,
            path,
            mode,
            block_size=block_size or "default",
            autocommit=autocommit,
            cache_options=cache_options,
            **kwargs,
        )


class _Call:
    """An engine call a step generator needs: ``_shoal.NAME(*args, **kw)``
    (blocking) or ``_shoal.NAME_async`` (awaited)."""

    __slots__ = ("name", "args", "kwargs")

    def __init__(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.name, self.args, self.kwargs = name, args, kwargs


async def _run_async(steps: Any) -> Any:
    """Runs a step generator, awaiting each engine call it yields."""
    try:
        call = next(steps)
        while True:
            try:
                got = await getattr(_shoal, call.name + "_async")(*call.args, **call.kwargs)
            except Exception as e:
                call = steps.throw(e)
            else:
                call = steps.send(got)
    except StopIteration as done:
        return done.value


def _run_blocking(steps: Any) -> Any:
    """Runs a step generator on the calling thread, each engine call it
    yields a blocking one."""
    try:
        call = next(steps)
        while True:
            try:
                got = getattr(_shoal, call.name)(*call.args, **call.kwargs)
            except Exception as e:
                call = steps.throw(e)
            else:
                call = steps.send(got)
    except StopIteration as done:
        return done.value


#: Seconds a listing's or stat's size and version serve opens: long enough
#: for a dataset's discovery and read (pyarrow opens the first file twice),
#: short enough that a long-lived filesystem does not keep old listings.
_KEEP = 30.0
#: Ranges of one object at most this far apart are read as one request by
#: `cat_ranges` (Arrow's own hole limit for coalescing column chunks).
_HOLE = 8 << 10
#: A file this small is read whole on its first read: one request,
#: verified against the store's checksum.
_WHOLE = 1 << 20
#: The tail read first (Arrow's parquet footer read is 64 KiB).
_FOOTER = 64 << 10
#: First read-ahead of a run of sequential reads; it doubles up to the
#: file's block size.
_AHEAD = 1 << 20
#: Bytes of first reads (footers, small files) kept for later opens of
#: the same version of the same object.
_TAILS = 4 << 20


class ReadAheadCache(BaseCache):
    """The read cache of a :class:`ShoalFile`, shaped for columnar formats
    and sequential reads alike.

    fsspec's default (``readahead``) turns every read into at least a
    block (5 MiB): reading one column of a parquet file, each small column
    chunk became a 5 MiB request (175 MiB fetched for 14 MiB needed).
    Here:

    - the first read near the end (a parquet/ORC footer) fetches the
      tail, from the read's start or :data:`_FOOTER` before the end,
      kept for the metadata reads after; a file of at most :data:`_WHOLE`
      bytes is read whole instead (verified: see the module);
    - a read that does not follow the previous one (a column chunk) is
      fetched exactly;
    - a small read that follows the previous one (a CSV read in pieces)
      starts a read-ahead of 1 MiB that doubles up to the block size, so
      sequential reading stays a few large requests. A read of 1 MiB or
      more is fetched exactly even when it follows the previous one:
      Arrow's coalesced column chunks of consecutive row groups are such
      reads, and reading ahead of them fetched bytes beyond the file's
      needs and copied every chunk twice under the GIL (sliced out of the
      longer answer, then joined to the next).
    """

    name = "shoal"

    def __init__(
        self,
        blocksize: int,
        fetcher: Any,
        size: int,
        held: tuple[int, bytes] | None = None,
        keep: Any = None,
        **kwargs: Any,
    ) -> None:
        """``held``: an earlier open's first read of this version, ``(start,
        bytes)``; ``keep(start, bytes)`` is called with this one's."""
        super().__init__(blocksize, fetcher, size)
        self._tail: tuple[int, bytes] | None = held
        self._keep = keep
        self._buf: tuple[int, bytes] = (0, b"")
        self._end = 0
        self._ahead = 0
        self._first = held is None

    def _fetch(self, start: int | None, stop: int | None, buffer: bool = False) -> Any:
        """The bytes ``[start, stop)``; with ``buffer`` (pyarrow's
        ``read_buffer``), a read fetched exactly comes as a
        ``pyarrow.Buffer`` over memory shoal reuses."""
        start = 0 if start is None else start
        stop = self.size if stop is None else min(stop, self.size)
        if start >= stop:
            return b""
        for held in (self._tail, self._buf):
            if held is not None and held[0] <= start and stop <= held[0] + len(held[1]):
                self.hit_count += 1
                self._end = stop
                data = held[1][start - held[0] : stop - held[0]]
                return data if buffer or isinstance(data, bytes) else data.to_pybytes()
        self.miss_count += 1
        if self._first:
            self._first = False
            if self.size <= _WHOLE or stop > self.size - _FOOTER:
                at = 0 if self.size <= _WHOLE else min(start, self.size - _FOOTER)
                data = self.fetcher(at, self.size)
                self._tail = (at, data)
                if self._keep is not None:
                    self._keep(at, data)
                self.total_requested_bytes += len(data)
                return data[start - at : stop - at]
        b0, b = self._buf
        head = b""
        if b0 <= start < b0 + len(b):
            head = b[start - b0 :]  # the part already held
            if not isinstance(head, bytes):
                head = head.to_pybytes()
        if head or (start == self._end and stop - start < _AHEAD):
            self._ahead = min(max(2 * self._ahead, _AHEAD), max(self.blocksize, _AHEAD))
            at = start + len(head)
            data = head + self.fetcher(at, min(self.size, max(stop, start + self._ahead)))
        else:
            self._ahead = 0
            data = self.fetcher(start, stop, buffer) if buffer else self.fetcher(start, stop)
        self.total_requested_bytes += len(data) - len(head)
        self._buf = (start, data)
        self._end = stop
        return data[: stop - start]


register_cache(ReadAheadCache, clobber=True)


def _aliased(lpath: str) -> bool:
    """Whether a local path spells a folder level as empty or ``.`` (so the
    file system resolves it to another, shorter path)."""
    parts = lpath.replace(os.sep, "/").split("/")
    return any(p in ("", ".") for p in parts[1:])


def _shoal_errors():
    from . import errors

    return errors


def _fetcher(file: weakref.ref) -> Any:
    """A cache's fetcher that reads through ``file`` without keeping it."""

    def fetch(start: int, end: int, buffer: bool = False) -> Any:
        f = file()
        if f is None:
            raise ValueError("I/O operation on closed file.")
        return f._fetch_range(start, end, buffer)

    return fetch


class ShoalFile(AbstractBufferedFile):
    """A file of a :class:`ShoalFileSystem`: ranged parallel reads of the
    version first seen; writes held and uploaded whole when committed (on
    close, or by ``commit()`` when ``autocommit=False``), never when an
    exception leaves its ``with`` block."""

    _held: Any = None
    # Written through a compressor (see _Compressed): collected unclosed,
    # the compressed stream lacks its end, so nothing is committed.
    _wrapped: bool = False

    def __init__(
        self, fs: Any, path: str, mode: str = "rb", details: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if details is not None:
            self._details = details
            kwargs["size"] = details["size"]
        super().__init__(fs, path, mode, **kwargs)
        if mode == "rb":
            # fsspec's cache holds the file's bound _fetch_range: a cycle,
            # so a file pyarrow let go of (it never closes them) lived on
            # with the bytes its cache held until a garbage collection, and
            # exit waited for it (shoal._exit). Held weakly, it goes when
            # its last reference does.
            self.cache.fetcher = _fetcher(weakref.ref(self))
        # pyarrow may release it, then its FSSpecHandler, on its own threads.
        _exit.track(self)
        _exit.track_fsspec_handler()

    def __del__(self) -> None:
        if self._wrapped and not self.closed:
            self._abandon()
            return
        super().__del__()

    def read_buffer(self, length: int = -1) -> Any:
        """What ``pyarrow.PythonFile`` asks for when it can (pyarrow's
        fsspec bridge reads a parquet file through it): ``read``, a read
        fetched exactly coming as a ``pyarrow.Buffer`` over memory shoal
        reuses, where each big ``bytes`` is new pages, a page fault each
        (see ``_shoal.cat_buffer``)."""
        if self.mode != "rb" or not isinstance(self.cache, ReadAheadCache):
            return self.read(length)
        if self.closed:
            raise ValueError("I/O operation on closed file.")
        length = self.size - self.loc if length is None or length < 0 else int(length)
        if length <= 0:
            return b""
        out = self.cache._fetch(self.loc, self.loc + length, buffer=True)
        self.loc += len(out)
        return out

    def _fetch_range(self, start: int, end: int, buffer: bool = False) -> Any:
        # Pinned to the version `details` saw when the file was opened.
        cat = _shoal.cat_buffer if buffer else _shoal.cat
        try:
            details = self.details
            if details.get("version_id") is not None:
                # Opened as one stored version (a version_aware open).
                return cat(
                    self.fs.session, self.fs._url(self.path), start=start, end=end, version_id=details["version_id"]
                )
            return cat(self.fs.session, self.fs._url(self.path), start=start, end=end, version=details.get("version"))
        except _shoal_errors().ChangedError:
            self.fs._forget(self.path)  # the next open asks the store again
            raise

    def _initiate_upload(self) -> None:
        self._held = io.BytesIO()

    def _upload_chunk(self, final: bool = False) -> bool:
        if self._held is None:
            self._initiate_upload()
        self.buffer.seek(0)
        self._held.write(self.buffer.read())
        if isinstance(self._held, io.BytesIO) and self._held.tell() > _SPILL:
            spill = tempfile.NamedTemporaryFile(prefix=".shoal-write-")
            spill.write(self._held.getbuffer())
            self._held = spill
        if final and self.autocommit:
            self.commit()
        return True

    def commit(self) -> None:
        """Uploads what was written (once; after that a no-op)."""
        held, self._held = self._held, None
        if held is None:
            return
        try:
            url = self.fs._url(self.path)
            # "x", and "a" on what was missing at open: only if still missing.
            create = "x" in self.mode or "a" in self.mode
            write = dict(self.kwargs)  # checked by ShoalFileSystem._open
            try:
                if isinstance(held, io.BytesIO):
                    _shoal.put(self.fs.session, url, held.getvalue(), if_not_exists=create, **write)
                else:  # spilled: a parallel multipart upload from the file
                    held.flush()
                    # Typed by the object's name, not the temporary file's.
                    write.setdefault("content_type", _shoal.guess_type(url))
                    _shoal.upload(self.fs.session, held.name, url, if_not_exists=create, **write)
            except _shoal_errors().PreconditionError as e:
                raise FileExistsError(self.path) from e
        finally:
            held.close()

    def discard(self) -> None:
        """Drops what was written; the object stays as it was."""
        held, self._held = self._held, None
        if held is not None:
            held.close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and self.mode != "rb":
            self._abandon()
            return
        self.close()

    def _abandon(self) -> None:
        """Closes without uploading anything (an exception is leaving the
        ``with`` block): the object keeps its old content."""
        if self.closed:
            return
        self.discard()
        self.buffer = io.BytesIO()
        self.forced = True
        self.closed = True


class _Compressed:
    """A compressed write into a :class:`ShoalFile`: ``close()`` ends the
    compressed stream, then commits the object; an exception leaving the
    ``with`` block (or :meth:`_abandon`) commits nothing."""

    def __init__(self, inner: Any, raw: ShoalFile) -> None:
        self._inner = inner
        self._raw = raw

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __enter__(self) -> _Compressed:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self._abandon()
            return
        self.close()

    def __iter__(self) -> Any:
        return iter(self._inner)

    @property
    def closed(self) -> bool:
        return self._raw.closed

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:
        if not self._raw.closed:
            self._inner.flush()

    def write(self, data: Any) -> int:
        return self._inner.write(data)

    def close(self) -> None:
        if self._raw.closed:
            return
        self._inner.close()
        self._raw.close()

    def _abandon(self) -> None:
        self._raw._abandon()


class _TextFile(io.TextIOWrapper):
    """Text mode over a :class:`ShoalFile`: an exception leaving the
    ``with`` block abandons the write instead of committing it."""

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if (
            exc_type is not None
            and isinstance(self.buffer, (ShoalFile, _Compressed))
            and getattr(self.buffer, "mode", "wb") != "rb"
        ):
            self.buffer._abandon()
            return
        self.close()


class ShoalGCSFileSystem(ShoalFileSystem):
    """Serves ``gs://bucket/key`` (after :func:`register`)."""

    protocol = ("gs", "gcs")
    scheme = "gs"


class ShoalS3FileSystem(ShoalFileSystem):
    """Serves ``s3://bucket/key`` (after :func:`register`)."""

    protocol = ("s3", "s3a")
    scheme = "s3"


def register(override: bool = False) -> None:
    """Registers ``shoal://``; with ``override=True`` also ``gs://``,
    ``gcs://``, ``s3://`` and ``s3a://`` (replacing gcsfs/s3fs for this
    process).

    pandas' fsspec readers (``read_csv``, ``read_json``…) then read
    ``gs://``/``s3://`` through shoal; ``read_parquet``/``to_parquet``
    without ``storage_options`` still use pyarrow's own GCS/S3 filesystem
    (see the module docs): use :mod:`shoal.pandas`, or pass
    ``storage_options={}``."""
    fsspec.register_implementation("shoal", ShoalFileSystem, clobber=True)
    if override:
        for p in ShoalGCSFileSystem.protocol:
            fsspec.register_implementation(p, ShoalGCSFileSystem, clobber=True)
        for p in ShoalS3FileSystem.protocol:
            fsspec.register_implementation(p, ShoalS3FileSystem, clobber=True)
