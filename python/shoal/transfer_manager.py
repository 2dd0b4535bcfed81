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
transfers run in Rust with the GIL released, so ``worker_type``,
``threads`` and ``deadline`` are accepted for compatibility and ignored.
Configuration keywords (``endpoint_url=…``, see ``shoal.session``) or
``session=`` may be added to any call.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

from . import _shoal
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


def _shoal_errors() -> Any:
    from . import errors

    return errors


def _exists(s: _shoal.Session, url: str) -> bool:
    try:
        _shoal.stat(s, url)
        return True
    except FileNotFoundError:
        return False


def _run_pairs(s: _shoal.Session, pairs: list[tuple[str, str]], skip: Any, max_workers: int | None, raise_exception: bool) -> list[BaseException | None]:
    """Copies the pairs ``skip(pair)`` does not rule out; one result each."""
    results: list[Any] = [None] * len(pairs)
    todo = [i for i, p in enumerate(pairs) if not (skip and skip(p))]
    done = _shoal.copy_many(s, [pairs[i] for i in todo], max_workers, None)
    for i, r in zip(todo, done):
        results[i] = r
    return _finish(results, raise_exception)


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
    """Uploads ``(filename, blob URL)`` pairs concurrently."""
    s = resolve(session, options)
    pairs = [(os.fspath(f), _blob_url(b)) for f, b in file_blob_pairs]
    skip = (lambda p: _exists(s, p[1])) if skip_if_exists else None
    return _run_pairs(s, pairs, skip, max_workers, raise_exception)


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
    base = _bucket_url(bucket)
    pairs = [(os.path.join(source_directory, f), base + blob_name_prefix + f) for f in filenames]
    return upload_many(
        pairs,
        skip_if_exists=skip_if_exists,
        raise_exception=raise_exception,
        max_workers=max_workers,
        session=session,
        **options,
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
    verified and renamed into place)."""
    s = resolve(session, options)
    pairs = [(_blob_url(b), os.fspath(f)) for b, f in blob_file_pairs]
    skip = (lambda p: os.path.exists(p[1])) if skip_if_exists else None
    return _run_pairs(s, pairs, skip, max_workers, raise_exception)


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
    base = _bucket_url(bucket)
    folder = os.fspath(destination_directory) or "."
    results: list[Any] = [None] * len(blob_names)
    todo: list[int] = []
    pairs: list[tuple[str, str]] = []
    for i, n in enumerate(blob_names):
        url = base + blob_name_prefix + n
        try:
            pairs.append((url, _shoal.destination(folder, n, url)))
            todo.append(i)
        except _shoal_errors().ShoalError as e:
            results[i] = e
    if not create_directories:
        missing = [f for _, f in pairs if not os.path.isdir(os.path.dirname(f) or ".")]
        if missing:
            f = missing[0]
            raise FileNotFoundError(f"download {f}: folder {os.path.dirname(f)} does not exist (create_directories=False)")
    done = download_many(
        pairs,
        max_workers=max_workers,
        skip_if_exists=skip_if_exists,
        session=session,
        **options,
    )
    for i, r in zip(todo, done):
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
    s = resolve(session, options)
    _shoal.download(s, _blob_url(blob), os.fspath(filename), max_workers, chunk_size)


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
    the XML API's)."""
    s = resolve(session, options)
    _shoal.upload(s, os.fspath(filename), _blob_url(blob), max_workers, chunk_size)


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
