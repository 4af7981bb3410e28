"""memd: named host and GPU memory buffers shared between processes.

memd is a per-node memory broker: a daemon owns the memory, processes ask
for buffers by name and map them zero-copy. This package binds libmemd's C
API (with ctypes: one package for every CPython >= 3.9)::

    import memd, numpy as np

    with memd.connect() as client:                  # $MEMD_SOCKET_DIR or default
        with client.create_array("frames/0", (480, 640), "float32") as buf:
            buf.numpy()[:] = 1.0                     # zero-copy, writable
            buf.seal()                               # contents final
        # ...in another process...
        with client.open("frames/0", timeout=5.0) as frame:
            frame.numpy()                            # read-only, zero-copy

Errors are memd.Error subclasses, one per status code, each also the
builtin it resembles (NotFoundError is a FileNotFoundError, ...).
"""

from ._errors import (  # noqa: F401  (re-exported)
    AbortedError, AlreadyExistsError, CancelledError, DataLossError,
    DeadlineExceededError, Error, FailedPreconditionError, InternalError,
    InvalidArgumentError, NotFoundError, OutOfRangeError, PermissionDeniedError,
    ResourceExhaustedError, UnauthenticatedError, UnavailableError, UnimplementedError,
    UnknownError,
)
from ._types import (  # noqa: F401
    BufferInfo, DaemonStats, DeviceInfo, DurabilityStats, Leak, LeakReport, LeaseHolder,
    LeaseHolders, MemoryWaits, PoolStats, Recommendation, ReplicaInfo, SessionInfo,
    SizeClassStats, TransferInfo, TransferList, TransferProgress, TransferStats, TrimmedPool,
    UidUsage,
)
from ._buffer import Buffer  # noqa: F401
from ._client import Client, Transfer, connect  # noqa: F401
from ._pickle import default_client, reopen  # noqa: F401
from ._version import __version__  # noqa: F401

__all__ = [
    "connect", "Client", "Buffer", "Transfer", "reopen", "default_client",
    "BufferInfo", "DaemonStats", "DeviceInfo", "DurabilityStats", "Leak", "LeakReport",
    "LeaseHolder", "LeaseHolders", "MemoryWaits", "PoolStats", "Recommendation",
    "ReplicaInfo", "SessionInfo", "SizeClassStats", "TransferInfo", "TransferList",
    "TransferProgress", "TransferStats", "TrimmedPool", "UidUsage",
    "Error", "AbortedError", "AlreadyExistsError", "CancelledError", "DataLossError",
    "DeadlineExceededError", "FailedPreconditionError", "InternalError",
    "InvalidArgumentError", "NotFoundError", "OutOfRangeError", "PermissionDeniedError",
    "ResourceExhaustedError", "UnauthenticatedError", "UnavailableError",
    "UnimplementedError", "UnknownError",
]
