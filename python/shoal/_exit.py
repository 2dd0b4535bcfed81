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
returned) leaves pyarrow's threads to release the last of it. Through
pyarrow's fsspec bridge the handler is pyarrow's own ``FSSpecHandler``,
released by those threads just after the files: a file opened through it
finds it among its callers' frames (:func:`track_fsspec_handler`) and
counts it too. (Exit used to wait 50 ms past the last fsspec file's
release instead, which every such script paid in wall time.)

So each file shoal hands out is counted while it lives, and each handler
while it outlives the filesystem object Python held (pyarrow's threads
hold it then); at exit (``atexit`` runs before finalization, while
threads can still take the GIL) the interpreter waits, the GIL released,
until those are gone: until none is left, or none went for :data:`QUIET`
seconds (something the program itself still holds), and never longer
than :data:`LIMIT` seconds.

No lock: the table below changes only by single dict operations, which
the GIL makes atomic, and its entries leave from weakref callbacks, which
the garbage collector may run anywhere (a lock taken there could be the
one the interrupted code holds).
"""

from __future__ import annotations

import atexit
import sys
import time
import weakref

#: Seconds without a file going before exit stops waiting.
QUIET = 0.05
#: Seconds exit waits at most.
LIMIT = 5.0

#: What is tracked: (the object, the owner whose loss hands it to
#: pyarrow, or None), under a token of its own; an entry leaves when its
#: object is collected.
_tracked: dict[object, tuple[weakref.ref, weakref.ref | None]] = {}
#: How many callers' frames :func:`track_fsspec_handler` looks through:
#: ``FSSpecHandler.open_input_file`` -> ``AbstractFileSystem.open`` ->
#: ``ShoalFileSystem._open`` -> ``ShoalFile.__init__`` -> here, with room.
_FRAMES = 8


def track(obj: object, owner: object | None = None) -> None:
    """Counts ``obj`` while it is alive (and, given ``owner``, only once
    ``owner`` is gone: a handler counts once the ``PyFileSystem`` holding
    it is gone and it is not)."""
    token = object()
    ref = weakref.ref(obj, lambda _, t=token: _tracked.pop(t, None))
    _tracked[token] = (ref, None if owner is None else weakref.ref(owner))


def track_fsspec_handler() -> None:
    """Counts the pyarrow ``FSSpecHandler`` among the caller's callers, if
    any, while it lives (once per handler): a file opened by pyarrow's
    fsspec bridge is released by pyarrow's threads, then that handler
    just after it, so exit waits for both. Without pyarrow imported there
    is none to find."""
    fs = sys.modules.get("pyarrow.fs")
    cls = getattr(fs, "FSSpecHandler", None)
    if cls is None:
        return
    f = sys._getframe(1)
    for _ in range(_FRAMES):
        if f is None:
            return
        h = f.f_locals.get("self")
        if isinstance(h, cls):
            if not any(ref() is h for ref, _ in _tracked.copy().values()):
                track(h)
            return
        f = f.f_back


def live() -> int:
    """Files handed out and not yet collected, and handlers only
    pyarrow's threads still hold."""
    return sum(1 for obj, owner in _tracked.copy().values() if obj() is not None and (owner is None or owner() is None))


def wait(quiet: float = QUIET, limit: float = LIMIT) -> int:
    """Waits until nothing tracked is alive, or nothing went for ``quiet``
    seconds, at most ``limit`` seconds; returns how many are left."""
    start = since = time.monotonic()
    last = live()
    while True:
        n, now = live(), time.monotonic()
        if n < last:
            since = now
        last = n
        if n <= 0 or now - since >= quiet or now - start >= limit:
            return n
        time.sleep(0.005)


atexit.register(wait)
