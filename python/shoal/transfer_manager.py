"""google-cloud-storage's ``transfer_manager``, on shoal's engine.

Switch with one import::

    # from google.cloud.storage import transfer_manager
    from shoal import transfer_manager

The functions keep transfer_manager's names, parameters and return shapes
(one result per item: ``None`` on success, the exception otherwise, unless
``raise_exception=True``), but take shoal URLs instead of client objects:
``bucket="gs://my-bucket"`` (or ``"s3://…"``, optionally with a key prefix
such as ``"gs://b/data/"``), ``blob="gs://my-bucket/big.bin"``. A
``google.cloud.storage`` ``Bucket`` or ``Blob`` is accepted too (its name
becomes a ``gs://`` URL).

``max_workers`` is the number of requests in flight across the whole call
(default: 2 per vCPU), not a pool of Python threads or processes: the
transfers run in Rust with the GIL released, so ``worker_type`` (checked:
``PROCESS`` or ``THREAD``) chooses nothing, and the deprecated ``threads``
sets ``max_workers``. ``deadline`` is honoured: past it, what is still
running is cancelled (multipart uploads aborted, working files removed)
and ``concurrent.futures.TimeoutError`` raised.

Every other keyword is honoured as google-cloud-storage does, or refused
by name (``UnsupportedError``, a ``NotImplementedError``) before anything
is transferred; nothing is silently ignored:

- ``skip_if_exists`` (uploads) is a precondition of the write itself
  (``ifGenerationMatch=0`` / ``If-None-Match: *``), never a check before
  it: an object that exists, or appears meanwhile, is not replaced, and
  its result is the ``PreconditionError`` (never raised, as
  google-cloud-storage's 412).
- ``upload_kwargs``: ``content_type``, ``if_generation_match=0`` (the same
  precondition; a 412 is then raised with ``raise_exception=True``) and
  ``checksum``.
- ``download_kwargs``: ``checksum`` and ``raw_download=True`` (shoal
  downloads objects as stored).
- ``blob_constructor_kwargs``: ``chunk_size``.
- ``additional_blob_attributes``: ``content_type``.
- ``checksum`` (``"auto"``, ``"crc32c"`` or None): every transfer is
  verified with CRC32C whatever it says; ``"md5"`` is refused.

Configuration keywords (``endpoint_url=…``, see ``shoal.session``) or
``session=`` may be added to any call.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
from collections.abc import Sequence
from typing import Any

from . import _shoal
from . import errors as _errors
from ._session import resolve

PROCESS = "process"
THREAD = "thread"

#: transfer_manager's default slice/part size.
TM_DEFAULT_CHUNK_SIZE = 32 * 1024 * 1024


def _bucket_url(bucket: Any) -> str:
    if isinstance(bucket, str):
        url = bucket
    elif hasattr(bucket, "name"):  # google.cloud.storage.Bucket
        url = f"gs://{bucket.name}"
    else:
        raise TypeError(f"bucket must be a URL such as 'gs://bucket', not {type(bucket).__name__}")
    if "://" not in url:
        raise ValueError(f"bucket {url!r}: expected a URL such as 'gs://bucket' or 's3://bucket'")
    scheme, rest = url.split("://", 1)
    if "/" not in rest:
        return url + "/"
    return url


def _blob_url(blob: Any) -> str:
    if isinstance(blob, str):
        return blob
    if hasattr(blob, "bucket") and hasattr(blob, "name"):  # google.cloud.storage.Blob
        return f"gs://{blob.bucket.name}/{blob.name}"
    raise TypeError(f"blob must be a URL such as 'gs://bucket/key', not {type(blob).__name__}")


def _finish(results: list[Any], raise_exception: bool) -> list[Any]:
    out = [r if isinstance(r, BaseException) else None for r in results]
    if raise_exception:
        for r in out:
            if r is not None:
                raise r
    return out


def _unsupported(name: str, value: Any, supported: str) -> _errors.ShoalError:
    return _errors.new(
        _errors.UnsupportedError,
        f"{name}={value!r} is not supported by shoal.transfer_manager ({supported}); nothing was transferred",
    )


def _workers(worker_type: Any, max_workers: Any, threads: Any = None) -> int | None:
    """Checks the pool keywords; the requests in flight to use."""
    if worker_type not in (PROCESS, THREAD):
        raise ValueError(
            f"worker_type={worker_type!r}: expected transfer_manager.PROCESS ({PROCESS!r}) or THREAD ({THREAD!r})"
        )
    if threads is not None:
        # google-cloud-storage's deprecated spelling of max_workers.
        _positive("threads", threads)
        if max_workers is None:
            max_workers = threads
    if max_workers is not None:
        _positive("max_workers", max_workers)
    return max_workers


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r}: must be a positive whole number")


def _deadline(deadline: Any) -> float | None:
    if deadline is None:
        return None
    if (
        isinstance(deadline, bool)
        or not isinstance(deadline, (int, float))
        or not (deadline > 0 and math.isfinite(deadline))
    ):
        raise ValueError(f"deadline={deadline!r}: must be a positive number of seconds, or None")
    return float(deadline)


def _checksum(name: str, value: Any) -> None:
    if value in ("auto", "crc32c", None):
        return
    if value == "md5":
        raise _unsupported(name, value, "every transfer is verified with CRC32C: use 'crc32c' or 'auto'")
    raise ValueError(f"{name}={value!r}: expected 'auto', 'crc32c', 'md5' or None")


def _upload_kwargs(upload_kwargs: dict | None, content_type: str | None = None) -> tuple[str | None, bool]:
    """(content_type, if_not_exists) from google-cloud-storage's upload
    keywords; anything else is refused by name."""
    if_not_exists = False
    for k, v in (upload_kwargs or {}).items():
        name = f"upload_kwargs[{k!r}]"
        if k == "content_type":
            content_type = v
        elif k == "if_generation_match":
            if v is None:
                continue
            if isinstance(v, bool) or v != 0:
                raise _unsupported(name, v, "only 0, create without replacing, is")
            if_not_exists = True
        elif k == "checksum":
            _checksum(name, v)
        else:
            raise _unsupported(name, v, "supported: content_type, if_generation_match=0, checksum")
    return content_type, if_not_exists


def _download_kwargs(download_kwargs: dict | None) -> None:
    for k, v in (download_kwargs or {}).items():
        name = f"download_kwargs[{k!r}]"
        if k == "checksum":
            _checksum(name, v)
        elif k == "raw_download" and v is True:
            pass  # shoal downloads objects as stored
        else:
            raise _unsupported(name, v, "supported: checksum, raw_download=True")


def _blob_attributes(
    blob_constructor_kwargs: dict | None, additional_blob_attributes: dict | None
) -> tuple[int | None, str | None]:
    """(chunk_size, content_type) from the blob keywords."""
    chunk_size = None
    for k, v in (blob_constructor_kwargs or {}).items():
        if k == "chunk_size":
            if v is not None:
                _positive("blob_constructor_kwargs['chunk_size']", v)
                chunk_size = v
        else:
            raise _unsupported(f"blob_constructor_kwargs[{k!r}]", v, "supported: chunk_size")
    content_type = None
    for k, v in (additional_blob_attributes or {}).items():
        if k == "content_type":
            content_type = v
        else:
            raise _unsupported(f"additional_blob_attributes[{k!r}]", v, "supported: content_type")
    return chunk_size, content_type


def _timed(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; a passed deadline as ``concurrent.futures.TimeoutError``
    (the builtin one from Python 3.11 on), as google-cloud-storage raises."""
    try:
        return fn(*args, **kwargs)
    except TimeoutError as e:
        if type(e) is TimeoutError and concurrent.futures.TimeoutError is not TimeoutError:
            raise concurrent.futures.TimeoutError(str(e)) from e
        raise


def _run_pairs(
    s: _shoal.Session,
    pairs: list[tuple[str, str]],
    skip: Any,
    max_workers: int | None,
    raise_exception: bool,
    *,
    chunk_size: int | None = None,
    content_type: str | None = None,
    if_not_exists: bool = False,
    skipped_is_ok: bool = False,
    deadline: float | None = None,
) -> list[BaseException | None]:
    """Copies the pairs ``skip(pair)`` does not rule out; one result each.
    With ``skipped_is_ok``, a failed create-only precondition is reported
    but never raised (``skip_if_exists``)."""
    results: list[Any] = [None] * len(pairs)
    todo = [i for i, p in enumerate(pairs) if not (skip and skip(p))]
    done = _timed(
        _shoal.copy_many,
        s,
        [pairs[i] for i in todo],
        workers=max_workers,
        chunk_size=chunk_size,
        content_type=content_type,
        if_not_exists=if_not_exists,
        deadline=deadline,
    )
    for i, r in zip(todo, done, strict=True):
        results[i] = r
    out = [r if isinstance(r, BaseException) else None for r in results]
    if raise_exception:
        for r in out:
            if r is not None and not (skipped_is_ok and isinstance(r, _errors.PreconditionError)):
                raise r
    return out


def upload_many(
    file_blob_pairs: Sequence[tuple[str | os.PathLike, Any]],
    skip_if_exists: bool = False,
    upload_kwargs: dict | None = None,
    threads: int | None = None,
    deadline: float | None = None,
    raise_exception: bool = False,
    worker_type: str = PROCESS,
    max_workers: int | None = None,
    *,
    session: _shoal.Session | None = None,
    **options: Any,
) -> list[BaseException | None]:
    """Uploads ``(filename, blob URL)`` pairs concurrently. With
    ``skip_if_exists``, an object that exists is left as it is and its
    result is the ``PreconditionError`` (not raised)."""
    return _upload_many(
        file_blob_pairs,
        skip_if_exists,
        upload_kwargs,
        threads,
        deadline,
        raise_exception,
        worker_type,
        max_workers,
        None,
        None,
        session,
        options,
    )


def _upload_many(
    file_blob_pairs,
    skip_if_exists,
    upload_kwargs,
    threads,
    deadline,
    raise_exception,
    worker_type,
    max_workers,
    chunk_size,
    content_type,
    session,
    options,
) -> list[BaseException | None]:
    max_workers = _workers(worker_type, max_workers, threads)
    deadline = _deadline(deadline)
    content_type, if_not_exists = _upload_kwargs(upload_kwargs, content_type)
    s = resolve(session, options)
    pairs = [(os.fspath(f), _blob_url(b)) for f, b in file_blob_pairs]
    return _run_pairs(
        s,
        pairs,
        None,
        max_workers,
        raise_exception,
        chunk_size=chunk_size,
        content_type=content_type,
        if_not_exists=if_not_exists or skip_if_exists,
        skipped_is_ok=skip_if_exists,
        deadline=deadline,
    )


def upload_many_from_filenames(
    bucket: Any,
    filenames: Sequence[str],
    source_directory: str = "",
    blob_name_prefix: str = "",
    skip_if_exists: bool = False,
    blob_constructor_kwargs: dict | None = None,
    upload_kwargs: dict | None = None,
    threads: int | None = None,
    deadline: float | None = None,
    raise_exception: bool = False,
    worker_type: str = PROCESS,
    max_workers: int | None = None,
    *,
    additional_blob_attributes: dict | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> list[BaseException | None]:
    """Uploads ``source_directory/filename`` to ``bucket`` as
    ``blob_name_prefix + filename``, for every filename, concurrently."""
    chunk_size, content_type = _blob_attributes(blob_constructor_kwargs, additional_blob_attributes)
    base = _bucket_url(bucket)
    pairs = [(os.path.join(source_directory, f), base + blob_name_prefix + f) for f in filenames]
    return _upload_many(
        pairs,
        skip_if_exists,
        upload_kwargs,
        threads,
        deadline,
        raise_exception,
        worker_type,
        max_workers,
        chunk_size,
        content_type,
        session,
        options,
    )


def download_many(
    blob_file_pairs: Sequence[tuple[Any, str | os.PathLike]],
    download_kwargs: dict | None = None,
    threads: int | None = None,
    deadline: float | None = None,
    raise_exception: bool = False,
    worker_type: str = PROCESS,
    max_workers: int | None = None,
    *,
    skip_if_exists: bool = False,
    session: _shoal.Session | None = None,
    **options: Any,
) -> list[BaseException | None]:
    """Downloads ``(blob URL, filename)`` pairs concurrently (each file
    verified and renamed into place). With ``skip_if_exists``, a file that
    exists is not downloaded (its result is None)."""
    max_workers = _workers(worker_type, max_workers, threads)
    deadline = _deadline(deadline)
    _download_kwargs(download_kwargs)
    s = resolve(session, options)
    pairs = [(_blob_url(b), os.fspath(f)) for b, f in blob_file_pairs]
    skip = (lambda p: os.path.exists(p[1])) if skip_if_exists else None
    return _run_pairs(s, pairs, skip, max_workers, raise_exception, deadline=deadline)


def download_many_to_path(
    bucket: Any,
    blob_names: Sequence[str],
    destination_directory: str = "",
    blob_name_prefix: str = "",
    download_kwargs: dict | None = None,
    threads: int | None = None,
    deadline: float | None = None,
    create_directories: bool = True,
    raise_exception: bool = False,
    worker_type: str = PROCESS,
    max_workers: int | None = None,
    *,
    skip_if_exists: bool = False,
    session: _shoal.Session | None = None,
    **options: Any,
) -> list[BaseException | None]:
    """Downloads ``blob_name_prefix + name`` from ``bucket`` to
    ``destination_directory/name`` for every name, concurrently.

    A name becomes a path by shoal's one rule (docs/keys.md), never by
    ``os.path.join``: a name that would land outside the folder (``..`` or
    ``.`` segments, an absolute name, ``\\``, control characters, empty
    segments) or that is a folder marker (``dir/``) is not downloaded; its
    result is the ``InvalidInputError`` / ``UnsupportedError`` that says why.
    """
    max_workers = _workers(worker_type, max_workers, threads)
    _deadline(deadline)
    _download_kwargs(download_kwargs)
    base = _bucket_url(bucket)
    folder = os.fspath(destination_directory) or "."
    results: list[Any] = [None] * len(blob_names)
    todo: list[int] = []
    pairs: list[tuple[str, str]] = []
    for i, n in enumerate(blob_names):
        url = base + blob_name_prefix + n
        try:
            pairs.append((url, _shoal.destination(folder, rel=n, src_url=url)))
            todo.append(i)
        except _errors.ShoalError as e:
            results[i] = e
    if not create_directories:
        missing = [f for _, f in pairs if not os.path.isdir(os.path.dirname(f) or ".")]
        if missing:
            f = missing[0]
            raise FileNotFoundError(
                f"download {f}: folder {os.path.dirname(f)} does not exist (create_directories=False)"
            )
    done = download_many(
        pairs,
        download_kwargs=download_kwargs,
        deadline=deadline,
        worker_type=worker_type,
        max_workers=max_workers,
        skip_if_exists=skip_if_exists,
        session=session,
        **options,
    )
    for i, r in zip(todo, done, strict=True):
        results[i] = r
    return _finish(results, raise_exception)


def download_chunks_concurrently(
    blob: Any,
    filename: str | os.PathLike,
    chunk_size: int = TM_DEFAULT_CHUNK_SIZE,
    download_kwargs: dict | None = None,
    deadline: float | None = None,
    worker_type: str = PROCESS,
    max_workers: int | None = None,
    *,
    crc32c_checksum: bool = True,
    session: _shoal.Session | None = None,
    **options: Any,
) -> None:
    """Downloads one object in slices of ``chunk_size`` fetched in parallel
    and written in place; the CRC32C is always checked."""
    max_workers = _workers(worker_type, max_workers)
    _positive("chunk_size", chunk_size)
    deadline = _deadline(deadline)
    for k in ("start", "end"):
        if k in (download_kwargs or {}):
            raise ValueError(f"download_kwargs[{k!r}]: download_chunks_concurrently downloads the whole object")
    _download_kwargs(download_kwargs)
    s = resolve(session, options)
    _timed(
        _shoal.download,
        s,
        _blob_url(blob),
        os.fspath(filename),
        workers=max_workers,
        chunk_size=chunk_size,
        deadline=deadline,
    )


def upload_chunks_concurrently(
    filename: str | os.PathLike,
    blob: Any,
    content_type: str | None = None,
    chunk_size: int = TM_DEFAULT_CHUNK_SIZE,
    deadline: float | None = None,
    worker_type: str = PROCESS,
    max_workers: int | None = None,
    *,
    checksum: str | None = "auto",
    timeout: Any = None,
    retry: Any = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> None:
    """Uploads one file in parts of ``chunk_size`` sent in parallel (S3
    multipart; on GCS the XML API's multipart upload, as google-cloud-storage
    does, where the server has it, else parallel composite: emulators lack
    the XML API's). ``content_type`` is stored with the object."""
    max_workers = _workers(worker_type, max_workers)
    _positive("chunk_size", chunk_size)
    deadline = _deadline(deadline)
    _checksum("checksum", checksum)
    if timeout is not None:
        raise _unsupported("timeout", timeout, "shoal's requests time out by its own read timeout; see shoal.session")
    if retry is not None:
        raise _unsupported("retry", retry, "shoal retries by its own policy; attempts= in shoal.session")
    s = resolve(session, options)
    _timed(
        _shoal.upload,
        s,
        os.fspath(filename),
        _blob_url(blob),
        workers=max_workers,
        chunk_size=chunk_size,
        content_type=content_type,
        deadline=deadline,
    )


__all__ = [
    "PROCESS",
    "THREAD",
    "upload_many",
    "upload_many_from_filenames",
    "download_many",
    "download_many_to_path",
    "download_chunks_concurrently",
    "upload_chunks_concurrently",
]
