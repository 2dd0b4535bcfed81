"""The plain functions: ls, glob, du, stat, cat, put, read, rm, copy,
download, upload, presign, each with an ``_async`` twin.

Every call releases the GIL for its whole duration; the work runs on one
tokio runtime per process. Configuration keywords (see ``shoal.session``)
may be given to any call, or a ``session=``.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def _provider(url: str) -> str | None:
    """``"gs"``, ``"s3"`` or a store's name for a URL naming a whole
    provider (``gs://``, ``s3://``, ``NAME://`` of a store in the config
    file), else None."""
    scheme, sep, rest = url.partition("://")
    if sep and not rest and scheme != "file":
        return "gs" if scheme == "gcs" else scheme
    return None


def _buckets(scheme: str, buckets: list[tuple[str, str | None]]) -> Listing:
    return Listing([], sorted(f"{scheme}://{name}/" for name, _ in buckets))


def _ls_args(url: str, recursive: bool):
    if _has_wildcard(url):
        return ("glob", url)
    if recursive:
        return ("expand", url)
    key = url.split("://", 1)[-1].partition("/")[2]
    if key and not key.endswith("/"):
        url += "/"
    return ("prefix", url)


def ls(
    url: str,
    *,
    recursive: bool = False,
    versions: bool = False,
    soft_deleted: bool = False,
    session: _shoal.Session | None = None,
    **options: Any,
) -> Listing:
    """Lists a bucket, a "directory" or a glob (gcloud glob semantics).

    ``ls("gs://b/dir")`` lists one level below ``dir/``; ``recursive=True``
    lists everything below, in parallel for big listings. ``ls("gs://")``
    and ``ls("s3://")`` list the buckets the credentials see (GCS: in the
    project ``GOOGLE_CLOUD_PROJECT`` names), as prefixes
    (``"s3://bucket/"``), as ``shoal ls s3://`` does.

    ``versions=True`` lists every stored version (``shoal ls -a``):
    noncurrent ones and S3 delete markers too, each with its
    ``generation`` (GCS) or ``version_id`` (S3), ``is_latest`` and
    ``delete_marker``; a URL naming one key lists that key's versions.
    ``soft_deleted=True`` lists GCS soft-deleted generations only
    (``shoal ls --soft-deleted``), for :func:`restore`.
    """
    s = resolve(session, options)
    scheme = _provider(url)
    if scheme is not None:
        if recursive:
            raise ValueError(f"ls {url}: lists buckets; name a bucket to list recursively")
        return _buckets(scheme, _shoal.list_buckets(s, scheme))
    if versions or soft_deleted:
        return Listing(*_shoal.list_versions(s, url, recursive=recursive, soft_deleted=soft_deleted))
    how, u = _ls_args(url, recursive)
    if how == "glob":
        if recursive:
            return Listing(_shoal.expand(s, u, recursive=True), [])
        objs, prefixes = _shoal.entries(s, u)
        return Listing(objs, prefixes)
    if how == "expand":
        return Listing(_shoal.expand(s, u, recursive=True), [])
    objs, prefixes = _shoal.list_prefix(s, u, delimiter=True)
    return Listing(objs, prefixes)


async def ls_async(
    url: str,
    *,
    recursive: bool = False,
    versions: bool = False,
    soft_deleted: bool = False,
    session: _shoal.Session | None = None,
    **options: Any,
) -> Listing:
    """:func:`ls` for asyncio."""
    s = resolve(session, options)
    scheme = _provider(url)
    if scheme is not None:
        if recursive:
            raise ValueError(f"ls {url}: lists buckets; name a bucket to list recursively")
        return _buckets(scheme, await _shoal.list_buckets_async(s, scheme))
    if versions or soft_deleted:
        return Listing(*(await _shoal.list_versions_async(s, url, recursive=recursive, soft_deleted=soft_deleted)))
    how, u = _ls_args(url, recursive)
    if how == "glob":
        if recursive:
            return Listing(await _shoal.expand_async(s, u, recursive=True), [])
        objs, prefixes = await _shoal.entries_async(s, u)
        return Listing(objs, prefixes)
    if how == "expand":
        return Listing(await _shoal.expand_async(s, u, recursive=True), [])
    objs, prefixes = await _shoal.list_prefix_async(s, u, delimiter=True)
    return Listing(objs, prefixes)


def glob(
    pattern: str, *, recursive: bool = False, session: _shoal.Session | None = None, **options: Any
) -> list[ObjectInfo]:
    """Every object a glob names, in key order (``*`` and ``?`` within a
    level, ``**`` across levels, ``[...]`` classes); a literal URL is that
    one object (``NotFoundError`` when missing)."""
    return _shoal.expand(resolve(session, options), pattern, recursive=recursive)


async def glob_async(
    pattern: str, *, recursive: bool = False, session: _shoal.Session | None = None, **options: Any
) -> list[ObjectInfo]:
    """:func:`glob` for asyncio."""
    return await _shoal.expand_async(resolve(session, options), pattern, recursive=recursive)


def iter_objects(
    url: str, *, recursive: bool = False, detail: str = "full", session: _shoal.Session | None = None, **options: Any
) -> Iterator[ObjectInfo]:
    """Every object a URL or glob names, in key order, as an iterator: what
    :func:`glob` returns, without holding it. The listing is streamed page
    by page (in parallel for big listings), so memory stays bounded however
    many keys there are. ``recursive`` takes everything below each match;
    ``detail`` is ``"name"``, ``"size"`` or ``"full"``. A glob matching
    nothing raises ``NotFoundError`` when the iteration reaches its end."""
    stream = _shoal.iter_objects(resolve(session, options), url, recursive=recursive, detail=detail)
    try:
        for page in stream:
            yield from page
    finally:
        stream.close()


async def iter_objects_async(
    url: str, *, recursive: bool = False, detail: str = "full", session: _shoal.Session | None = None, **options: Any
) -> AsyncIterator[ObjectInfo]:
    """:func:`iter_objects` for asyncio (``async for``)."""
    stream = _shoal.iter_objects(resolve(session, options), url, recursive=recursive, detail=detail)
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
    return _du(_shoal.du(resolve(session, options), url, group_by=group_by))


async def du_async(
    url: str, *, group_by: str | None = None, session: _shoal.Session | None = None, **options: Any
) -> DiskUsage:
    """:func:`du` for asyncio."""
    return _du(await _shoal.du_async(resolve(session, options), url, group_by=group_by))


def _version_id(call: str, version_id: Any) -> str | None:
    if version_id is None:
        return None
    if isinstance(version_id, bool) or not isinstance(version_id, (str, int)):
        raise TypeError(
            f"{call}: version_id is a GCS generation (int or str) or an S3 version id (str), not "
            f"{type(version_id).__name__}"
        )
    return str(version_id)


def stat(
    url: str, *, version_id: str | int | None = None, session: _shoal.Session | None = None, **options: Any
) -> ObjectInfo:
    """Metadata of one object; with ``version_id`` (a GCS generation, an
    S3 version id), of that stored version, current or not."""
    s = resolve(session, options)
    v = _version_id("stat", version_id)
    if v is not None:
        return _shoal.stat_version(s, url, v)
    return _shoal.stat(s, url)


async def stat_async(
    url: str, *, version_id: str | int | None = None, session: _shoal.Session | None = None, **options: Any
) -> ObjectInfo:
    """:func:`stat` for asyncio."""
    s = resolve(session, options)
    v = _version_id("stat", version_id)
    if v is not None:
        return await _shoal.stat_version_async(s, url, v)
    return await _shoal.stat_async(s, url)


def cat(
    url: str,
    start: int | None = None,
    end: int | None = None,
    *,
    version_id: str | int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> bytes:
    """The object's bytes ``[start, end)``, fetched with parallel ranged
    reads. A whole object is checked against the store's checksum (CRC32C,
    CRC32, CRC64NVME, a composite one part by part, else MD5) and a
    mismatch raises :class:`shoal.errors.IntegrityError`; a range of an
    object cannot be (no stored checksum covers it) and is checked by its
    length. ``version_id`` reads that stored version, current or not."""
    return _shoal.cat(resolve(session, options), url, start=start, end=end, version_id=_version_id("cat", version_id))


async def cat_async(
    url: str,
    start: int | None = None,
    end: int | None = None,
    *,
    version_id: str | int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> bytes:
    """:func:`cat` for asyncio."""
    return await _shoal.cat_async(
        resolve(session, options), url, start=start, end=end, version_id=_version_id("cat", version_id)
    )


#: What a write stores beside its bytes: the keywords of ``put``,
#: ``upload``, fsspec's ``open(..., "wb")``, ``pipe_file`` and ``put_file``
#: (the CLI's ``--content-type``, ``--cache-control``,
#: ``--content-disposition``, ``--metadata`` and ``--storage-class``).
WRITE_KEYWORDS = (
    "content_type",
    "content_encoding",
    "cache_control",
    "content_disposition",
    "metadata",
    "storage_class",
)


def write_keywords(call: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` checked as a write's keywords (:data:`WRITE_KEYWORDS`): an
    unknown one, a value that is not a str, or ``metadata`` that is not a
    dict of str to str raise TypeError naming it. The values themselves
    (printable header values, metadata keys a header name can carry, a
    storage class the store knows) are checked by the write, which raises
    ``InvalidInputError`` (a ValueError)."""
    out: dict[str, Any] = {}
    for k, v in kwargs.items():
        if k not in WRITE_KEYWORDS:
            raise TypeError(
                f"{call}() got an unexpected keyword argument {k!r} (a write takes {', '.join(WRITE_KEYWORDS)})"
            )
        if v is None:
            continue
        if k == "metadata":
            if not isinstance(v, Mapping):
                raise TypeError(f"{call}(): metadata must be a dict of str to str, not {type(v).__name__}")
            for mk, mv in v.items():
                if not isinstance(mk, str) or not isinstance(mv, str):
                    raise TypeError(f"{call}(): metadata must be a dict of str to str, not {{{mk!r}: {mv!r}}}")
            v = dict(v)
        elif not isinstance(v, str):
            raise TypeError(f"{call}(): {k} must be a str, not {type(v).__name__}")
        out[k] = v
    return out


def put(
    url: str,
    data: bytes,
    *,
    content_type: str | None = None,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: Mapping[str, str] | None = None,
    storage_class: str | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> int:
    """Writes ``data`` as the object (a URL naming only a bucket is refused);
    returns its size. ``content_encoding`` is stored as the object's
    ``Content-Encoding`` (``"gzip"``: ``data`` is gzip, and :func:`read`
    yields it decoded). ``content_type`` (default: guessed from the key,
    ``index.html`` → ``text/html``), ``cache_control``,
    ``content_disposition``, ``metadata`` (str → str) and
    ``storage_class`` are stored with it, as ``shoal cp`` stores its flags;
    :func:`stat` shows them back."""
    w = write_keywords(
        "put",
        dict(
            content_type=content_type,
            content_encoding=content_encoding,
            cache_control=cache_control,
            content_disposition=content_disposition,
            metadata=metadata,
            storage_class=storage_class,
        ),
    )
    return _shoal.put(resolve(session, options), url, data, **w)


async def put_async(
    url: str,
    data: bytes,
    *,
    content_type: str | None = None,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: Mapping[str, str] | None = None,
    storage_class: str | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> int:
    """:func:`put` for asyncio."""
    w = write_keywords(
        "put_async",
        dict(
            content_type=content_type,
            content_encoding=content_encoding,
            cache_control=cache_control,
            content_disposition=content_disposition,
            metadata=metadata,
            storage_class=storage_class,
        ),
    )
    return await _shoal.put_async(resolve(session, options), url, data, **w)


def _expires(call: str, expires: Any) -> int:
    """Whole seconds from an int or a ``datetime.timedelta`` (the range,
    1 s to 7 days, is checked where the URL is signed)."""
    if isinstance(expires, datetime.timedelta):
        secs = expires.total_seconds()
        if secs != int(secs):
            raise ValueError(f"{call}(): expires={expires!r} is not a whole number of seconds")
        return int(secs)
    if isinstance(expires, bool) or not isinstance(expires, int):
        raise TypeError(
            f"{call}(): expires must be seconds (an int) or a datetime.timedelta, not {type(expires).__name__}"
        )
    return expires


_SHAPE_KEYWORDS = (
    "headers",
    "query_parameters",
    "virtual_hosted_style",
    "bucket_bound_hostname",
    "scheme",
    "api_access_endpoint",
    "signed_at",
    "content_type",
    "content_md5",
    "response_disposition",
    "response_type",
    "generation",
    "version",
)


def _pairs(call: str, name: str, value: Any) -> list[tuple[str, str]]:
    if value is None:
        return []
    items = value.items() if isinstance(value, Mapping) else value
    try:
        return [(str(k), str(v)) for k, v in items]
    except (TypeError, ValueError):
        raise TypeError(
            f"{call}(): {name} must be a dict of names to values or a list of (name, value) pairs"
        ) from None


def _presign_shape(call: str, shape: dict[str, Any]) -> dict[str, Any]:
    """The URL's shape as the engine takes it, from the keywords of
    Google's ``Blob.generate_signed_url`` (what gcsfs's ``sign`` passes on),
    so code written for them signs the same URL here."""
    version = shape.pop("version", None)
    if version not in (None, "v4", "V4"):
        raise ValueError(f"{call}(): version={version!r}: only V4 signatures are made (v2 is deprecated by Google)")
    headers = _pairs(call, "headers", shape.pop("headers", None))
    query = _pairs(call, "query_parameters", shape.pop("query_parameters", None))
    for kw, into, name in (
        ("content_type", headers, "Content-Type"),
        ("content_md5", headers, "Content-MD5"),
        ("response_disposition", query, "response-content-disposition"),
        ("response_type", query, "response-content-type"),
        ("generation", query, "generation"),
    ):
        value = shape.pop(kw, None)
        if value is not None:
            into.append((name, str(value)))
    host = shape.pop("bucket_bound_hostname", None)
    scheme = shape.pop("scheme", None)
    if host is not None and "://" not in host:
        # Google's default for a bare bound host ("https works only
        # behind a CDN").
        host = f"{scheme or 'http'}://{host}"
    signed_at = shape.pop("signed_at", None)
    if isinstance(signed_at, datetime.datetime):
        if signed_at.tzinfo is None:
            raise ValueError(
                f"{call}(): signed_at={signed_at!r} has no time zone (give one, e.g. datetime.timezone.utc)"
            )
        signed_at = signed_at.timestamp()
    elif signed_at is not None and (isinstance(signed_at, bool) or not isinstance(signed_at, (int, float))):
        raise TypeError(f"{call}(): signed_at must be a datetime or Unix seconds, not {type(signed_at).__name__}")
    return {
        "headers": headers,
        "query": query,
        "virtual_hosted": bool(shape.pop("virtual_hosted_style", False)),
        "bucket_bound_host": host,
        "endpoint": shape.pop("api_access_endpoint", None),
        "signed_at": None if signed_at is None else float(signed_at),
    }


def _split_shape(options: dict[str, Any]) -> dict[str, Any]:
    return {k: options.pop(k) for k in _SHAPE_KEYWORDS if k in options}


def presign(
    url: str,
    expires: int | datetime.timedelta = 3600,
    method: str = "GET",
    *,
    session: _shoal.Session | None = None,
    **options: Any,
) -> str:
    """A URL anyone can use without credentials until it expires (1 s to 7
    days; seconds or a ``timedelta``): ``method="GET"`` reads the object,
    ``"PUT"`` writes it with one request (``HEAD``, ``DELETE`` and, on
    GCS, ``POST`` to start a resumable upload, too); a bucket URL signs a
    listing. What ``shoal presign`` prints: S3 signs with SigV4 in the
    query string; GCS makes a V4 signed URL, which needs a service-account
    key (``GOOGLE_APPLICATION_CREDENTIALS`` naming its JSON file). Signing
    is local: nothing is sent, and the object need not exist yet.

    The keywords of Google's ``Blob.generate_signed_url`` shape the URL:
    ``headers`` (the holder must send them as given; ``content_type``,
    ``content_md5`` add theirs), ``query_parameters`` (also
    ``response_disposition``, ``response_type``, ``generation``);
    GCS only: ``virtual_hosted_style``, ``bucket_bound_hostname`` (with
    ``scheme``, ``http`` by default as Google's), ``api_access_endpoint``
    (the host the URL names, when requests go elsewhere). ``signed_at`` (a
    datetime or Unix seconds) signs for another time than now: the URL is
    valid from then for ``expires``."""
    shape = _presign_shape("presign", _split_shape(options))
    return _shoal.presign(
        resolve(session, options), url, expires=_expires("presign", expires), method=method, shape=shape
    )


async def presign_async(
    url: str,
    expires: int | datetime.timedelta = 3600,
    method: str = "GET",
    *,
    session: _shoal.Session | None = None,
    **options: Any,
) -> str:
    """:func:`presign` for asyncio."""
    shape = _presign_shape("presign_async", _split_shape(options))
    return await _shoal.presign_async(
        resolve(session, options), url, expires=_expires("presign_async", expires), method=method, shape=shape
    )


def _raise_first(results: Sequence[Any]) -> None:
    for r in results:
        if isinstance(r, BaseException):
            raise r


def _one_url(call: str, urls: Any) -> str:
    u = _urls(urls)
    if len(u) != 1:
        raise ValueError(f"{call} with version_id: one URL, not {len(u)}")
    return u[0]


def rm(
    urls: str | Iterable[str],
    *,
    version_id: str | int | None = None,
    max_workers: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> None:
    """Deletes objects (a URL or a list of them); raises the first failure.
    A URL naming only a bucket is refused (``InvalidInputError``), never
    sent: on S3 it would delete the bucket. ``version_id`` deletes that one
    stored version (or S3 delete marker) of one object for good; no other
    version is touched. Without it, a versioned bucket keeps what a delete
    replaces."""
    s = resolve(session, options)
    v = _version_id("rm", version_id)
    if v is not None:
        _shoal.delete_version(s, _one_url("rm", urls), v)
        return
    _raise_first(_shoal.delete_many(s, _urls(urls), workers=max_workers))


async def rm_async(
    urls: str | Iterable[str],
    *,
    version_id: str | int | None = None,
    max_workers: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> None:
    """:func:`rm` for asyncio."""
    s = resolve(session, options)
    v = _version_id("rm", version_id)
    if v is not None:
        await _shoal.delete_version_async(s, _one_url("rm", urls), v)
        return
    _raise_first(await _shoal.delete_many_async(s, _urls(urls), workers=max_workers))


def restore(
    url: str,
    version_id: str | int,
    *,
    allow_overwrite: bool = False,
    session: _shoal.Session | None = None,
    **options: Any,
) -> bool:
    """Makes a stored version the live object again (``shoal restore``): a
    GCS soft-deleted generation (``ls(url, soft_deleted=True)`` lists them)
    or any noncurrent version, copied onto its key. A key that has a live
    object is left alone (``PreconditionError``) unless
    ``allow_overwrite``. Returns whether the version was soft-deleted."""
    v = _version_id("restore", version_id)
    assert v is not None
    return _shoal.restore(resolve(session, options), url, v, allow_overwrite=allow_overwrite)


async def restore_async(
    url: str,
    version_id: str | int,
    *,
    allow_overwrite: bool = False,
    session: _shoal.Session | None = None,
    **options: Any,
) -> bool:
    """:func:`restore` for asyncio."""
    v = _version_id("restore", version_id)
    assert v is not None
    return await _shoal.restore_async(resolve(session, options), url, v, allow_overwrite=allow_overwrite)


def _update_keywords(call: str, kwargs: dict[str, Any], remove_metadata: Iterable[str] | None) -> dict[str, Any]:
    acl = {k: kwargs.pop(k) for k in ("acl", "predefined_acl")}
    w = write_keywords(call, kwargs)
    for k, v in acl.items():
        if v is not None and not isinstance(v, str):
            raise TypeError(f"{call}(): {k} must be a str, not {type(v).__name__}")
        w[k] = v
    if remove_metadata is not None:
        if isinstance(remove_metadata, str) or not all(isinstance(k, str) for k in remove_metadata):
            raise TypeError(f"{call}(): remove_metadata must be a list of str")
        w["remove_metadata"] = list(remove_metadata)
    return w


def update(
    url: str,
    *,
    content_type: str | None = None,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: Mapping[str, str] | None = None,
    remove_metadata: Iterable[str] | None = None,
    storage_class: str | None = None,
    acl: str | None = None,
    predefined_acl: str | None = None,
    dry_run: bool = False,
    session: _shoal.Session | None = None,
    **options: Any,
) -> bool:
    """Changes one object's metadata on the server, as ``shoal update``:
    the fields given replace the object's, ``metadata`` keys are added or
    replaced, ``remove_metadata`` keys dropped, the rest kept; ``acl``
    (s3://) or ``predefined_acl`` (gs://) sets a canned ACL. No byte moves
    through this machine, and the write is pinned to the version read: an
    object replaced meanwhile is left as it is and ``PreconditionError``
    raised. Returns False when the object already held what was asked
    (nothing sent) or ``dry_run``; True when it was changed."""
    w = _update_keywords(
        "update",
        dict(
            content_type=content_type,
            content_encoding=content_encoding,
            cache_control=cache_control,
            content_disposition=content_disposition,
            metadata=metadata,
            storage_class=storage_class,
            acl=acl,
            predefined_acl=predefined_acl,
        ),
        remove_metadata,
    )
    out = _shoal.update(resolve(session, options), url, dry_run=bool(dry_run), **w)
    return out == "updated" and not dry_run


async def update_async(
    url: str,
    *,
    content_type: str | None = None,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: Mapping[str, str] | None = None,
    remove_metadata: Iterable[str] | None = None,
    storage_class: str | None = None,
    acl: str | None = None,
    predefined_acl: str | None = None,
    dry_run: bool = False,
    session: _shoal.Session | None = None,
    **options: Any,
) -> bool:
    """:func:`update` for asyncio."""
    w = _update_keywords(
        "update_async",
        dict(
            content_type=content_type,
            content_encoding=content_encoding,
            cache_control=cache_control,
            content_disposition=content_disposition,
            metadata=metadata,
            storage_class=storage_class,
            acl=acl,
            predefined_acl=predefined_acl,
        ),
        remove_metadata,
    )
    out = await _shoal.update_async(resolve(session, options), url, dry_run=bool(dry_run), **w)
    return out == "updated" and not dry_run


def mb(url: str, *, session: _shoal.Session | None = None, **options: Any) -> None:
    """Creates a bucket."""
    _shoal.make_bucket(resolve(session, options), url)


async def mb_async(url: str, *, session: _shoal.Session | None = None, **options: Any) -> None:
    """:func:`mb` for asyncio."""
    await _shoal.make_bucket_async(resolve(session, options), url)


def copy(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    version_id: str | int | None = None,
    max_workers: int | None = None,
    chunk_size: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> int:
    """Copies one object or file (local ↔ cloud, cloud ↔ cloud); returns
    bytes. A destination ending in ``/`` (or a bare bucket, or a local
    folder) receives it under the source's name, as ``shoal cp`` does.

    ``version_id`` copies that stored version of ``src``; copied over its
    own key it is a restore, which never replaces a version written since
    it looked (``PreconditionError``: run it again to restore over it)."""
    s = resolve(session, options)
    v = _version_id("copy", version_id)
    if v is not None:
        return _shoal.copy_version(s, os.fspath(src), os.fspath(dst), v, workers=max_workers)
    r = _shoal.copy_many(s, [(os.fspath(src), os.fspath(dst))], workers=max_workers, chunk_size=chunk_size)[0]
    if isinstance(r, BaseException):
        raise r
    return r


async def copy_async(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    *,
    version_id: str | int | None = None,
    max_workers: int | None = None,
    chunk_size: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> int:
    """:func:`copy` for asyncio."""
    s = resolve(session, options)
    v = _version_id("copy", version_id)
    if v is not None:
        return await _shoal.copy_version_async(s, os.fspath(src), os.fspath(dst), v, workers=max_workers)
    r = (
        await _shoal.copy_many_async(s, [(os.fspath(src), os.fspath(dst))], workers=max_workers, chunk_size=chunk_size)
    )[0]
    if isinstance(r, BaseException):
        raise r
    return r


def copy_many(
    pairs: Iterable[tuple[str, str]],
    *,
    max_workers: int | None = None,
    chunk_size: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> list[int | BaseException]:
    """Copies ``(source, destination)`` pairs under one budget of
    ``max_workers`` requests; one result per pair (bytes, or the exception)."""
    p = [(os.fspath(a), os.fspath(b)) for a, b in pairs]
    return _shoal.copy_many(resolve(session, options), p, workers=max_workers, chunk_size=chunk_size)


async def copy_many_async(
    pairs: Iterable[tuple[str, str]],
    *,
    max_workers: int | None = None,
    chunk_size: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> list[int | BaseException]:
    """:func:`copy_many` for asyncio."""
    p = [(os.fspath(a), os.fspath(b)) for a, b in pairs]
    return await _shoal.copy_many_async(resolve(session, options), p, workers=max_workers, chunk_size=chunk_size)


def download(
    url: str,
    filename: str | os.PathLike,
    *,
    max_workers: int | None = None,
    chunk_size: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> Report:
    """Downloads one object to a file (sliced, verified, renamed into
    place); a folder, or a path ending in ``/``, receives it under the
    object's name."""
    return _shoal.download(
        resolve(session, options), url, os.fspath(filename), workers=max_workers, chunk_size=chunk_size
    )


async def download_async(
    url: str,
    filename: str | os.PathLike,
    *,
    max_workers: int | None = None,
    chunk_size: int | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> Report:
    """:func:`download` for asyncio."""
    return await _shoal.download_async(
        resolve(session, options), url, os.fspath(filename), workers=max_workers, chunk_size=chunk_size
    )


def upload(
    filename: str | os.PathLike,
    url: str,
    *,
    max_workers: int | None = None,
    chunk_size: int | None = None,
    content_type: str | None = None,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: Mapping[str, str] | None = None,
    storage_class: str | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> Report:
    """Uploads one file (multipart when big: S3's, GCS's XML API's, or
    parallel composite); a URL ending in ``/`` (or a bare bucket) receives
    it under the file's name. What it stores beside the bytes is
    :func:`put`'s keywords (the type guessed from the file's name)."""
    w = write_keywords(
        "upload",
        dict(
            content_type=content_type,
            content_encoding=content_encoding,
            cache_control=cache_control,
            content_disposition=content_disposition,
            metadata=metadata,
            storage_class=storage_class,
        ),
    )
    return _shoal.upload(
        resolve(session, options), os.fspath(filename), url, workers=max_workers, chunk_size=chunk_size, **w
    )


async def upload_async(
    filename: str | os.PathLike,
    url: str,
    *,
    max_workers: int | None = None,
    chunk_size: int | None = None,
    content_type: str | None = None,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: Mapping[str, str] | None = None,
    storage_class: str | None = None,
    session: _shoal.Session | None = None,
    **options: Any,
) -> Report:
    """:func:`upload` for asyncio."""
    w = write_keywords(
        "upload_async",
        dict(
            content_type=content_type,
            content_encoding=content_encoding,
            cache_control=cache_control,
            content_disposition=content_disposition,
            metadata=metadata,
            storage_class=storage_class,
        ),
    )
    return await _shoal.upload_async(
        resolve(session, options), os.fspath(filename), url, workers=max_workers, chunk_size=chunk_size, **w
    )


def _stream(urls, lines, decompress, unordered, read_ahead, session, options) -> _shoal.ReadStream:
    return _shoal.read(
        resolve(session, options),
        _urls(urls),
        boundaries=lines,
        decompress=decompress,
        ordered=not unordered,
        read_ahead=read_ahead,
    )


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
    checked against the store's checksum (CRC32C, CRC32, CRC64NVME, a
    composite one, else MD5). Memory stays within that budget however
    much is read.

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
