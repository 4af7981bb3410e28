"""memd's exceptions: one class per absl/gRPC status code.

The C++ binding raises these (it imports this module when it loads), so the
classes are plain Python and a caller can catch either memd's class or the
builtin it derives from: ``except FileNotFoundError`` catches a NotFoundError.
"""

from __future__ import annotations

__all__ = [
    "Error",
    "CancelledError",
    "UnknownError",
    "InvalidArgumentError",
    "DeadlineExceededError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "AbortedError",
    "OutOfRangeError",
    "UnimplementedError",
    "InternalError",
    "UnavailableError",
    "DataLossError",
    "UnauthenticatedError",
    "error_for_code",
]

# absl::StatusCode (equal to gRPC's codes 0-16).
_CODE_NAMES = {
    0: "OK",
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
}


class Error(Exception):
    """An error memd (the daemon or libmemd) reported.

    ``str(e)`` is the daemon's message; ``e.code`` the absl/gRPC status code
    (an int) and ``e.code_name`` its name ("NOT_FOUND").
    """

    code: int = 2  # UNKNOWN, for codes this module has no class for.

    def __init__(self, message: str = "", code: int | None = None) -> None:
        # One argument only: OSError's constructor would read two as
        # (errno, strerror) and str(e) would show "[Errno 5] ...".
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def code_name(self) -> str:
        return _CODE_NAMES.get(self.code, f"CODE_{self.code}")

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    def __reduce__(self):
        # Keeps a non-default code through pickling (multiprocessing).
        return (type(self), (str(self), self.code))


class CancelledError(Error):
    """CANCELLED: e.g. a Transfer that was cancelled."""
    code = 1


class UnknownError(Error):
    """UNKNOWN."""
    code = 2


class InvalidArgumentError(Error, ValueError):
    """INVALID_ARGUMENT: a bad name, size, mode, location or attribute."""
    code = 3


class DeadlineExceededError(Error, TimeoutError):
    """DEADLINE_EXCEEDED: a wait (open's timeout, a copy's deadline) ran out."""
    code = 4


class NotFoundError(Error, FileNotFoundError):
    """NOT_FOUND: no buffer by that name (or a lease that ended)."""
    code = 5


class AlreadyExistsError(Error, FileExistsError):
    """ALREADY_EXISTS: the name is taken."""
    code = 6


class PermissionDeniedError(Error, PermissionError):
    """PERMISSION_DENIED: the buffer's mode or owner refuses this user."""
    code = 7


class ResourceExhaustedError(Error, MemoryError):
    """RESOURCE_EXHAUSTED: a pool, quota or limit is full."""
    code = 8


class FailedPreconditionError(Error):
    """FAILED_PRECONDITION: wrong state (sealed already, read-only lease...)."""
    code = 9


class AbortedError(Error):
    """ABORTED: a race with another client was lost; call again."""
    code = 10


class OutOfRangeError(Error):
    """OUT_OF_RANGE."""
    code = 11


class UnimplementedError(Error, NotImplementedError):
    """UNIMPLEMENTED: the daemon or this client cannot do that here."""
    code = 12


class InternalError(Error):
    """INTERNAL: a bug or a broken invariant in memd."""
    code = 13


class UnavailableError(Error, ConnectionError):
    """UNAVAILABLE: no daemon at the socket directory; retry later."""
    code = 14


class DataLossError(Error):
    """DATA_LOSS."""
    code = 15


class UnauthenticatedError(Error):
    """UNAUTHENTICATED: the session ended (the daemon restarted); call again."""
    code = 16


_BY_CODE = {cls.code: cls for cls in (
    CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
    NotFoundError, AlreadyExistsError, PermissionDeniedError,
    ResourceExhaustedError, FailedPreconditionError, AbortedError,
    OutOfRangeError, UnimplementedError, InternalError, UnavailableError,
    DataLossError, UnauthenticatedError)}


def error_for_code(code: int, message: str) -> Error:
    """The exception for a status code and message (Error for unknown codes)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return Error(message, code)
    return cls(message)
