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
pyarrow's fsspec bridge the handler is pyarrow's ``FSSpecHandler``,
released by those threads just after the files: exit waits ``QUIET``
seconds past the last fsspec file's release for it.

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
#: When the last object tracked with ``linger`` went (monotonic seconds).
_gone = [float("-inf")]


def _lingered(token: object) -> None:
    _tracked.pop(token, None)
    _gone[0] = time.monotonic()


def track(obj: object, owner: object | None = None, linger: bool = False) -> None:
    """Counts ``obj`` while it is alive (and, given ``owner``, only once
    ``owner`` is gone: a handler counts once the ``PyFileSystem`` holding
    it is gone and it is not). With ``linger``, exit also waits until
    ``quiet`` seconds have passed since the last such object went: an fsspec
    file's handler is pyarrow's own ``FSSpecHandler``, which shoal cannot
    track, and pyarrow's threads release it just after the files."""
    token = object()
    if linger:
        ref = weakref.ref(obj, lambda _, t=token: _lingered(t))
    else:
        ref = weakref.ref(obj, lambda _, t=token: _tracked.pop(t, None))
    _tracked[token] = (ref, None if owner is None else weakref.ref(owner))


def live() -> int:
    """Files handed out and not yet collected, and handlers only
    pyarrow's threads still hold."""
    return sum(1 for obj, owner in _tracked.copy().values() if obj() is not None and (owner is None or owner() is None))


def wait(quiet: float = QUIET, limit: float = LIMIT) -> int:
    """Waits until nothing tracked is alive (and ``quiet`` seconds have
    passed since the last object tracked with ``linger`` went), or nothing
    went for ``quiet`` seconds, at most ``limit`` seconds; returns how many
    are left."""
    start = since = time.monotonic()
    last = live()
    while True:
        n, now = live(), time.monotonic()
        if n < last:
            since = now
        last = n
        if (n <= 0 and now - _gone[0] >= quiet) or now - since >= quiet or now - start >= limit:
            return n
        time.sleep(0.005)


atexit.register(wait)
