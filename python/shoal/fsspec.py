"""An fsspec filesystem on shoal's engine.

Protocol ``shoal``, with the store's scheme as the first path level:
``shoal://gs/bucket/key`` and ``shoal://s3/bucket/key``. One protocol name
of its own, so installing shoal never changes what ``gs://`` or ``s3://``
mean for code that uses gcsfs or s3fs; plain ``gs://…``/``s3://…`` URLs are
accepted as paths too. To serve ``gs://`` and ``s3://`` themselves (pandas,
pyarrow, xarray…), opt in::

    import shoal.fsspec
    shoal.fsspec.register(override=True)
    pandas.read_parquet("gs://bucket/table.parquet")

Object stores have no directories: a "directory" is a key prefix ending in
``/``; ``mkdir`` creates buckets only, and an empty directory cannot exist.
Writes through ``open(..., "wb")`` are held in memory (or a temporary file
past 64 MiB) and uploaded on ``close`` with shoal's parallel multipart path.
"""

from __future__ import annotations

import io
import os
import tempfile
from typing import Any

import fsspec
from fsspec.asyn import AsyncFileSystem
from fsspec.spec import AbstractBufferedFile

from . import _shoal
from ._session import resolve

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

    def __init__(self, *args: Any, session: _shoal.Session | None = None, asynchronous: bool = False, loop: Any = None, batch_size: int | None = None, **options: Any):
        super().__init__(*args, asynchronous=asynchronous, loop=loop, batch_size=batch_size, session=session, **options)
        self.session = resolve(session, options)

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
                # gs://b/k and s3://b/k name the same objects.
                for s in ("gs", "s3"):
                    if path.startswith(s + "://"):
                        path = s + "/" + path[len(s) + 3 :]
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
        if scheme not in ("gs", "s3") or not rest:
            raise ValueError(f"{path!r}: shoal paths start with the store, e.g. 'gs/bucket/key' (shoal://gs/bucket/key)")
        return f"{scheme}://{rest}"

    def _path(self, url: str) -> str:
        """The fsspec path of a shoal URL."""
        scheme, _, rest = url.partition("://")
        rest = rest.rstrip("/")
        return rest if self.scheme is not None else f"{scheme}/{rest}"

    def _is_root(self, path: str) -> bool:
        path = self._strip_protocol(path)
        return path == "" or (self.scheme is None and path in ("gs", "s3"))

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
            "storage_class": o.storage_class,
            "content_encoding": o.content_encoding,
        }

    def _dir_info(self, path: str) -> dict[str, Any]:
        return {"name": self._strip_protocol(path), "size": 0, "type": "directory"}

    async def _info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        path = self._strip_protocol(path)
        if self._is_root(path):
            return self._dir_info(path)
        url = self._url(path)
        if self._is_bucket(path):
            # Raises NotFoundError when the bucket does not exist.
            await _shoal.list_prefix_async(self.session, url + "/", True, "name", 1)
            return self._dir_info(path)
        try:
            return self._file_info(await _shoal.stat_async(self.session, url))
        except FileNotFoundError:
            pass
        objs, prefixes = await _shoal.list_prefix_async(self.session, url + "/", True, "name", 1)
        if objs or prefixes:
            return self._dir_info(path)
        raise FileNotFoundError(path)

    async def _ls(self, path: str, detail: bool = True, **kwargs: Any) -> list[Any]:
        path = self._strip_protocol(path)
        if self._is_root(path):
            raise NotImplementedError("listing buckets is not supported; list gs/BUCKET or s3/BUCKET")
        url = self._url(path)
        objs, prefixes = await _shoal.list_prefix_async(self.session, url + "/", True, "full")
        out = [self._file_info(o) for o in objs if not o.key.endswith("/")]
        out += [self._dir_info(self._path(p)) for p in prefixes]
        if not out:
            if self._is_bucket(path):
                return []
            info = await self._info(path)  # a file, or FileNotFoundError
            out = [info]
        out.sort(key=lambda i: i["name"])
        return out if detail else [i["name"] for i in out]

    async def _find(self, path: str, maxdepth: int | None = None, withdirs: bool = False, detail: bool = False, **kwargs: Any) -> Any:
        path = self._strip_protocol(path)
        if maxdepth is not None or self._is_root(path):
            return await super()._find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        url = self._url(path)
        objs, _ = await _shoal.list_prefix_async(self.session, url + "/", False, "full")
        out: dict[str, dict[str, Any]] = {}
        for o in objs:
            if o.key.endswith("/"):
                continue
            info = self._file_info(o)
            out[info["name"]] = info
            if withdirs:
                parent = self._parent(info["name"])
                while len(parent) > len(path) and parent not in out:
                    out[parent] = self._dir_info(parent)
                    parent = self._parent(parent)
        if not out:
            try:
                info = await self._info(path)
            except FileNotFoundError:
                info = None
            if info is not None and info["type"] == "file":
                out[path] = info
        elif withdirs and not self._is_bucket(path):
            out[path] = self._dir_info(path)
        names = sorted(out)
        return {n: out[n] for n in names} if detail else names

    # -- bytes -----------------------------------------------------------

    async def _cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        return await _shoal.cat_async(self.session, self._url(path), start, end)

    async def _pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        try:
            await _shoal.put_async(self.session, self._url(path), bytes(value), kwargs.get("content_type"), mode == "create")
        except _shoal_errors().PreconditionError as e:
            raise FileExistsError(path) from e

    async def _put_file(self, lpath: str, rpath: str, callback: Any = None, mode: str = "overwrite", **kwargs: Any) -> None:
        if os.path.isdir(lpath):
            return  # no directories in object stores
        await _shoal.upload_async(self.session, os.fspath(lpath), self._url(rpath), None, None)

    async def _get_file(self, rpath: str, lpath: str, callback: Any = None, **kwargs: Any) -> None:
        if os.path.isdir(lpath):
            return
        # fsspec's recursive `get` makes local paths by joining the remote
        # names under the target folder as strings, so a key with a `..`
        # segment would land outside it. Such keys are refused here, where
        # every download passes (shoal's rule for keys as paths: docs/keys.md).
        if ".." in self._strip_protocol(rpath).split("/"):
            url = self._url(rpath)
            raise _shoal_errors().InvalidInputError(
                f"download {url}: not copied: the key has a '..' segment, which could write outside {os.path.dirname(os.fspath(lpath)) or '.'} (see docs/keys.md)"
            )
        await _shoal.download_async(self.session, self._url(rpath), os.fspath(lpath), None, None, None)

    async def _cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        (r,) = await _shoal.copy_many_async(self.session, [(self._url(path1), self._url(path2))], None, None)
        if isinstance(r, BaseException):
            raise r

    async def _rm_file(self, path: str, **kwargs: Any) -> None:
        (r,) = await _shoal.delete_many_async(self.session, [self._url(path)], None)
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
        results = await _shoal.delete_many_async(self.session, [self._url(p) for p in files], None)
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

    def invalidate_cache(self, path: str | None = None) -> None:
        pass  # nothing is cached

    def _open(self, path: str, mode: str = "rb", block_size: int | None = None, autocommit: bool = True, cache_options: Any = None, **kwargs: Any) -> "ShoalFile":
        if "x" in mode and self.exists(path):
            raise FileExistsError(path)
        return ShoalFile(self, path, mode, block_size=block_size or "default", autocommit=autocommit, cache_options=cache_options, **kwargs)


def _shoal_errors():
    from . import errors

    return errors


class ShoalFile(AbstractBufferedFile):
    """A file of a :class:`ShoalFileSystem`: ranged parallel reads; writes
    uploaded whole on close."""

    def _fetch_range(self, start: int, end: int) -> bytes:
        return _shoal.cat(self.fs.session, self.fs._url(self.path), start, end)

    def _initiate_upload(self) -> None:
        self._held: Any = io.BytesIO()

    def _upload_chunk(self, final: bool = False) -> bool:
        if not hasattr(self, "_held"):
            self._initiate_upload()
        self.buffer.seek(0)
        self._held.write(self.buffer.read())
        if isinstance(self._held, io.BytesIO) and self._held.tell() > _SPILL:
            spill = tempfile.NamedTemporaryFile(prefix=".shoal-write-")
            spill.write(self._held.getbuffer())
            self._held = spill
        if final:
            url = self.fs._url(self.path)
            if isinstance(self._held, io.BytesIO):
                try:
                    _shoal.put(self.fs.session, url, self._held.getvalue(), None, "x" in self.mode)
                except _shoal_errors().PreconditionError as e:
                    raise FileExistsError(self.path) from e
            else:  # spilled: a parallel multipart upload from the file
                self._held.flush()
                _shoal.upload(self.fs.session, self._held.name, url, None, None)
            self._held.close()
        return True


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
    process)."""
    fsspec.register_implementation("shoal", ShoalFileSystem, clobber=True)
    if override:
        for p in ShoalGCSFileSystem.protocol:
            fsspec.register_implementation(p, ShoalGCSFileSystem, clobber=True)
        for p in ShoalS3FileSystem.protocol:
            fsspec.register_implementation(p, ShoalS3FileSystem, clobber=True)
