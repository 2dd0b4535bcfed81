"""pandas' parquet and CSV readers and writers through shoal, with no
``storage_options``.

``pandas.read_parquet("gs://b/t.parquet")`` with ``storage_options`` left
None hands the URL to pyarrow's own GCS or S3 filesystem, even after
:func:`shoal.fsspec.register` with ``override=True`` (see
:mod:`shoal.fsspec`): shoal's endpoint, credentials, retries and checksums
are not used, and against an emulator pyarrow may wait for cloud metadata
servers for many minutes. These take the same arguments as pandas' own and
pass a shoal filesystem for ``gs://``, ``gcs://``, ``s3://``, ``s3a://``
and ``shoal://`` URLs (``session=`` or shoal's configuration keywords
choose the store); any other path goes to pandas unchanged::

    import shoal.pandas
    df = shoal.pandas.read_parquet("gs://bucket/table.parquet", columns=["a"])
    shoal.pandas.to_parquet(df, "s3://bucket/out.parquet")
    df = shoal.pandas.read_csv("s3://bucket/t.csv.gz")
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from . import _shoal
from .fsspec import ShoalFileSystem, ShoalGCSFileSystem, ShoalS3FileSystem

_SCHEMES = {
    "gs": ShoalGCSFileSystem,
    "gcs": ShoalGCSFileSystem,
    "s3": ShoalS3FileSystem,
    "s3a": ShoalS3FileSystem,
    "shoal": ShoalFileSystem,
}


def filesystem(
    path: Any, *, session: _shoal.Session | None = None, **options: Any
) -> tuple[ShoalFileSystem | None, Any]:
    """The shoal filesystem for ``path`` and the path within it, or
    ``(None, path)`` for a path that is not a store URL (a local file, a
    buffer, another protocol)."""
    if not isinstance(path, str):
        return None, path
    scheme, sep, _ = path.partition("://")
    cls = _SCHEMES.get(scheme) if sep else None
    if cls is None:
        return None, path
    fs = cls(session=session, **options)
    return fs, fs._strip_protocol(path)


def read_parquet(path: Any, *, session: _shoal.Session | None = None, **kwargs: Any) -> pd.DataFrame:
    """``pandas.read_parquet`` reading a store URL through shoal."""
    fs, p = filesystem(path, session=session, **_options(kwargs))
    if fs is None:
        return pd.read_parquet(path, **kwargs)
    return pd.read_parquet(p, filesystem=fs, **kwargs)


def to_parquet(df: pd.DataFrame, path: Any, *, session: _shoal.Session | None = None, **kwargs: Any) -> None:
    """``DataFrame.to_parquet`` writing a store URL through shoal."""
    fs, p = filesystem(path, session=session, **_options(kwargs))
    if fs is None:
        df.to_parquet(path, **kwargs)
        return
    df.to_parquet(p, filesystem=fs, **kwargs)


def read_csv(path: Any, *, session: _shoal.Session | None = None, **kwargs: Any) -> pd.DataFrame:
    """``pandas.read_csv`` reading a store URL through shoal (compression
    inferred from the name, as pandas does)."""
    fs, p = filesystem(path, session=session, **_options(kwargs))
    if fs is None:
        return pd.read_csv(path, **kwargs)
    compression = kwargs.pop("compression", "infer")
    with fs.open(p, "rb", compression=compression) as f:
        return pd.read_csv(f, **kwargs)


def to_csv(df: pd.DataFrame, path: Any, *, session: _shoal.Session | None = None, **kwargs: Any) -> None:
    """``DataFrame.to_csv`` writing a store URL through shoal."""
    fs, p = filesystem(path, session=session, **_options(kwargs))
    if fs is None:
        df.to_csv(path, **kwargs)
        return
    compression = kwargs.pop("compression", "infer")
    kwargs.setdefault("mode", "wb")
    with fs.open(p, "wb", compression=compression) as f:
        df.to_csv(f, **kwargs)


def _options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """shoal's configuration given as ``storage_options`` (taken out of
    pandas' keywords: the filesystem carries it)."""
    return kwargs.pop("storage_options", None) or {}
