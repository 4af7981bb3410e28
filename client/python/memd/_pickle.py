"""Buffers travel by name: pickling a Buffer pickles (name, owner uid), and
unpickling opens the buffer again, read-only, through a client connected
with default settings ($MEMD_SOCKET_DIR), one per process."""

from __future__ import annotations

import os
import threading
from typing import Any, List, Optional

from . import _client as _connection

# How long an unpickled Buffer waits for its buffer to be sealed.
REOPEN_TIMEOUT = 5.0

_lock = threading.Lock()
_client: Optional[Any] = None
_client_pid: Optional[int] = None
# A forked child must not destroy (nor use) its parent's client, whose gRPC
# state does not survive fork: it is left here, unused.
_inherited: List[Any] = []


def default_client():
    """The process's default Client (memd.connect()), made on first use."""
    global _client, _client_pid
    with _lock:
        if _client is not None and _client_pid != os.getpid():
            _inherited.append(_client)
            _client = None
        if _client is None:
            _client = _connection.connect()
            _client_pid = os.getpid()
        return _client


def reopen(name: str, owner: Optional[int] = None):
    """Opens `name` read-only through the default client, waiting up to
    REOPEN_TIMEOUT seconds for its seal; with `owner`, only a buffer that uid
    owns (the producer of the pickled Buffer)."""
    return default_client().open(name, timeout=REOPEN_TIMEOUT, owner=owner)
