"""libmemd's C API (memd.h) through ctypes: the library, its structs, its
calls, and errors turned into memd.Error subclasses.

Binding the C API instead of compiling against one CPython is what lets one
package serve every Python >= 3.9. ctypes lets go of the GIL around every
call into libmemd, so waits (open with a timeout, Transfer.wait) never hold
up other threads.

Where libmemd comes from, first found wins:
  1. $MEMD_LIBRARY (a path), for tests and unusual installs;
  2. the package's own .libs/ (a wheel carries libmemd and what it needs
     there, with $ORIGIN run paths: no LD_LIBRARY_PATH);
  3. the path the build recorded in _build.py (the build tree, or where
     `cmake --install` put libmemd);
  4. the soname, through the dynamic linker's usual search.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
from ctypes import (POINTER, Structure, byref, c_char_p, c_int, c_int32, c_int64, c_size_t,
                    c_uint32, c_uint64, c_void_p)
from typing import Any, List, Optional

from . import _build
from ._errors import InvalidArgumentError, error_for_code

# The C API this package is written against: the same major, at least this
# minor (memd.h's MEMD_ABI_VERSION). 0.4: memd_buffer_to_dlpack_versioned.
ABI_MAJOR, ABI_MINOR = 0, 4


class Error_(Structure):
    """memd_error: opaque."""


class Client_(Structure):
    """memd_client: opaque."""


class Buffer_(Structure):
    """memd_buffer: opaque."""


class Transfer_(Structure):
    """memd_transfer: opaque."""


# memd_list_json_flags' flags (memd.h).
MEMD_LIST_UNLINKED = 1

ErrorP = POINTER(Error_)
ClientP = POINTER(Client_)
BufferP = POINTER(Buffer_)
TransferP = POINTER(Transfer_)


class Attr(Structure):
    _fields_ = [("key", c_char_p), ("value", c_char_p)]


class ConnectOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("socket_dir", c_char_p),
                ("call_timeout_ms", c_int64), ("mapping_cache_bytes", c_uint64),
                ("daemon_uid", c_int64), ("device_cache_bytes", c_uint64)]


class CreateOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("location", c_char_p), ("mode", c_uint32),
                ("ephemeral", c_int), ("populate", c_int), ("attrs", POINTER(Attr)),
                ("attr_count", c_size_t), ("existing_owner", c_int64),
                ("access_hint", c_char_p), ("mappable_locations", POINTER(c_char_p)),
                ("mappable_location_count", c_size_t), ("retention", c_char_p),
                ("wait_for_memory_ms", c_int64), ("numa", c_char_p),
                ("keep_descriptor", c_int)]


class OpenOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("writable", c_int), ("wait_ms", c_int64),
                ("populate", c_int), ("owner", c_int64), ("location", c_char_p),
                ("wait_for_memory_ms", c_int64), ("keep_descriptor", c_int)]


class PrefetchOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("wait_ms", c_int64),
                ("wait_for_memory_ms", c_int64), ("owner", c_int64)]


class Replica(Structure):
    _fields_ = [("location", c_char_p), ("state", c_char_p), ("generation", c_uint64),
                ("readers", c_uint32), ("writers", c_uint32), ("bytes", c_uint64),
                ("charged_uid", c_uint32)]


class BufferInfo(Structure):
    _fields_ = [("struct_size", c_size_t), ("name", c_char_p), ("id", c_uint64),
                ("size", c_uint64), ("location", c_char_p), ("owner_uid", c_uint32),
                ("owner_gid", c_uint32), ("mode", c_uint32), ("sealed", c_int),
                ("ephemeral", c_int), ("unlinked", c_int), ("lease_count", c_uint32),
                ("creator_pid", c_int32), ("created_unix_ns", c_int64),
                ("sealed_unix_ns", c_int64), ("attrs", POINTER(Attr)),
                ("attr_count", c_size_t), ("sync_state", c_char_p), ("generation", c_uint64),
                ("fill_failure", c_char_p), ("replicas", POINTER(Replica)),
                ("replica_count", c_size_t)]


class BufferList(Structure):
    _fields_ = [("count", c_size_t), ("items", POINTER(BufferInfo))]


OPEN_OPTIONS_SIZE = ctypes.sizeof(OpenOptions)
PREFETCH_OPTIONS_SIZE = ctypes.sizeof(PrefetchOptions)


class CopyOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("priority", c_int),
                ("deadline_unix_ns", c_int64), ("chunk_bytes", c_uint64)]


class DLDataType(Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DlpackOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("dtype", DLDataType), ("ndim", c_int32),
                ("shape", POINTER(c_int64)), ("allow_read_only", c_int),
                ("on_delete", c_void_p), ("on_delete_context", c_void_p),
                ("read_only", c_int), ("scalar", c_int)]


PRIORITIES = {"critical": 0, "normal": 1, "background": 2}
TO_END = 2**64 - 1  # MEMD_TO_END

# DLPack device types memd_buffer_device_type returns.
DL_CPU, DL_CUDA, DL_ONEAPI = 1, 2, 14

_E = POINTER(ErrorP)  # memd_error** error, last argument of every call that can fail

# name: (restype, argtypes)
_SIGNATURES = {
    "memd_abi_version": (c_uint32, []),
    "memd_version_string": (c_char_p, []),
    "memd_error_code": (c_int, [ErrorP]),
    "memd_error_message": (c_char_p, [ErrorP]),
    "memd_error_free": (None, [ErrorP]),
    "memd_string_free": (None, [c_void_p]),
    "memd_connect": (c_int, [POINTER(ConnectOptions), POINTER(ClientP), _E]),
    "memd_client_close": (None, [ClientP]),
    "memd_client_session_id": (c_uint64, [ClientP]),
    "memd_client_socket_dir": (c_char_p, [ClientP]),
    "memd_ping": (c_int, [ClientP, _E]),
    "memd_create": (c_int, [ClientP, c_char_p, c_uint64, POINTER(CreateOptions),
                            POINTER(BufferP), _E]),
    "memd_open": (c_int, [ClientP, c_char_p, POINTER(OpenOptions), POINTER(BufferP), _E]),
    "memd_open_or_create": (c_int, [ClientP, c_char_p, c_uint64, POINTER(CreateOptions),
                                    c_int64, POINTER(BufferP), _E]),
    "memd_unlink": (c_int, [ClientP, c_char_p, _E]),
    "memd_buffer_seal": (c_int, [BufferP, _E]),
    "memd_buffer_write_from_file": (c_int, [BufferP, c_int, c_uint64, c_uint64, c_uint64, c_int,
                                            _E]),
    "memd_buffer_release": (c_int, [BufferP, _E]),
    "memd_buffer_data": (c_void_p, [BufferP]),
    "memd_buffer_mutable_data": (c_void_p, [BufferP]),
    "memd_buffer_size": (c_uint64, [BufferP]),
    "memd_buffer_device_pointer": (c_uint64, [BufferP]),
    "memd_buffer_device": (c_int, [BufferP]),
    "memd_buffer_device_type": (c_int, [BufferP]),
    "memd_buffer_writable": (c_int, [BufferP]),
    "memd_buffer_created": (c_int, [BufferP]),
    "memd_buffer_lease_id": (c_uint64, [BufferP]),
    "memd_buffer_get_info": (POINTER(BufferInfo), [BufferP]),
    "memd_buffer_placement": (c_char_p, [BufferP]),
    "memd_buffer_retention": (c_char_p, [BufferP]),
    "memd_buffer_numa_node": (c_int, [BufferP]),
    # The tensor as an address: memd._native wraps it in a capsule.
    "memd_buffer_to_dlpack": (c_int, [BufferP, POINTER(DlpackOptions), POINTER(c_void_p), _E]),
    "memd_buffer_to_dlpack_versioned": (c_int, [BufferP, POINTER(DlpackOptions),
                                                POINTER(c_void_p), _E]),
    "memd_stat_json": (c_int, [ClientP, c_char_p, POINTER(c_void_p), _E]),
    "memd_list_json": (c_int, [ClientP, c_char_p, POINTER(c_void_p), _E]),
    "memd_list_json_flags": (c_int, [ClientP, c_char_p, c_uint32, POINTER(c_void_p), _E]),
    "memd_stat": (c_int, [ClientP, c_char_p, POINTER(POINTER(BufferInfo)), _E]),
    "memd_buffer_info_free": (None, [POINTER(BufferInfo)]),
    "memd_prefetch": (c_int, [ClientP, c_char_p, c_char_p, c_int64,
                              POINTER(POINTER(BufferInfo)), _E]),
    "memd_prefetch_with": (c_int, [ClientP, c_char_p, c_char_p, POINTER(PrefetchOptions),
                                   POINTER(POINTER(BufferInfo)), _E]),
    "memd_drop_replica": (c_int, [ClientP, c_char_p, c_char_p, POINTER(POINTER(BufferInfo)),
                                  _E]),
    "memd_buffer_sync": (c_int, [BufferP, POINTER(POINTER(BufferInfo)), _E]),
    "memd_list": (c_int, [ClientP, c_char_p, POINTER(POINTER(BufferList)), _E]),
    "memd_buffer_list_free": (None, [POINTER(BufferList)]),
    "memd_stats_json": (c_int, [ClientP, POINTER(c_void_p), _E]),
    "memd_sessions_json": (c_int, [ClientP, POINTER(c_void_p), _E]),
    "memd_transfers_json": (c_int, [ClientP, POINTER(c_void_p), _E]),
    "memd_usage_json": (c_int, [ClientP, POINTER(c_void_p), _E]),
    "memd_trim_json": (c_int, [ClientP, c_char_p, POINTER(c_void_p), _E]),
    "memd_advise_json": (c_int, [ClientP, c_char_p, POINTER(c_void_p), _E]),
    "memd_leaks_json": (c_int, [ClientP, c_uint64, c_uint64, POINTER(c_void_p), _E]),
    "memd_cuda_device": (c_int, [ClientP, c_char_p, POINTER(c_int), _E]),
    "memd_device_location": (c_int, [ClientP, c_int, POINTER(c_void_p), _E]),
    "memd_copy": (c_int, [ClientP, BufferP, c_uint64, BufferP, c_uint64, c_uint64,
                          POINTER(CopyOptions), POINTER(TransferP), _E]),
    "memd_transfer_id": (c_uint64, [TransferP]),
    "memd_transfer_wait": (c_int, [TransferP, c_int64, _E]),
    "memd_transfer_progress_json": (c_int, [TransferP, POINTER(c_void_p), _E]),
    "memd_transfer_cancel": (c_int, [TransferP, _E]),
    "memd_transfer_free": (None, [TransferP]),
}


def _candidates() -> List[str]:
    found = []
    explicit = os.environ.get("MEMD_LIBRARY")
    if explicit:
        found.append(explicit)
    here = os.path.dirname(os.path.abspath(__file__))
    found.extend(sorted(glob.glob(os.path.join(here, ".libs", "libmemd.so.*"))))
    if _build.LIBRARY:  # Relative: to this package (an install under one prefix).
        found.append(os.path.normpath(os.path.join(here, _build.LIBRARY)))
    found.append(_build.SONAME)
    return found


def _load() -> ctypes.CDLL:
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path}: no such file")
            continue
        try:
            library = ctypes.CDLL(path)
        except OSError as error:
            tried.append(str(error))
            continue
        version = library.memd_abi_version()
        major, minor = version >> 16, version & 0xFFFF
        if major != ABI_MAJOR or minor < ABI_MINOR:
            tried.append(f"{path}: C API {major}.{minor}, this package needs "
                         f"{ABI_MAJOR}.{ABI_MINOR} or a later 0.x")
            continue
        missing = [name for name in _SIGNATURES if not hasattr(library, name)]
        if missing:  # A 0.4 built before the call existed.
            tried.append(f"{path}: lacks {', '.join(missing)}")
            continue
        for name, (restype, argtypes) in _SIGNATURES.items():
            function = getattr(library, name)
            function.restype = restype
            function.argtypes = argtypes
        return library
    raise ImportError("memd: cannot load libmemd, the client library this package binds; "
                      "tried:\n  " + "\n  ".join(tried) +
                      "\nInstall memd's wheel (it carries libmemd), or set MEMD_LIBRARY to "
                      "libmemd.so's path.")


lib = _load()
library_path: str = lib._name


def raise_error(error: Any) -> None:
    """Raises the memd.Error for a memd_error* and frees it."""
    code = lib.memd_error_code(error)
    message = lib.memd_error_message(error).decode("utf-8", "replace")
    lib.memd_error_free(error)
    raise error_for_code(code, message)


def call(function: Any, *args: Any) -> None:
    """Calls a libmemd function whose last argument is memd_error**; raises
    its error."""
    error = ErrorP()
    if function(*args, byref(error)) != 0:
        raise_error(error)


def take_string(pointer: c_void_p) -> str:
    """A library-allocated string, freed."""
    try:
        return ctypes.string_at(pointer.value).decode("utf-8", "replace")
    finally:
        lib.memd_string_free(pointer)


def call_json(function: Any, *args: Any) -> Any:
    """Calls a libmemd function that returns a JSON document (char**)."""
    text = c_void_p()
    call(function, *args, byref(text))
    return json.loads(take_string(text))


def text(value: Optional[bytes]) -> str:
    return "" if value is None else value.decode("utf-8", "replace")


def attrs_of(info: BufferInfo) -> dict:
    return {text(info.attrs[i].key): text(info.attrs[i].value) for i in range(info.attr_count)}


def encode(value: str, what: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:  # C would see only the text before it.
        raise InvalidArgumentError(f"{what} {value!r} contains a NUL character")
    return value.encode("utf-8", "surrogateescape")
