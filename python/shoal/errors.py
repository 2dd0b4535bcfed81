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


class PermissionDeniedError(ShoalError, PermissionError):
    """The credentials were accepted but do not allow this."""


class UnauthenticatedError(ShoalError, PermissionError):
    """No credentials, or credentials the server rejected."""


class PreconditionError(ShoalError):
    """A precondition (generation, ETag, if-none-match) failed."""


class InvalidInputError(ShoalError, ValueError):
    """Something malformed was asked for (bad URL, bad key, bad option)."""


class UnsupportedError(ShoalError, NotImplementedError):
    """The request cannot be made on this backend (or this item is skipped)."""


class ConnectError(ShoalError, ConnectionError):
    """Could not connect (refused, DNS, TLS handshake)."""


class RequestTimeoutError(ShoalError, builtins.TimeoutError):
    """A request or a read took too long."""


class ServerBusyError(ShoalError):
    """The server stayed overloaded or failing (429, 5xx) through retries."""


class ProtocolError(ShoalError):
    """The server answered something shoal could not understand."""


class IntegrityError(ShoalError):
    """Bytes arrived but their checksum or length is wrong."""


class ChangedError(ShoalError):
    """The object changed while it was being read."""


class LocalIOError(ShoalError, OSError):
    """A local file system error."""


class RejectedError(ShoalError):
    """Anything else the server refused."""


class CancelledError(ShoalError):
    """The operation was cancelled."""


__all__ = [name for name, v in globals().items() if isinstance(v, type) and issubclass(v, ShoalError)]
