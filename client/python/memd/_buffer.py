"""memd.Buffer: a lease on a named buffer and its mapping, over libmemd's
memd_buffer (memd/_capi.py), with the buffer protocol from memd._native
and DLPack from libmemd (memd_buffer_to_dlpack*, wrapped by memd._native)."""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Dict, Optional, Tuple

from . import _arrays, _capi, _layout, _native, _records
from ._types import BufferInfo


class Buffer(_native.Exportable):
    """A lease on a named memd buffer, mapped into this process.

    Made by Client.create / open / open_or_create (never directly). Use it as
    a context manager, or call release(); a Buffer that is garbage-collected
    releases its lease too.

    Host buffers ("host", "pinned") support the buffer protocol, zero-copy:
    memoryview(buf), np.asarray(buf), buf.numpy(). Views are read-only for a
    read lease and once the buffer is sealed (its contents are final). Every
    buffer supports DLPack (__dlpack__, __dlpack_device__); CUDA device
    buffers also __cuda_array_interface__ (v3). buf.torch() is a zero-copy
    tensor, also of a sealed buffer (see its docstring for what a write does).

    release() with views alive (memoryviews, arrays made from the buffer,
    DLPack exports, torch tensors) marks the Buffer released at once but
    keeps the lease and the mapping until the last view dies:
    no view ever dangles. Beware np.frombuffer(buf): numpy lets go of the view at once and
    keeps only the Buffer object, so such an array is safe only while the
    Buffer is not released; np.asarray(buf) and buf.numpy() keep their view.

    Thread-safe in the sense that calls from several threads never corrupt
    it; their interleaving (a seal racing a write) is yours to order. Pickling
    a Buffer pickles its name: the unpickled object is a read-only lease
    opened by name (see memd.reopen).

    Errors: memd.Error subclasses for what the daemon refuses; ValueError
    once released; BufferError for exports it cannot make (and for seal()
    while writable views live).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("memd.Buffer objects come from Client.create, open and open_or_create")

    # Until set on an instance: the state of a fresh lease (a wrap right
    # after the RPC stays cheap: it sets only what differs).
    _handle: Optional[_capi.BufferP] = None  # None once the lease ended.
    _views = 0                      # Live views, calls in flight included.
    _writable_views = 0
    _released = False
    _sealing = False
    _info: Optional[BufferInfo] = None
    _facts: Optional["_Facts"] = None   # Read from libmemd on first use.
    _size: Optional[int] = None         # Kept when the lease ends unread.

    @classmethod
    def _wrap(cls, handle: _capi.BufferP, name: str, sealed: Optional[bool]) -> "Buffer":
        """A Buffer for a lease libmemd just granted on `name`; sealed: what
        the call implies (a read lease is of a sealed buffer), None when it
        does not say."""
        self = cls.__new__(cls)
        self._handle = handle                # None once the lease ended.
        # Guards the counters and flags, and the lease across the calls that
        # use it (seal, info, copy, release: memd_buffer is for one thread at
        # a time). Never held while waiting for anything else.
        self._lock = threading.Lock()
        self._name = name
        self._sealed = sealed
        return self

    def __del__(self) -> None:
        # Views hold a reference to this object, so none is alive here.
        handle = self._handle
        lib = getattr(_capi, "lib", None)  # At exit the module may be gone first.
        if handle is not None and lib is not None:
            self._handle = None
            lib.memd_buffer_release(handle, None)

    def _known(self) -> "_Facts":
        facts = self._facts
        if facts is None:
            with self._lock:
                if self._facts is None:
                    if self._handle is None:
                        raise ValueError(f"buffer {self._name!r} is released")
                    self._facts = _Facts(self._handle)
                facts = self._facts
        return facts

    # ---- What the lease says ----

    @property
    def name(self) -> str:
        return self._name

    @property
    def size(self) -> int:
        """Bytes, as created."""
        size = self._size
        return size if size is not None else self._known().size

    @property
    def location(self) -> str:
        """"host", "pinned" or "device:N"."""
        return self.info.location

    @property
    def writable(self) -> bool:
        """Whether this is a read-write lease (from create, or
        open(writable=True) of a buffer being written)."""
        return self._known().writable

    @property
    def readonly(self) -> bool:
        """Whether views of it are read-only now: a read lease, or a sealed
        buffer (or one being sealed)."""
        return not self._known().writable or self.sealed or self._sealing

    @property
    def sealed(self) -> bool:
        sealed = self._sealed
        if sealed is None:
            sealed = self._sealed = self.info.state == "sealed"
        return sealed

    @property
    def released(self) -> bool:
        return self._released

    @property
    def created(self) -> bool:
        """open_or_create: whether this call created the buffer."""
        return self._known().created

    @property
    def lease_id(self) -> int:
        return self._known().lease_id

    @property
    def attrs(self) -> Dict[str, str]:
        """The attributes given at create (a new dict each time)."""
        return dict(self.info.attrs)

    @property
    def info(self) -> BufferInfo:
        """BufferInfo as of the call that granted the lease (or seal());
        Client.stat() is fresh."""
        info = self._info
        if info is None:
            with self._lock:
                if self._info is None and self._handle is not None:
                    self._info = _records.buffer_info(
                        _capi.lib.memd_buffer_get_info(self._handle).contents,
                        _capi.text(_capi.lib.memd_buffer_placement(self._handle)),
                        _capi.text(_capi.lib.memd_buffer_retention(self._handle)),
                        _capi.lib.memd_buffer_numa_node(self._handle))
                info = self._info
        if info is None:
            raise ValueError(f"buffer {self._name!r} is released")
        return info

    @property
    def device(self) -> int:
        """This process's CUDA (or Level Zero) ordinal of a device buffer's
        GPU, -1 for host memory."""
        return self._known().device

    @property
    def device_pointer(self) -> int:
        """A device buffer's address in this process's GPU address space
        (a CUdeviceptr), 0 for host memory."""
        facts = self._known()
        return facts.address if facts.device_type != _capi.DL_CPU else 0

    @property
    def is_device(self) -> bool:
        return self._known().device_type != _capi.DL_CPU

    # ---- Views: what keeps the lease ----

    def _check_usable(self) -> None:
        if self._released:
            raise ValueError(f"buffer {self._name!r} is released")

    def _begin_view(self, writable: bool) -> None:
        with self._lock:
            self._views += 1
            if writable:
                self._writable_views += 1

    def _release_view(self, writable: bool) -> None:
        """A view was let go (buffer protocol, DLPack deleter, a call that
        used the lease). The last one after release() ends the lease; its
        errors are dropped, as __del__ drops them."""
        with self._lock:
            self._views -= 1
            if writable:
                self._writable_views -= 1
            end = self._views == 0 and self._released
        if end:
            try:
                self._end_lease()
            except Exception:  # noqa: BLE001  (nobody to tell)
                pass

    def _get_view(self, want_writable: bool) -> Tuple[int, int, bool]:
        """The buffer protocol (memd._native.Exportable)."""
        self._check_usable()
        if self.is_device:
            raise BufferError(
                f"buffer {self._name!r} is GPU memory ({self.location}): it has no host bytes "
                "for the buffer protocol; use DLPack (torch.from_dlpack(buf)), buf.torch() or "
                "__cuda_array_interface__")
        readonly = self.readonly
        if readonly and want_writable:
            raise BufferError(f"buffer {self._name!r} is read-only here (" +
                              ("sealed: its contents are final" if self.writable
                               else "a read lease") + ")")
        facts = self._known()
        self._begin_view(not readonly)
        return facts.address, facts.size, readonly

    class _Use:
        """A call that uses the lease counts as a read-only view, so that a
        release() meanwhile waits for it instead of ending the lease under
        it."""

        def __init__(self, buffer: "Buffer") -> None:
            buffer._check_usable()
            buffer._begin_view(False)
            self.buffer = buffer

        def __enter__(self) -> _capi.BufferP:
            self.buffer._lock.acquire()
            return self.buffer._handle

        def __exit__(self, *exc: Any) -> None:
            self.buffer._lock.release()
            self.buffer._release_view(False)

    def _take_handle(self) -> Optional[_capi.BufferP]:
        """The lease's handle, taken for ending it (with _lock held and no
        view alive, so no call is using it)."""
        handle, self._handle = self._handle, None
        if handle is not None and self._facts is None:
            self._size = _capi.lib.memd_buffer_size(handle)  # size stays readable.
        return handle

    def _end_lease(self) -> None:
        with self._lock:
            handle = self._take_handle()
        if handle is not None:
            _capi.call(_capi.lib.memd_buffer_release, handle)

    # ---- Calls ----

    def sync(self) -> BufferInfo:
        """Publishes what this writer wrote to the buffer's other copies:
        this lease's copy becomes the buffer's new generation, the others are
        refreshed now or when next opened. Returns the buffer's BufferInfo.
        FailedPreconditionError for a read lease, or a sealed buffer."""
        with Buffer._Use(self) as handle:
            return _records.call_info(_capi.lib.memd_buffer_sync, handle)

    def seal(self) -> None:
        """Makes the contents final and wakes waiting readers. BufferError
        while writable views (memoryviews, arrays, DLPack exports) are alive;
        FailedPreconditionError for a read lease or a second seal."""
        self._check_usable()
        with self._lock:
            writable_views = self._writable_views
            if writable_views == 0:
                self._sealing = True  # Views handed out meanwhile are read-only.
        if writable_views > 0:
            raise BufferError(
                f"buffer {self._name!r} has {writable_views} writable view(s) alive "
                "(memoryview, numpy array, DLPack export): let them go (del, "
                "memoryview.release()) before seal(), which makes the contents final")
        try:
            with Buffer._Use(self) as handle:
                _capi.call(_capi.lib.memd_buffer_seal, handle)
                self._sealed = True
                self._info = None  # Seal rewrote it.
        finally:
            self._sealing = False

    def write_from_file(self, file: Any, file_offset: int = 0, length: Optional[int] = None,
                        offset: int = 0, threads: int = 0) -> None:
        """Copies `length` bytes (None: the rest of the file) of `file` (an
        open file object or a descriptor; a regular file) from `file_offset`
        into the buffer at `offset`, on a writable lease before the seal: the
        fast way to load a file into a buffer; the file's position does not
        move. A host or pinned buffer (created or opened with
        keep_descriptor=True) is written through its descriptor (sendfile on
        `threads` threads; 0: one per CPU, at most 8): no page of the mapping
        faults. A device buffer is filled through pinned staging that libmemd
        creates and releases (counted against this user's quotas): `threads`
        threads read the file while memd copies what they read to the GPU,
        as `memctl put` does. The GIL is released meanwhile. Raises
        FailedPreconditionError (read lease, sealed, no kept descriptor for
        host memory), InvalidArgumentError (past the end: the numbers; a
        pipe), OutOfRangeError (the file ends first)."""
        import os
        fd = file if isinstance(file, int) else file.fileno()
        if length is None:
            length = os.fstat(fd).st_size - int(file_offset)
        if min(int(file_offset), int(length), int(offset), int(threads)) < 0:
            raise _capi.error_for_code(
                3, f"file_offset {file_offset}, length {length}, offset {offset} and threads "
                f"{threads} are at least 0")
        self._check_usable()
        with Buffer._Use(self) as handle:
            _capi.call(_capi.lib.memd_buffer_write_from_file, handle, fd, int(file_offset),
                       int(length), int(offset), int(threads))

    def release(self) -> None:
        """Ends the lease; idempotent. With views alive, the lease and mapping
        end with the last view (the Buffer counts as released at once).
        Afterwards name and size stay readable, and whatever else was read
        before; the rest raises ValueError."""
        with self._lock:
            if self._released:
                return
            self._released = True
            handle = None if self._views else self._take_handle()
        if handle is not None:
            _capi.call(_capi.lib.memd_buffer_release, handle)

    close = release

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.release()
        return False

    def __repr__(self) -> str:
        facts = self._facts
        if facts is None and not self._released:
            facts = self._known()
        if facts is None:
            return f"<memd.Buffer {self._name!r} released>"
        location = self._info.location if self._info else (
            "host" if facts.device_type == _capi.DL_CPU else f"GPU {facts.device}")
        return (f"<memd.Buffer {self._name!r} {facts.size} bytes {location}"
                f"{' read-write' if facts.writable else ' read-only'}"
                f"{' sealed' if self._sealed else ''}{' released' if self._released else ''}>")

    def __reduce__(self) -> Any:
        from . import _pickle
        return (_pickle.reopen, (self._name, self.info.owner_uid))

    # ---- Arrays: DLPack, __cuda_array_interface__, numpy(), torch() ----

    def __dlpack_device__(self) -> Tuple[int, int]:
        """(kDLCPU=1, 0) for host memory, (kDLCUDA=2, device) for CUDA GPU
        memory, (kDLOneAPI=14, device) for Level Zero GPU memory."""
        facts = self._known()
        if facts.device_type == _capi.DL_CPU:
            return (_capi.DL_CPU, 0)
        return (facts.device_type, facts.device)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: Any = None) -> Any:
        """The buffer as a DLPack capsule, zero-copy (array API python_spec).

        Without max_version (numpy 1.24, torch 1.13): a legacy "dltensor"
        capsule, refused with BufferError for read-only memory (a read lease
        or a sealed buffer), which a legacy capsule cannot mark read-only.
        max_version >= (1, 0): a "dltensor_versioned" capsule, with
        DLPACK_FLAG_BITMASK_READ_ONLY set for read-only memory. dtype and
        shape come from the buffer's attributes (uint8, one dimension,
        otherwise). copy=True and a dl_device other than __dlpack_device__()
        raise BufferError (memd never copies). stream: None for host memory;
        for GPU memory the consumer's stream is accepted and nothing is
        synchronised, because memd memory has no work pending on this
        process's streams (a daemon copy is complete once its Transfer.wait()
        returns)."""
        return self._dlpack(stream=stream, max_version=max_version, dl_device=dl_device,
                            copy=copy)

    def _dlpack(self, dtype: Any = None, shape: Any = None, max_version: Any = None, *,
                stream: Any = None, dl_device: Any = None, copy: Any = None,
                allow_read_only: bool = False) -> Any:
        """__dlpack__ with an explicit dtype and shape (memd._arrays);
        allow_read_only: a legacy capsule of read-only memory, for a consumer
        that cannot take a versioned one and has been told not to write."""
        self._check_usable()
        name = self._name
        if copy:
            raise BufferError(f"buffer {name!r}: memd exports its shared memory itself and "
                              "never a copy (copy=True); copy on the consumer's side")
        own = self.__dlpack_device__()
        if dl_device is not None and tuple(_pair(dl_device, "dl_device")) != own:
            raise BufferError(f"buffer {name!r} lives on DLPack device {own}; exporting to "
                              f"{dl_device} would need a copy")
        if not self.is_device and stream is not None:
            raise BufferError(f"buffer {name!r} is host memory: stream must be None")
        versioned = max_version is not None and _pair(max_version, "max_version")[0] >= 1
        readonly = self.readonly
        if readonly and not versioned and not allow_read_only:
            raise BufferError(
                f"buffer {name!r} is read-only ("
                f"{'sealed' if self.writable else 'a read lease'}), and a legacy DLPack "
                "capsule cannot say so: its consumer could write through it. Use "
                "np.asarray(buf), memoryview(buf) or buf.numpy(), buf.torch(), or pass "
                "max_version=(1, 0) for a read-only versioned capsule")
        layout = _layout.resolve(self.attrs, self.size, dtype, shape)
        options = _capi.DlpackOptions(
            struct_size=ctypes.sizeof(_capi.DlpackOptions),
            dtype=_capi.DLDataType(layout.dtype.dl_code, layout.dtype.bits, 1),
            ndim=len(layout.shape), shape=(ctypes.c_int64 * len(layout.shape))(*layout.shape),
            allow_read_only=int(allow_read_only), read_only=int(readonly),
            scalar=int(not layout.shape))
        export = (_capi.lib.memd_buffer_to_dlpack_versioned if versioned
                  else _capi.lib.memd_buffer_to_dlpack)
        self._begin_view(not readonly)
        try:
            options.on_delete, options.on_delete_context = _native.view_context(self, not readonly)
        except BaseException:
            self._release_view(not readonly)
            raise
        # From here the context holds the view: libmemd's tensor ends it through
        # the hook when its deleter runs, drop_context when there is no tensor.
        tensor = ctypes.c_void_p()
        error = _capi.ErrorP()
        with self._lock:  # memd_buffer is for one thread at a time.
            handle = self._handle
            code = -1 if handle is None else export(handle, ctypes.byref(options),
                                                    ctypes.byref(tensor), ctypes.byref(error))
        if code != 0:
            _native.drop_context(options.on_delete_context)
            if handle is None:
                raise ValueError(f"buffer {name!r} is released")
            _capi.raise_error(error)
        return _native.capsule(tensor.value, versioned)

    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]:
        """CUDA device buffers only (AttributeError otherwise): version 3,
        shape and typestr from the attributes, data (pointer, readonly). It
        carries no owner: keep the Buffer alive while the consumer uses it
        (DLPack is safer)."""
        if not self.is_device:
            raise AttributeError(f"buffer {self._name!r} is host memory: it has no "
                                 "__cuda_array_interface__ (use the buffer protocol or DLPack)")
        if self._known().device_type != _capi.DL_CUDA:
            raise AttributeError(f"buffer {self._name!r} is Level Zero GPU memory: it has no "
                                 "__cuda_array_interface__ (use DLPack: kDLOneAPI)")
        self._check_usable()
        layout = _layout.resolve(self.attrs, self.size)
        if layout.dtype.typestr is None:
            raise ValueError(f"buffer {self._name!r}: dtype {layout.dtype.name} has no "
                             "__cuda_array_interface__ typestr; use DLPack")
        # stream None: no synchronisation needed (memd memory has no pending
        # work on a stream of this process).
        return {"shape": tuple(layout.shape), "typestr": layout.dtype.typestr,
                "data": (self._known().address, self.readonly), "version": 3, "strides": None,
                "stream": None}

    def numpy(self, dtype: Any = None, shape: Any = None) -> Any:
        """A zero-copy numpy array over a host buffer.

        dtype/shape default to the buffer's attributes ("dtype", "shape"),
        else uint8 over every byte; an explicit dtype without a shape reads
        the whole buffer in one dimension. ValueError when the shape needs
        more bytes than the buffer has or the attributes are malformed.
        Read-only (not writeable) for read-only memory. The array keeps a
        view, so the mapping outlives release()."""
        return _arrays.numpy(self, dtype, shape)

    def torch(self, dtype: Any = None, shape: Any = None, *, copy: bool = False) -> Any:
        """A torch tensor over the buffer, zero-copy (ImportError without
        torch). dtype/shape as numpy().

        Read-only memory (a sealed buffer, a read lease) is shared zero-copy
        too: that is how model weights are shared. torch has no read-only
        tensors, so nothing stops a write through it, and the write does not
        reach the buffer: memd maps read-only memory read-only, so on a GPU
        the write faults this process's CUDA context (later CUDA calls in this
        process fail) and in host memory it is a SIGSEGV that kills this
        process. Other processes' data is never changed. Take copy=True for a
        private writable copy (host or device)."""
        return _arrays.torch(self, dtype, shape, copy)


class _Facts:
    """What libmemd knows of a lease without asking the daemon; stable while
    the lease lives (read under Buffer._lock, with the handle alive)."""

    __slots__ = ("size", "writable", "created", "lease_id", "device_type", "device", "address")

    def __init__(self, handle: _capi.BufferP) -> None:
        lib = _capi.lib
        self.size = lib.memd_buffer_size(handle)
        self.writable = bool(lib.memd_buffer_writable(handle))
        self.created = bool(lib.memd_buffer_created(handle))
        self.lease_id = lib.memd_buffer_lease_id(handle)
        self.device_type = lib.memd_buffer_device_type(handle)
        if self.device_type == _capi.DL_CPU:
            self.device = -1
            self.address = (lib.memd_buffer_mutable_data(handle) if self.writable
                            else lib.memd_buffer_data(handle)) or 0
        else:
            self.device = lib.memd_buffer_device(handle)
            self.address = lib.memd_buffer_device_pointer(handle)


def _pair(value: Any, what: str) -> Tuple[int, int]:
    if not isinstance(value, tuple) or len(value) != 2:
        raise TypeError(f"{what} must be a tuple of two ints")
    return int(value[0]), int(value[1])
