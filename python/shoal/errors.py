"""shoal's exceptions.

Every failure raised by shoal is a :class:`ShoalError` carrying ``kind`` (a
snake-case name such as ``"not_found"``), ``url`` and ``status`` (the HTTP
status, when a server answered). The message is one line: the operation,
the URL, what the server said, and what to try.

Where Python has a built-in meaning, the classes also derive from it, so
code written for local files keeps working: a missing object is a
``FileNotFoundError``, a refused one a ``PermissionError``, a bad URL a
``ValueError``.
"""

from __future__ import annotations

import builtins


class ShoalError(Exception):
    """Base class of every error shoal raises."""

    kind: str = "other"
    url: str = ""
    status: int | None = None


class NotFoundError(ShoalError, FileNotFoundError):
    """The bucket or object does not exist."""

    kind = "not_found"


class PermissionDeniedError(ShoalError, PermissionError):
    """The credentials were accepted but do not allow this."""

    kind = "permission_denied"


class UnauthenticatedError(ShoalError, PermissionError):
    """No credentials, or credentials the server rejected."""

    kind = "unauthenticated"


class PreconditionError(ShoalError):
    """A precondition (generation, ETag, if-none-match) failed."""

    kind = "precondition"


class InvalidInputError(ShoalError, ValueError):
    """Something malformed was asked for (bad URL, bad key, bad option)."""

    kind = "invalid_input"


class UnsupportedError(ShoalError, NotImplementedError):
    """The request cannot be made on this backend (or this item is skipped)."""

    kind = "unsupported"


class ConnectError(ShoalError, ConnectionError):
    """Could not connect (refused, DNS, TLS handshake)."""

    kind = "connect"


class RequestTimeoutError(ShoalError, builtins.TimeoutError):
    """A request or a read took too long."""

    kind = "timeout"


class ServerBusyError(ShoalError):
    """The server stayed overloaded or failing (429, 5xx) through retries."""

    kind = "server_busy"


class ProtocolError(ShoalError):
    """The server answered something shoal could not understand."""

    kind = "protocol"


class IntegrityError(ShoalError):
    """Bytes arrived but their checksum or length is wrong."""

    kind = "integrity"


class ChangedError(ShoalError):
    """The object changed while it was being read."""

    kind = "changed"


class LocalIOError(ShoalError, OSError):
    """A local file system error."""

    kind = "io"


class RejectedError(ShoalError):
    """Anything else the server refused."""

    kind = "rejected"


class CancelledError(ShoalError):
    """The operation was cancelled."""

    kind = "cancelled"


def new(cls: type[ShoalError], message: str, url: str = "") -> ShoalError:
    """An error raised by the Python layer, shaped like the engine's
    (``kind`` from its class, the URL it is about)."""
    e = cls(message)
    e.url = url
    return e


__all__ = [name for name, v in globals().items() if isinstance(v, type) and issubclass(v, ShoalError)]
