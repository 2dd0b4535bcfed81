"""Files pyarrow's threads may still hold when the interpreter exits.

pyarrow releases the files a read used on its own thread pool, after
``read_table`` has returned (apache/arrow#33975, #34314, #39162). A file
object written in Python (every ``PyFileSystem`` handler's, fsspec's
through pyarrow's bridge) is released under the GIL; a thread that asks
for the GIL while the interpreter is finalizing is ended by Python in the
middle of C++ code, and the process aborts ("terminate called without an
active exception", exit 134) after all its work was done: half the time,
on a 2-core machine, for a script that ends right after its read.

The same holds for a filesystem's handler: a script that drops its
``shoal.arrow.filesystem()`` (a local variable of a function that
returned) leaves pyarrow's threads to release the last of it.

So each file shoal hands out is counted while it lives, and each handler
while it outlives the filesystem object Python held (pyarrow's threads
hold it then); at exit (``atexit`` runs before finalization, while
threads can still take the GIL) the interpreter waits, the GIL released,
until those are gone: until none is left, or none went for :data:`QUIET`
seconds (something the program itself still holds), and never longer
than :data:`LIMIT` seconds.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref

#: Seconds without a file going before exit stops waiting.
QUIET = 0.05
#: Seconds exit waits at most.
LIMIT = 5.0

_lock = threading.Lock()
_live = 0
_gone_count = 0


def _gone() -> None:
    global _live, _gone_count
    with _lock:
        _live -= 1
        _gone_count += 1


def track(obj: object) -> None:
    """Counts ``obj`` as live until it is collected."""
    global _live
    with _lock:
        _live += 1
    fin = weakref.finalize(obj, _gone)
    # Not at exit: a file still alive then is what the wait is for.
    fin.atexit = False


def _went() -> None:
    global _gone_count
    with _lock:
        _gone_count += 1


#: (handler, filesystem) weak pairs from :func:`track_filesystem`.
_filesystems: list[tuple[weakref.ref, weakref.ref]] = []


def track_filesystem(handler: object, fs: object) -> None:
    """Counts ``handler`` as pyarrow's to release once the Python object
    ``fs`` (the ``PyFileSystem`` holding it) is gone and it is not."""
    with _lock:
        _filesystems.append((weakref.ref(handler), weakref.ref(fs)))
    fin = weakref.finalize(handler, _went)
    fin.atexit = False


def _held_by_pyarrow() -> int:
    """Handlers alive whose filesystem object Python has dropped (the
    lock held); forgets the ones collected."""
    _filesystems[:] = [(h, f) for h, f in _filesystems if h() is not None]
    return sum(1 for _, f in _filesystems if f() is None)


def live() -> int:
    """Files handed out and not yet collected, and handlers only
    pyarrow's threads still hold."""
    with _lock:
        return _live + _held_by_pyarrow()


def wait(quiet: float = QUIET, limit: float = LIMIT) -> int:
    """Waits until no tracked file is alive, or none went for ``quiet``
    seconds, at most ``limit`` seconds; returns how many are left."""
    start = time.monotonic()
    last_gone, since = -1, start
    while True:
        with _lock:
            n, gone = _live + _held_by_pyarrow(), _gone_count
        now = time.monotonic()
        if gone != last_gone:
            last_gone, since = gone, now
        if n <= 0 or now - since >= quiet or now - start >= limit:
            return n
        time.sleep(0.005)


atexit.register(wait)
