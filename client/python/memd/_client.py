"""memd.Client, memd.connect and memd.Transfer over libmemd's memd_client
and memd_transfer (memd/_capi.py)."""

from __future__ import annotations

import math
import threading
from ctypes import byref, c_int, c_void_p
from typing import Any, List, Mapping, Optional, Sequence

from . import _capi, _records
from ._buffer import Buffer
from ._types import (BufferInfo, DaemonStats, LeakReport, Recommendation, SessionInfo,
                     TransferList, TransferProgress, TrimmedPool, UidUsage)

_lib = _capi.lib


def _milliseconds(seconds: Any, what: str) -> int:
    """Whole milliseconds, rounded up (a 0.1 ms timeout still waits)."""
    value = float(seconds)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0, not {seconds!r}")
    return math.ceil(value * 1000)


def _size(nbytes: Any) -> int:
    size = int(nbytes)
    if size < 0:
        raise _capi.error_for_code(3, f"size {size} is negative")
    return size


class _CreateOptions:
    """memd_create_options, with the strings it points to kept alive."""

    def __init__(self, location: str, mode: int, persistent: bool,
                 attrs: Optional[Mapping[str, str]], populate: bool,
                 existing_owner: Optional[int] = None, hint: str = "",
                 mappable: Optional[Sequence[str]] = None, retention: str = "",
                 wait_for_memory: Optional[float] = None, numa: str = "",
                 keep_descriptor: bool = False) -> None:
        self._keep = []
        self.struct = _capi.CreateOptions()
        self.struct.struct_size = _capi.ctypes.sizeof(_capi.CreateOptions)
        self.struct.location = _capi.encode(location, "location")
        self.struct.mode = int(mode)
        self.struct.ephemeral = 0 if persistent else 1
        self.struct.populate = 1 if populate else 0
        self.struct.existing_owner = -1 if existing_owner is None else int(existing_owner)
        if attrs:
            array = (_capi.Attr * len(attrs))()
            for i, (key, value) in enumerate(attrs.items()):
                array[i].key = _capi.encode(key, "attribute key")
                array[i].value = _capi.encode(value, f"attribute {key!r}")
            self._keep.append(array)
            self.struct.attrs = array
            self.struct.attr_count = len(attrs)
        self.struct.access_hint = _capi.encode(hint, "hint")
        self.struct.retention = _capi.encode(retention, "retention")
        self.struct.numa = _capi.encode(numa, "numa")
        self.struct.keep_descriptor = 1 if keep_descriptor else 0
        self.struct.wait_for_memory_ms = (0 if wait_for_memory is None
                                          else _milliseconds(wait_for_memory, "wait_for_memory"))
        if mappable:
            places = (_capi.c_char_p * len(mappable))(
                *(_capi.encode(where, "mappable location") for where in mappable))
            self._keep.append(places)
            self.struct.mappable_locations = places
            self.struct.mappable_location_count = len(mappable)


class _Session:
    """Owns a memd_client. Calls hold a reference while they run, so the
    last of Client.close() and the calls in flight ends the session
    (CPython frees an object when its last reference goes)."""

    __slots__ = ("handle",)

    def __init__(self, handle: _capi.ClientP) -> None:
        self.handle = handle

    def __del__(self) -> None:
        # At interpreter exit the module may be torn down first.
        lib = getattr(_capi, "lib", None)
        if lib is not None:
            lib.memd_client_close(self.handle)


# memd_open's options when every argument is left at its default.
_DEFAULT_OPEN = _capi.OpenOptions(_capi.OPEN_OPTIONS_SIZE, 0, 0, 0, -1, None, 0)


class Client:
    """A connection to the local memd (memd.connect()).

    Thread-safe. A context manager: leaving it closes the client; Buffers and
    Transfers made through it stay valid. When the process exits the daemon
    releases every lease it held. Every call raises memd.Error subclasses:
    see memd.Error. Calls that wait (open with a timeout) release the GIL.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("connect with memd.connect() or memd.Client.connect()")

    @staticmethod
    def connect(socket_dir: Optional[str] = None, *, call_timeout: Optional[float] = None,
                mapping_cache_bytes: Optional[int] = None,
                daemon_uid: Optional[int] = None,
                device_cache_bytes: Optional[int] = None) -> "Client":
        """Connects to the local memd and returns a Client.

        socket_dir: None for $MEMD_SOCKET_DIR, else the user's own daemon's
        directory ($XDG_RUNTIME_DIR/memd, else /tmp/memd-$UID; /run/memd for
        root), then /run/memd, the system service's (UnavailableError names
        each directory tried). call_timeout: seconds each
        call that does not wait for a seal may take (default 30).
        mapping_cache_bytes: read-only mappings kept after their last Buffer
        is released, for a fast reopen (default 256 MiB; 0 unmaps at once).
        daemon_uid: the uid the daemon must run as (default: $MEMD_DAEMON_UID,
        else the trusted ones libmemd knows). device_cache_bytes: the same
        for read-only device buffers' imports (default 16 GiB; 0 keeps none):
        no device memory while memd keeps the buffer, let go when memd frees
        it.

        Raises UnavailableError (no daemon there), PermissionDeniedError (the
        socket's mode, or an untrusted socket directory or daemon), ..."""
        options = _capi.ConnectOptions()
        options.struct_size = _capi.ctypes.sizeof(_capi.ConnectOptions)
        options.socket_dir = None if socket_dir is None else _capi.encode(socket_dir,
                                                                          "socket_dir")
        options.call_timeout_ms = (30000 if call_timeout is None
                                   else _milliseconds(call_timeout, "call_timeout"))
        options.mapping_cache_bytes = (256 << 20 if mapping_cache_bytes is None
                                       else int(mapping_cache_bytes))
        options.daemon_uid = -1 if daemon_uid is None else int(daemon_uid)
        options.device_cache_bytes = (16 << 30 if device_cache_bytes is None
                                      else int(device_cache_bytes))
        handle = _capi.ClientP()
        _capi.call(_lib.memd_connect, byref(options), byref(handle))
        client = object.__new__(Client)
        client._session = _Session(handle)
        client._socket_dir = _capi.text(_lib.memd_client_socket_dir(handle))
        return client

    # ---- A call in flight holds the session, so close() never ends it under
    # ---- the call: the session ends when its last reference goes.

    def _handle(self) -> _capi.ClientP:
        session = self._session
        if session is None:
            raise ValueError("this memd.Client is closed")
        return session.handle

    def _call(self, function: Any, *args: Any) -> None:
        session = self._session
        if session is None:
            raise ValueError("this memd.Client is closed")
        _capi.call(function, session.handle, *args)

    def _json(self, function: Any, *args: Any) -> Any:
        session = self._session
        if session is None:
            raise ValueError("this memd.Client is closed")
        return _capi.call_json(function, session.handle, *args)

    def _info(self, function: Any, *args: Any) -> BufferInfo:
        session = self._session
        if session is None:
            raise ValueError("this memd.Client is closed")
        return _records.call_info(function, session.handle, *args)

    def _buffer(self, function: Any, name: str, sealed: Optional[bool], *args: Any) -> Buffer:
        session = self._session
        if session is None:
            raise ValueError("this memd.Client is closed")
        buffer = _capi.BufferP()
        _capi.call(function, session.handle, _capi.encode(name, "name"), *args, byref(buffer))
        return Buffer._wrap(buffer, name, sealed)

    # ---- Names and leases ----

    def create(self, name: str, nbytes: int, *, location: str = "host", mode: int = 0o600,
               persistent: bool = True, attrs: Optional[Mapping[str, str]] = None,
               populate: bool = False, hint: str = "",
               mappable: Optional[Sequence[str]] = None, retention: str = "",
               wait_for_memory: Optional[float] = None, numa: str = "",
               keep_descriptor: bool = False) -> Buffer:
        """Creates a buffer and returns a writable lease on it (not sealed yet).

        location: "host", "pinned", "device:N" or "auto": memd chooses from
        the size, `hint` ("device_frequent", "host_frequent", "read_mostly",
        "streaming") and each location's free memory, only among `mappable`
        (default: host, pinned and the GPUs this process's CUDA sees); the
        buffer's info.placement says which rule chose. mode: permission bits like a
        file's (0o600 owner only, 0o640 group may read, 0o666 everyone).
        persistent=False: the buffer goes with its last lease even once sealed
        (a buffer never sealed goes with its last lease either way). attrs: up
        to 16 str -> str attributes for readers ("dtype", "shape", "layout" are
        read by Buffer.numpy/torch/__dlpack__). populate: map every page now.
        retention: what memd may take back when the location is full and
        nobody holds the buffer: "" or "pinned" nothing, "demotable" its
        copies away from home, "evictable" also the buffer itself (an open
        is then NotFoundError saying when it was evicted). wait_for_memory:
        seconds a create whose location is full (once what may give way has)
        waits for memory, in turn with other waiting creates (None or 0: fail
        at once); past it DeadlineExceededError says what was free, asked
        and held. numa (host and pinned): the NUMA node to bind the pages to
        before any is touched: "" the daemon's default, "off", "auto" (a
        pinned buffer's GPU's node, else this process's) or a node number
        such as "1"; info.numa_node says where they went (-1: not bound).
        keep_descriptor (host and pinned): keep the buffer's descriptor for
        Buffer.write_from_file, one descriptor more until the seal or release.
        Raises AlreadyExistsError, InvalidArgumentError (name, size, mode,
        location, attrs, retention, numa), ResourceExhaustedError (pool, quota,
        and nothing could give way)."""
        options = _CreateOptions(location, mode, persistent, attrs, populate, None, hint,
                                 mappable, retention, wait_for_memory, numa, keep_descriptor)
        return self._buffer(_lib.memd_create, name, False, _size(nbytes), byref(options.struct))

    def create_array(self, name: str, shape: Any, dtype: Any, **kwargs: Any) -> Buffer:
        """create_array(name, shape, dtype, **create_kwargs) -> Buffer

        Creates a buffer sized for an array of `shape` and `dtype` (a numpy
        dtype or its name, "bfloat16" too) and sets its "dtype" and "shape"
        attributes (over any given in attrs), so that numpy(), torch() and
        __dlpack__ read it as that array. Other keyword arguments as
        create()."""
        from . import _arrays
        return _arrays.create_array(self, name, shape, dtype, **kwargs)

    def open(self, name: str, *, timeout: Optional[float] = None, writable: bool = False,
             owner: Optional[int] = None, populate: bool = False,
             location: Optional[str] = None,
             wait_for_memory: Optional[float] = None,
             keep_descriptor: bool = False) -> Buffer:
        """Opens a buffer by name.

        Read-only (the default) opens sealed buffers, waiting up to `timeout`
        seconds for the name to exist and be sealed (None or 0: fail at once);
        writable=True joins a buffer still being written. owner: the uid that
        must own the buffer (PermissionDeniedError otherwise) - a consumer
        that trusts one producer says which. location: where to map it
        ("host", "pinned", "device:N"; None: its home); where the buffer has
        no current copy the daemon makes one (once for every opener there,
        charged to this user) and the open waits for it (with no timeout, as
        long as the copy takes, up to ten minutes). wait_for_memory: with a
        location, seconds the copy waits for memory when the location is
        full (else ResourceExhaustedError at once); the open then waits at
        most the longer of it and timeout. keep_descriptor: as create(), for
        a writable open. Raises NotFoundError,
        DeadlineExceededError (the wait ran out), PermissionDeniedError,
        FailedPreconditionError, ResourceExhaustedError (the copy: memory,
        quota)."""
        if (timeout is None and not writable and owner is None and not populate
                and location is None and wait_for_memory is None and not keep_descriptor):
            options = _DEFAULT_OPEN  # The common case, without building a struct.
        else:
            options = _capi.OpenOptions(
                _capi.OPEN_OPTIONS_SIZE, 1 if writable else 0,
                0 if timeout is None else _milliseconds(timeout, "timeout"),
                1 if populate else 0, -1 if owner is None else int(owner),
                None if location is None else _capi.encode(location, "location"),
                0 if wait_for_memory is None
                else _milliseconds(wait_for_memory, "wait_for_memory"),
                1 if keep_descriptor else 0)
        # A read lease is of a sealed buffer; a writable one of an unsealed one.
        return self._buffer(_lib.memd_open, name, not writable, byref(options))

    def open_or_create(self, name: str, nbytes: int, *, timeout: Optional[float] = None,
                       owner: Optional[int] = None, location: str = "host",
                       mode: int = 0o600, persistent: bool = True,
                       attrs: Optional[Mapping[str, str]] = None,
                       populate: bool = False, hint: str = "",
                       mappable: Optional[Sequence[str]] = None, retention: str = "",
                       wait_for_memory: Optional[float] = None, numa: str = "",
                       keep_descriptor: bool = False) -> Buffer:
        """Creates the buffer if the name is free (writable lease, .created
        True), else opens it read-only, waiting up to `timeout` seconds for
        its seal (and only if `owner`, when given, owns it). With
        wait_for_memory, a create at a full location waits for memory as in
        create(); the call then waits at most the longer of the two, for
        whichever it finds itself waiting for. Other arguments as create()."""
        options = _CreateOptions(location, mode, persistent, attrs, populate, owner, hint,
                                 mappable, retention, wait_for_memory, numa=numa,
                                 keep_descriptor=keep_descriptor)
        wait = 0 if timeout is None else _milliseconds(timeout, "timeout")
        return self._buffer(_lib.memd_open_or_create, name, None, _size(nbytes),
                            byref(options.struct), wait)

    def unlink(self, name: str) -> None:
        """Removes the name; leased memory lives until its last lease ends."""
        self._call(_lib.memd_unlink, _capi.encode(name, "name"))

    # ---- Replicas ----

    def prefetch(self, name: str, location: str, *, wait: Optional[float] = None,
                 wait_for_memory: Optional[float] = None) -> BufferInfo:
        """Makes (or refreshes) the buffer's copy at `location` ("host",
        "pinned", "device:N") without a lease, charged to this user, and
        returns the buffer's BufferInfo. wait: None or 0 starts the copy and
        returns (its replica "filling"); else seconds to wait for it to be
        current. wait_for_memory: seconds the copy waits for memory when
        `location` is full; the call then waits for the copy too, at most
        the longer of the two. Raises NotFoundError, PermissionDeniedError,
        InvalidArgumentError (a location this node lacks),
        ResourceExhaustedError (memory, quota at `location`, transfers in
        flight), DeadlineExceededError, the copy's own failure."""
        options = _capi.PrefetchOptions(
            _capi.PREFETCH_OPTIONS_SIZE, 0 if wait is None else _milliseconds(wait, "wait"),
            0 if wait_for_memory is None else _milliseconds(wait_for_memory, "wait_for_memory"),
            -1)
        return self._info(_lib.memd_prefetch_with, _capi.encode(name, "name"),
                          _capi.encode(location, "location"), byref(options))

    def drop_replica(self, name: str, location: str) -> BufferInfo:
        """Removes the buffer's copy at `location`, which nobody may hold,
        and returns the buffer's BufferInfo. Raises NotFoundError,
        PermissionDeniedError, FailedPreconditionError (the home, or a copy
        someone holds)."""
        return self._info(_lib.memd_drop_replica, _capi.encode(name, "name"),
                          _capi.encode(location, "location"))

    # ---- Queries ----

    def stat(self, name: str) -> BufferInfo:
        """A fresh BufferInfo, with its placement."""
        # The JSON document carries placement; memd_buffer_info cannot grow
        # within ABI 0.2 (it is an array element of memd_buffer_list).
        return _records.buffer_info_json(self._json(_lib.memd_stat_json,
                                                    _capi.encode(name, "name")))

    def list(self, prefix: str = "", include_unlinked: bool = False) -> List[BufferInfo]:
        """BufferInfo of the buffers this user may read, by name (every field:
        placement and retention too). include_unlinked: also those unlinked
        but still taking memory (leased, or held by copies), unlinked=True,
        each after the named buffer of its name."""
        flags = _capi.MEMD_LIST_UNLINKED if include_unlinked else 0
        return [_records.buffer_info_json(b)
                for b in self._json(_lib.memd_list_json_flags,
                                    _capi.encode(prefix, "prefix"), flags)]

    def stats(self) -> DaemonStats:
        """DaemonStats: pools, devices, transfers..."""
        return _records.daemon_stats(self._json(_lib.memd_stats_json))

    def sessions(self) -> List[SessionInfo]:
        """SessionInfo of the daemon's sessions."""
        return _records.sessions(self._json(_lib.memd_sessions_json))

    def transfers(self) -> TransferList:
        """The copies queued or running now, this user's (every user's for
        root), oldest first: a TransferList of TransferInfo (progress,
        buffers, session) and how many more were omitted (past 1000)."""
        return _records.transfer_list(self._json(_lib.memd_transfers_json))

    def usage(self) -> List[UidUsage]:
        """UidUsage per uid and location, against the uid quota."""
        return _records.usage(self._json(_lib.memd_usage_json))

    def trim(self, location: str = "") -> List[TrimmedPool]:
        """Gives idle pool memory back to the system (root or the daemon's
        user only)."""
        return _records.trimmed(self._json(_lib.memd_trim_json,
                                           _capi.encode(location, "location")))

    def advise(self, prefix: str = "") -> List[Recommendation]:
        """Recommendations (prefetch, move, drop_replica, unlink) for the
        buffers whose names start with prefix, with the numbers behind each."""
        return _records.recommendations(self._json(_lib.memd_advise_json,
                                                   _capi.encode(prefix, "prefix")))

    def leaks(self, older_than: float = 3600, many_leases: int = 1024) -> LeakReport:
        """Memory that looks forgotten: this user's (every user's for root)
        persistent sealed buffers never opened, unsealed buffers, and leases
        at least older_than seconds old (whole seconds, rounded up; 0 means
        the default, an hour, as in the C API), and sessions holding at least
        many_leases leases (0: 1024). A LeakReport: leaks (at most 4096) and
        how many more were omitted."""
        seconds = _milliseconds(older_than, "older_than")
        count = int(many_leases)
        if count < 0:
            raise ValueError(f"many_leases must be >= 0, not {many_leases!r}")
        return _records.leak_report(self._json(_lib.memd_leaks_json, math.ceil(seconds / 1000),
                                               count))

    def ping(self) -> None:
        """One round trip to the daemon."""
        self._call(_lib.memd_ping)

    def cuda_device(self, location: str) -> int:
        """This process's CUDA ordinal for memd's "device:N" (they differ under
        CUDA_VISIBLE_DEVICES)."""
        ordinal = c_int()
        self._call(_lib.memd_cuda_device, _capi.encode(location, "location"), byref(ordinal))
        return ordinal.value

    def device_location(self, cuda_device: int) -> str:
        """memd's "device:N" for this process's CUDA device."""
        text = c_void_p()
        self._call(_lib.memd_device_location, int(cuda_device), byref(text))
        return _capi.take_string(text)

    # ---- Copies ----

    def copy(self, src: Buffer, dst: Buffer, *, src_offset: int = 0, dst_offset: int = 0,
             length: Optional[int] = None, priority: str = "normal",
             deadline: Optional[float] = None, chunk_bytes: int = 0) -> "Transfer":
        """Copies src to dst (Buffers this process holds; dst writable, not
        sealed) in the daemon - host to device, device to host, device to
        device, host to host - and returns a Transfer at once.

        length: bytes of each range (None: each range runs from its offset to
        the end of its buffer, and the two must be as long). priority:
        "critical", "normal" or "background". deadline: an absolute
        time.time() value by which the copy must be done
        (DeadlineExceededError otherwise). chunk_bytes: 0 for the daemon's
        default. Raises InvalidArgumentError, FailedPreconditionError,
        NotFoundError, ResourceExhaustedError before anything moves."""
        if priority not in _capi.PRIORITIES:
            raise ValueError(f"priority {priority!r} is not 'critical', 'normal' or "
                             "'background'")
        options = _capi.CopyOptions()
        options.struct_size = _capi.ctypes.sizeof(_capi.CopyOptions)
        options.priority = _capi.PRIORITIES[priority]
        if deadline is not None:
            at = float(deadline)
            if not math.isfinite(at):
                raise ValueError("deadline must be finite")
            options.deadline_unix_ns = max(1, int(at * 1e9))
        options.chunk_bytes = int(chunk_bytes)
        transfer = _capi.TransferP()
        # Both leases stay alive (and unused by other threads) for the call;
        # locks in a fixed order, so two crossing copies cannot deadlock.
        uses = [Buffer._Use(src)] + ([] if dst is src else [Buffer._Use(dst)])
        try:
            ordered = sorted(uses, key=lambda use: id(use.buffer))
            handles = {}
            for use in ordered:
                handles[id(use.buffer)] = use.__enter__()
            try:
                self._call(_lib.memd_copy, handles[id(src)], int(src_offset),
                           handles[id(dst)], int(dst_offset),
                           _capi.TO_END if length is None else int(length), byref(options),
                           byref(transfer))
            finally:
                for use in reversed(ordered):
                    use.buffer._lock.release()
        finally:
            for use in uses:
                use.buffer._release_view(False)
        return Transfer(transfer)

    # ---- The connection ----

    @property
    def socket_dir(self) -> str:
        return self._socket_dir

    @property
    def closed(self) -> bool:
        return self._session is None

    @property
    def session_id(self) -> int:
        """This connection's session id (0 when the daemon is unreachable)."""
        return _lib.memd_client_session_id(self._handle())

    def close(self) -> None:
        """Closes the connection; idempotent. Buffers and Transfers stay
        valid. A call still running on another thread finishes first: the
        session ends with it."""
        self._session = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        return f"<memd.Client socket_dir={self._socket_dir!r}{' closed' if self.closed else ''}>"


def connect(socket_dir: Optional[str] = None, *, call_timeout: Optional[float] = None,
            mapping_cache_bytes: Optional[int] = None,
            daemon_uid: Optional[int] = None,
            device_cache_bytes: Optional[int] = None) -> Client:
    return Client.connect(socket_dir, call_timeout=call_timeout,
                          mapping_cache_bytes=mapping_cache_bytes, daemon_uid=daemon_uid,
                          device_cache_bytes=device_cache_bytes)


connect.__doc__ = Client.connect.__doc__


class Transfer:
    """A copy the daemon runs (Client.copy).

    The daemon moves the bytes whether or not anyone waits; dropping this
    object leaves the copy running. The daemon forgets a session's transfers
    when the session ends. Thread-safe (calls take turns)."""

    def __init__(self, handle: _capi.TransferP) -> None:
        self._handle = handle
        self._lock = threading.Lock()
        self._id = _lib.memd_transfer_id(handle)

    @property
    def id(self) -> int:
        return self._id

    def wait(self, timeout: Optional[float] = None) -> None:
        """Waits until the copy ends (None: however long it takes) and returns
        None if it succeeded; raises how it ended otherwise: CancelledError,
        DeadlineExceededError (its deadline, a stall, or this wait's timeout,
        after which the copy goes on: progress().finished is False), or the
        driver's error."""
        wait_ms = -1 if timeout is None else _milliseconds(timeout, "timeout")
        with self._lock:
            _capi.call(_lib.memd_transfer_wait, self._handle, wait_ms)

    def progress(self) -> TransferProgress:
        """A TransferProgress: state, bytes done, path, error..."""
        with self._lock:
            return _records.progress(_capi.call_json(_lib.memd_transfer_progress_json,
                                                     self._handle))

    def cancel(self) -> None:
        """Stops at the next chunk boundary; wait() then raises
        CancelledError. Cancelling a finished copy changes nothing."""
        with self._lock:
            _capi.call(_lib.memd_transfer_cancel, self._handle)

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        lib = getattr(_capi, "lib", None)
        if handle is not None and lib is not None:
            self._handle = None
            lib.memd_transfer_free(handle)

    def __repr__(self) -> str:
        return f"<memd.Transfer id={self._id}>"
