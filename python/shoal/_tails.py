"""First reads kept for the next open of the same object version.

Arrow opens a dataset's first file twice (for its schema, then for its
rows) and reads its footer each time; the footer (or a small file read
whole) that the first open fetched answers the second. Both of shoal's
pyarrow routes keep them here: ``shoal.arrow``'s handler and
``shoal.fsspec``'s filesystem (which pyarrow wraps in its fsspec bridge).
"""

from __future__ import annotations

import threading


class Tails:
    """URL -> (version, start, bytes) of first reads, oldest dropped first
    past ``limit`` bytes in all. Only a read of a known version is kept,
    and only that version is answered from it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._held: dict[str, tuple[str, int, bytes]] = {}
        self._bytes = 0

    def get(self, url: str, version: str | None) -> tuple[int, bytes] | None:
        """``(start, bytes)`` kept for this version of ``url``, if any."""
        with self._lock:
            held = self._held.get(url)
        return held[1:] if held is not None and version is not None and held[0] == version else None

    def put(self, url: str, version: str | None, at: int, data: bytes) -> None:
        if version is None or len(data) > self.limit:
            return
        with self._lock:
            self._drop(url)
            self._held[url] = (version, at, data)
            self._bytes += len(data)
            while self._bytes > self.limit:
                self._drop(next(iter(self._held)))

    def drop(self, url: str) -> None:
        with self._lock:
            self._drop(url)

    def _drop(self, url: str) -> None:
        gone = self._held.pop(url, None)
        if gone is not None:
            self._bytes -= len(gone[2])
