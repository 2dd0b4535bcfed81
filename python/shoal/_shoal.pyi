"""Type stubs for the extension module (crates/shoal-py). Every function
takes a Session first; each blocking ``name`` has an awaitable
``name_async`` with the same parameters (``read`` returns a stream that is
both an iterator and an async iterator)."""

from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from os import PathLike
from typing import Any, overload

__version__: str
__commit__: str  # the commit built from, or "unknown" (a build from an sdist)

class Session:
    def __init__(
        self,
        *,
        endpoint_url: str | None = None,
        gcs_endpoint_url: str | None = None,
        s3_endpoint_url: str | None = None,
        no_sign_request: bool = False,
        region: str | None = None,
        profile: str | None = None,
        key: str | None = None,
        secret: str | None = None,
        s3_addressing: str = "auto",
        workers: int | None = None,
        attempts: int | None = None,
        read_timeout: float | None = None,
        connect_timeout: float | None = None,
        proxy: str | None = None,
        ca_bundle: str | PathLike[str] | None = None,
        billing_project: str | None = None,
        request_payer: bool = False,
        sse: str | None = None,
        sse_kms_key_id: str | None = None,
        sse_c_key: bytes | None = None,
        sse_c_copy_source_key: bytes | None = None,
        encryption_key: str | None = None,
        decryption_keys: list[str] | None = None,
    ) -> None: ...
    @property
    def workers(self) -> int: ...
    @property
    def kwargs(self) -> dict[str, Any]: ...

class ObjectInfo:
    @property
    def url(self) -> str: ...
    @property
    def bucket(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def updated(self) -> float | None: ...
    @property
    def crc32c(self) -> str | None: ...
    @property
    def md5(self) -> str | None: ...
    @property
    def crc32(self) -> str | None: ...
    @property
    def crc64nvme(self) -> str | None: ...
    @property
    def composite(self) -> str | None: ...
    @property
    def composite_algorithm(self) -> str | None: ...
    @property
    def version(self) -> str | None: ...
    @property
    def generation(self) -> int | None: ...
    @property
    def version_id(self) -> str | None: ...
    @property
    def is_latest(self) -> bool | None: ...
    @property
    def delete_marker(self) -> bool: ...
    @property
    def soft_deleted(self) -> bool: ...
    @property
    def storage_class(self) -> str | None: ...
    @property
    def content_encoding(self) -> str | None: ...
    @property
    def content_type(self) -> str | None: ...
    @property
    def cache_control(self) -> str | None: ...
    @property
    def content_disposition(self) -> str | None: ...
    @property
    def metadata(self) -> dict[str, str]: ...

class Report:
    @property
    def bytes(self) -> int: ...
    @property
    def pieces(self) -> int: ...
    @property
    def verified(self) -> str: ...
    @property
    def crc32c(self) -> str: ...

class ObjectStream(Iterator[list[ObjectInfo]], AsyncIterator[list[ObjectInfo]]):
    def __iter__(self) -> ObjectStream: ...
    def __next__(self) -> list[ObjectInfo]: ...
    def __aiter__(self) -> ObjectStream: ...
    def __anext__(self) -> Awaitable[list[ObjectInfo]]: ...
    def close(self) -> None: ...

class Records(Sequence[dict[str, Any]]):
    """A listing partition kept as columns; items read as dicts (url, key, size, updated)."""
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __iter__(self) -> Iterator[dict[str, Any]]: ...
    def key(self, i: int) -> str: ...
    def keys(self) -> list[str]: ...
    def urls(self) -> list[str]: ...
    def sizes(self) -> list[int]: ...
    def updated(self) -> list[float]: ...
    def total_size(self) -> int: ...
    def part(self, lo: int, hi: int) -> Records: ...
    def urls_between(
        self, lo: str | None = None, hi: str | None = None, *, max_size: int | None = None
    ) -> list[str]: ...
    def byte_cuts(
        self, bytes_per_piece: int, *, keys_per_piece: int | None = None
    ) -> tuple[list[str], list[tuple[str, int]]]: ...
    def byte_pieces(
        self, slots: int, *, bytes_per_piece: int | None = None, keys_per_piece: int | None = None
    ) -> tuple[list[str], list[tuple[int, int]], int]: ...

def iter_objects(session: Session, url: str, *, recursive: bool = False, detail: str = "full") -> ObjectStream: ...
def list_range(
    session: Session,
    url: str,
    *,
    start: str,
    end: str | None = None,
    max_keys: int = 100_000,
    detail: str = "size",
    connections: int | None = None,
    records: bool = False,
) -> tuple[list[ObjectInfo] | Records, str | None, tuple[str | None, str | None, int, bool] | None]: ...
def inventory_open(
    manifest: str, *, prefix: str = "", session: Session | None = None
) -> tuple[str, str, list[str]]: ...
def inventory_rows(part: str, bucket_url: str, *, prefix: str = "", session: Session | None = None) -> Records: ...
def check_sync(src: str, dst: str) -> None: ...
def sync_deletes_held(
    *,
    extras: int,
    source_listed: int,
    failed: int,
    max_delete: int | None = None,
    delete_when_source_empty: bool = False,
    ignore_errors: bool = False,
) -> tuple[str, int] | None: ...
def delete_extras(
    session: Session, extras: list[tuple[str, str | None]], *, workers: int | None = None
) -> tuple[int, int, list[str]]: ...
def sync_range(
    session: Session,
    src: str,
    dst: str,
    *,
    start: str,
    stop: str | None = None,
    delete: bool = False,
    checksum: bool = False,
    size_only: bool = False,
    update: bool = False,
    no_clobber: bool = False,
    workers: int | None = None,
    chunk_size: int | None = None,
) -> dict[str, Any]: ...

_SplitWire = tuple[str, tuple[str, str] | None, int, int, str, str, str, list[list[tuple[int, int, int]]]]

def split_copy_begin(
    session: Session, src: str, dst: str, *, bytes_per_task: int, part_size: int | None = None
) -> tuple[_SplitWire | None, str | None]: ...
def split_copy_parts(
    session: Session, wire: _SplitWire, dst: str, task: int, *, workers: int = 4
) -> list[tuple[int, str, int, int]]: ...
def split_copy_finish(
    session: Session, wire: _SplitWire, *, dst: str, parts: list[tuple[int, str, int, int]]
) -> int: ...
def split_copy_abort(session: Session, wire: _SplitWire, *, dst: str) -> None: ...
def task_bytes(total: int, *, slots: int) -> int: ...
def join_pieces(pieces: list[tuple[int, int]], *, max_bytes: int, max_keys: int) -> list[int]: ...
def cut_range(
    lo: str,
    hi: str | None,
    *,
    prefix: str,
    alphabet: str,
    page_first: str | None = None,
    pages: int = 8,
    counter: bool = False,
) -> str | None: ...

class ReadStream(Iterator[bytes], AsyncIterator[bytes]):
    def __iter__(self) -> ReadStream: ...
    def __next__(self) -> bytes: ...
    def __aiter__(self) -> ReadStream: ...
    def __anext__(self) -> Awaitable[bytes]: ...
    def close(self) -> None: ...

_Listing = tuple[list[ObjectInfo], list[str]]
_DuResult = tuple[list[tuple[str, int, int]], tuple[int, int]]
_Path = str | PathLike[str]

def stat(session: Session, url: str) -> ObjectInfo: ...
def stat_async(session: Session, url: str) -> Awaitable[ObjectInfo]: ...
def list_prefix(
    session: Session, url: str, *, delimiter: bool = True, detail: str = "full", limit: int | None = None
) -> _Listing: ...
def list_prefix_async(
    session: Session, url: str, *, delimiter: bool = True, detail: str = "full", limit: int | None = None
) -> Awaitable[_Listing]: ...
def expand(session: Session, url: str, *, recursive: bool = False, detail: str = "full") -> list[ObjectInfo]: ...
def expand_async(
    session: Session, url: str, *, recursive: bool = False, detail: str = "full"
) -> Awaitable[list[ObjectInfo]]: ...
def entries(session: Session, url: str) -> _Listing | None: ...
def entries_async(session: Session, url: str) -> Awaitable[_Listing | None]: ...
def du(session: Session, url: str, *, group_by: str | None = None) -> _DuResult: ...
def du_async(session: Session, url: str, *, group_by: str | None = None) -> Awaitable[_DuResult]: ...
def update(
    session: Session,
    url: str,
    *,
    content_type: str | None = None,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: dict[str, str] | None = None,
    remove_metadata: list[str] | None = None,
    storage_class: str | None = None,
    acl: str | None = None,
    predefined_acl: str | None = None,
    dry_run: bool = False,
) -> str: ...
def update_async(
    session: Session,
    url: str,
    *,
    content_type: str | None = None,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: dict[str, str] | None = None,
    remove_metadata: list[str] | None = None,
    storage_class: str | None = None,
    acl: str | None = None,
    predefined_acl: str | None = None,
    dry_run: bool = False,
) -> Awaitable[str]: ...
def make_bucket(session: Session, url: str) -> None: ...
def make_bucket_async(session: Session, url: str) -> Awaitable[None]: ...
def stat_version(session: Session, url: str, version_id: str) -> ObjectInfo: ...
def stat_version_async(session: Session, url: str, version_id: str) -> Awaitable[ObjectInfo]: ...
def copy_version(session: Session, src: str, dst: str, version_id: str, *, workers: int | None = None) -> int: ...
def copy_version_async(
    session: Session, src: str, dst: str, version_id: str, *, workers: int | None = None
) -> Awaitable[int]: ...
def delete_version(session: Session, url: str, version_id: str) -> None: ...
def delete_version_async(session: Session, url: str, version_id: str) -> Awaitable[None]: ...
def list_versions(
    session: Session,
    url: str,
    *,
    recursive: bool = False,
    soft_deleted: bool = False,
    start: str | None = None,
    end: str | None = None,
) -> _Listing: ...
def list_versions_async(
    session: Session,
    url: str,
    *,
    recursive: bool = False,
    soft_deleted: bool = False,
    start: str | None = None,
    end: str | None = None,
) -> Awaitable[_Listing]: ...
def restore(session: Session, url: str, version_id: str, *, allow_overwrite: bool = False) -> bool: ...
def restore_async(session: Session, url: str, version_id: str, *, allow_overwrite: bool = False) -> Awaitable[bool]: ...
def delete_many(session: Session, urls: list[str], *, workers: int | None = None) -> list[BaseException | None]: ...
def delete_many_async(
    session: Session, urls: list[str], *, workers: int | None = None
) -> Awaitable[list[BaseException | None]]: ...
def download(
    session: Session,
    url: str,
    filename: _Path,
    *,
    workers: int | None = None,
    chunk_size: int | None = None,
    slices: int | None = None,
    deadline: float | None = None,
) -> Report: ...
def download_async(
    session: Session,
    url: str,
    filename: _Path,
    *,
    workers: int | None = None,
    chunk_size: int | None = None,
    slices: int | None = None,
    deadline: float | None = None,
) -> Awaitable[Report]: ...
def upload(
    session: Session,
    filename: _Path,
    url: str,
    *,
    workers: int | None = None,
    chunk_size: int | None = None,
    content_type: str | None = None,
    if_not_exists: bool = False,
    deadline: float | None = None,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: dict[str, str] | None = None,
    storage_class: str | None = None,
) -> Report: ...
def upload_async(
    session: Session,
    filename: _Path,
    url: str,
    *,
    workers: int | None = None,
    chunk_size: int | None = None,
    content_type: str | None = None,
    if_not_exists: bool = False,
    deadline: float | None = None,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: dict[str, str] | None = None,
    storage_class: str | None = None,
) -> Awaitable[Report]: ...
def copy_many(
    session: Session,
    pairs: list[tuple[str, str]],
    *,
    workers: int | None = None,
    chunk_size: int | None = None,
    content_type: str | None = None,
    if_not_exists: bool = False,
    deadline: float | None = None,
    local_root: str | PathLike | None = None,
) -> list[int | BaseException]: ...
def copy_many_async(
    session: Session,
    pairs: list[tuple[str, str]],
    *,
    workers: int | None = None,
    chunk_size: int | None = None,
    content_type: str | None = None,
    if_not_exists: bool = False,
    deadline: float | None = None,
    local_root: str | PathLike | None = None,
) -> Awaitable[list[int | BaseException]]: ...
def move_many(
    session: Session,
    pairs: list[tuple[str, str]],
    *,
    workers: int | None = None,
    chunk_size: int | None = None,
    deadline: float | None = None,
    local_root: str | PathLike | None = None,
) -> list[int | BaseException]: ...
def move_many_async(
    session: Session,
    pairs: list[tuple[str, str]],
    *,
    workers: int | None = None,
    chunk_size: int | None = None,
    deadline: float | None = None,
    local_root: str | PathLike | None = None,
) -> Awaitable[list[int | BaseException]]: ...
def put(
    session: Session,
    url: str,
    data: bytes,
    *,
    content_type: str | None = None,
    if_not_exists: bool = False,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: dict[str, str] | None = None,
    storage_class: str | None = None,
) -> int: ...
def put_async(
    session: Session,
    url: str,
    data: bytes,
    *,
    content_type: str | None = None,
    if_not_exists: bool = False,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: dict[str, str] | None = None,
    storage_class: str | None = None,
) -> Awaitable[int]: ...
def guess_type(name: str) -> str: ...
def check_write(
    url: str,
    *,
    content_type: str | None = None,
    content_encoding: str | None = None,
    cache_control: str | None = None,
    content_disposition: str | None = None,
    metadata: dict[str, str] | None = None,
    storage_class: str | None = None,
) -> None: ...
def presign(
    session: Session, url: str, *, expires: int = 3600, method: str = "GET", shape: dict[str, Any] | None = None
) -> str: ...
def presign_async(
    session: Session, url: str, *, expires: int = 3600, method: str = "GET", shape: dict[str, Any] | None = None
) -> Awaitable[str]: ...
def list_buckets(session: Session, scheme: str) -> list[tuple[str, str | None]]: ...
def list_buckets_async(session: Session, scheme: str) -> Awaitable[list[tuple[str, str | None]]]: ...
def cat(
    session: Session,
    url: str,
    *,
    start: int | None = None,
    end: int | None = None,
    version: str | None = None,
    version_id: str | None = None,
) -> bytes: ...
def cat_async(
    session: Session,
    url: str,
    *,
    start: int | None = None,
    end: int | None = None,
    version: str | None = None,
    version_id: str | None = None,
) -> Awaitable[bytes]: ...
def cat_buffer(
    session: Session,
    url: str,
    *,
    start: int | None = None,
    end: int | None = None,
    version: str | None = None,
    version_id: str | None = None,
) -> Any: ...
def cat_buffer_async(
    session: Session,
    url: str,
    *,
    start: int | None = None,
    end: int | None = None,
    version: str | None = None,
    version_id: str | None = None,
) -> Awaitable[Any]: ...
def read_pool_idle_bytes() -> int: ...
def cat_ranges(
    session: Session,
    urls: list[str],
    starts: list[int | None],
    ends: list[int | None],
    *,
    versions: list[str | None] | None = None,
    hole: int = 0,
) -> list[bytes | BaseException]: ...
def cat_ranges_async(
    session: Session,
    urls: list[str],
    starts: list[int | None],
    ends: list[int | None],
    *,
    versions: list[str | None] | None = None,
    hole: int = 0,
) -> Awaitable[list[bytes | BaseException]]: ...
def destination(dst: str, *, rel: str, src_url: str) -> str: ...
def place(dst: str, *, rel: str, src_url: str) -> str | None: ...
def read(
    session: Session,
    urls: list[str],
    *,
    boundaries: bool = False,
    decompress: bool | None = None,
    ordered: bool = True,
    read_ahead: int | None = None,
) -> ReadStream: ...
