"""shoal: fast object storage for Python (GCS, S3, local files).

- Plain functions: :func:`ls`, :func:`glob`, :func:`du`, :func:`stat`,
  :func:`cat`, :func:`put`, :func:`read`, :func:`rm`, :func:`mb`,
  :func:`copy`, :func:`copy_many`, :func:`download`, :func:`upload`,
  :func:`presign`, each with an ``_async`` twin.
- :mod:`shoal.transfer_manager`: google-cloud-storage's transfer_manager
  functions, same names and parameters, taking URLs.
- :mod:`shoal.fsspec`: an fsspec ``AsyncFileSystem`` (``shoal://gs/b/k``;
  ``shoal.fsspec.register(override=True)`` serves ``gs://`` and ``s3://``).
- :mod:`shoal.arrow`: ``shoal.arrow.filesystem()``, a ``pyarrow.fs``
  filesystem on shoal's engine for ``pq.read_table``/``pandas.read_parquet``.
- :mod:`shoal.dask`: listings as Dask partitions; copies, reads and ``du``
  as Dask tasks.

Every blocking call releases the GIL; errors are :class:`ShoalError`
subclasses (``NotFoundError`` is also a ``FileNotFoundError``, …).
"""

import collections.abc as _abc

from . import errors, transfer_manager
from ._api import (
    DiskUsage,
    Listing,
    cat,
    cat_async,
    copy,
    copy_async,
    copy_many,
    copy_many_async,
    download,
    download_async,
    du,
    du_async,
    glob,
    glob_async,
    iter_objects,
    iter_objects_async,
    ls,
    ls_async,
    mb,
    mb_async,
    presign,
    presign_async,
    put,
    put_async,
    read,
    read_async,
    restore,
    restore_async,
    rm,
    rm_async,
    stat,
    stat_async,
    update,
    update_async,
    upload,
    upload_async,
)
from ._session import session
from ._shoal import ObjectInfo, Records, Report, Session, __commit__, __version__
from .errors import *  # noqa: F403
from .errors import ShoalError

# A Dask listing partition (shoal.dask): a read-only sequence of dicts.
_abc.Sequence.register(Records)

__all__ = [
    "DiskUsage",
    "Listing",
    "ObjectInfo",
    "Records",
    "Report",
    "Session",
    "ShoalError",
    "__commit__",
    "__version__",
    "cat",
    "cat_async",
    "copy",
    "copy_async",
    "copy_many",
    "copy_many_async",
    "download",
    "download_async",
    "du",
    "du_async",
    "errors",
    "glob",
    "glob_async",
    "iter_objects",
    "iter_objects_async",
    "ls",
    "ls_async",
    "mb",
    "mb_async",
    "presign",
    "presign_async",
    "put",
    "put_async",
    "read",
    "read_async",
    "restore",
    "restore_async",
    "rm",
    "rm_async",
    "session",
    "stat",
    "stat_async",
    "transfer_manager",
    "update",
    "update_async",
    "upload",
    "upload_async",
] + errors.__all__


def __getattr__(name: str):
    # shoal.arrow without an import of its own (it needs pyarrow, so it is
    # loaded on first use only).
    if name == "arrow":
        import importlib

        return importlib.import_module(".arrow", __name__)
    raise AttributeError(f"module 'shoal' has no attribute {name!r}")
