"""The C API through Python's ctypes: what any language with a C FFI does.

Usage: c_api_ctypes.py PATH/libmemd.so (a daemon on $MEMD_SOCKET_DIR).
Prints "ctypes: ok" after every check passed; an AssertionError otherwise.
"""
import ctypes
import json
import os
import sys

lib = ctypes.CDLL(sys.argv[1])

c_client_p = ctypes.c_void_p
c_buffer_p = ctypes.c_void_p
c_error_p = ctypes.c_void_p


def declare(name, restype, *argtypes):
    function = getattr(lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


abi_version = declare("memd_abi_version", ctypes.c_uint32)
connect = declare("memd_connect", ctypes.c_int, ctypes.c_void_p,
                  ctypes.POINTER(c_client_p), ctypes.POINTER(c_error_p))
close = declare("memd_client_close", None, c_client_p)
create = declare("memd_create", ctypes.c_int, c_client_p, ctypes.c_char_p, ctypes.c_uint64,
                 ctypes.c_void_p, ctypes.POINTER(c_buffer_p), ctypes.POINTER(c_error_p))
open_ = declare("memd_open", ctypes.c_int, c_client_p, ctypes.c_char_p, ctypes.c_void_p,
                ctypes.POINTER(c_buffer_p), ctypes.POINTER(c_error_p))
unlink = declare("memd_unlink", ctypes.c_int, c_client_p, ctypes.c_char_p,
                 ctypes.POINTER(c_error_p))
seal = declare("memd_buffer_seal", ctypes.c_int, c_buffer_p, ctypes.POINTER(c_error_p))
release = declare("memd_buffer_release", ctypes.c_int, c_buffer_p, ctypes.POINTER(c_error_p))
mutable_data = declare("memd_buffer_mutable_data", ctypes.c_void_p, c_buffer_p)
data = declare("memd_buffer_data", ctypes.c_void_p, c_buffer_p)
size = declare("memd_buffer_size", ctypes.c_uint64, c_buffer_p)
error_code = declare("memd_error_code", ctypes.c_int, c_error_p)
error_message = declare("memd_error_message", ctypes.c_char_p, c_error_p)
error_free = declare("memd_error_free", None, c_error_p)
code_name = declare("memd_code_name", ctypes.c_char_p, ctypes.c_int)
string_free = declare("memd_string_free", None, ctypes.c_void_p)
session_id = declare("memd_client_session_id", ctypes.c_uint64, c_client_p)
socket_dir = declare("memd_client_socket_dir", ctypes.c_char_p, c_client_p)
ping = declare("memd_ping", ctypes.c_int, c_client_p, ctypes.POINTER(c_error_p))
lease_id = declare("memd_buffer_lease_id", ctypes.c_uint64, c_buffer_p)
json_out = ctypes.POINTER(ctypes.c_void_p)  # char**: freed with memd_string_free
stats_json = declare("memd_stats_json", ctypes.c_int, c_client_p, json_out,
                     ctypes.POINTER(c_error_p))
sessions_json = declare("memd_sessions_json", ctypes.c_int, c_client_p, json_out,
                        ctypes.POINTER(c_error_p))
usage_json = declare("memd_usage_json", ctypes.c_int, c_client_p, json_out,
                     ctypes.POINTER(c_error_p))
trim_json = declare("memd_trim_json", ctypes.c_int, c_client_p, ctypes.c_char_p, json_out,
                    ctypes.POINTER(c_error_p))
c_transfer_p = ctypes.c_void_p


class CopyOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("priority", ctypes.c_int),
                ("deadline_unix_ns", ctypes.c_int64), ("chunk_bytes", ctypes.c_uint64)]


copy_options_init = declare("memd_copy_options_init", None, ctypes.POINTER(CopyOptions))
copy = declare("memd_copy", ctypes.c_int, c_client_p, c_buffer_p, ctypes.c_uint64, c_buffer_p,
               ctypes.c_uint64, ctypes.c_uint64, ctypes.POINTER(CopyOptions),
               ctypes.POINTER(c_transfer_p), ctypes.POINTER(c_error_p))
transfer_id = declare("memd_transfer_id", ctypes.c_uint64, c_transfer_p)
transfer_wait = declare("memd_transfer_wait", ctypes.c_int, c_transfer_p, ctypes.c_int64,
                        ctypes.POINTER(c_error_p))
transfer_progress_json = declare("memd_transfer_progress_json", ctypes.c_int, c_transfer_p,
                                 json_out, ctypes.POINTER(c_error_p))
transfer_free = declare("memd_transfer_free", None, c_transfer_p)
MEMD_TO_END = 2**64 - 1


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


# DLPack 1.0's DLManagedTensorVersioned (memd.h declares it where dlpack.h is 0.6).
class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


on_delete_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DlpackOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("dtype", DLDataType), ("ndim", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("allow_read_only", ctypes.c_int),
                ("on_delete", on_delete_t), ("on_delete_context", ctypes.c_void_p),
                ("read_only", ctypes.c_int), ("scalar", ctypes.c_int)]


dlpack_options_init = declare("memd_dlpack_options_init", None, ctypes.POINTER(DlpackOptions))
to_dlpack_versioned = declare("memd_buffer_to_dlpack_versioned", ctypes.c_int, c_buffer_p,
                              ctypes.POINTER(DlpackOptions),
                              ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)),
                              ctypes.POINTER(c_error_p))

MEMD_OK, MEMD_INVALID_ARGUMENT, MEMD_NOT_FOUND, MEMD_ALREADY_EXISTS = 0, 3, 5, 6


def call(function, *args):
    """Calls a memd function that ends in memd_error**: (code, message)."""
    error = c_error_p()
    code = function(*args, ctypes.byref(error))
    if code == MEMD_OK:
        assert not error, "an error object on success"
        return code, ""
    assert error, f"{function.__name__}: code {code} without an error object"
    assert error_code(error) == code
    message = error_message(error).decode()
    error_free(error)
    return code, message


def report(function, *args):
    """Calls a memd function that hands out a JSON document: the parsed document."""
    text = ctypes.c_void_p()
    code, message = call(function, *args, ctypes.byref(text))
    assert code == MEMD_OK, (function.__name__, code, message)
    try:
        return json.loads(ctypes.string_at(text.value).decode())
    finally:
        string_free(text)


assert abi_version() == (0 << 16 | 4), hex(abi_version())
assert code_name(MEMD_NOT_FOUND) == b"NOT_FOUND"

client = c_client_p()
assert call(connect, None, ctypes.byref(client)) == (MEMD_OK, "")
name = f"ctypes-{os.getpid()}/frame".encode()
payload = bytes(range(256)) * 16

writer = c_buffer_p()
assert call(create, client, name, len(payload), None, ctypes.byref(writer))[0] == MEMD_OK
assert size(writer) == len(payload)
ctypes.memmove(mutable_data(writer), payload, len(payload))
assert call(seal, writer)[0] == MEMD_OK

code, message = call(create, client, name, 16, None, ctypes.byref(c_buffer_p()))
assert code == MEMD_ALREADY_EXISTS and name.decode() in message, (code, message)

reader = c_buffer_p()
assert call(open_, client, name, None, ctypes.byref(reader))[0] == MEMD_OK
assert mutable_data(reader) is None, "a read-only lease gave a writable pointer"
assert ctypes.string_at(data(reader), len(payload)) == payload

# DLPack 1.0 of the read lease: marked read-only, and the hook runs (here
# a Python function) when the consumer calls the deleter.
dlpack = DlpackOptions()
dlpack_options_init(ctypes.byref(dlpack))
assert dlpack.struct_size == ctypes.sizeof(DlpackOptions), dlpack.struct_size
assert (dlpack.dtype.code, dlpack.dtype.bits, dlpack.dtype.lanes) == (1, 8, 1)
deleted = []
dlpack.on_delete = on_delete_t(lambda context: deleted.append(context))
dlpack.on_delete_context = 1234
tensor = ctypes.POINTER(DLManagedTensorVersioned)()
assert call(to_dlpack_versioned, reader, ctypes.byref(dlpack),
            ctypes.byref(tensor)) == (MEMD_OK, "")
assert (tensor.contents.major, tensor.contents.minor) == (1, 0)
assert tensor.contents.flags == 1  # DLPACK_FLAG_BITMASK_READ_ONLY
assert tensor.contents.dl_tensor.data == data(reader) and tensor.contents.dl_tensor.ndim == 1
assert tensor.contents.dl_tensor.shape[0] == len(payload)
assert tensor.contents.dl_tensor.strides[0] == 1
assert deleted == []
ctypes.CFUNCTYPE(None, ctypes.c_void_p)(tensor.contents.deleter)(ctypes.addressof(tensor.contents))
assert deleted == [1234], deleted

missing = f"ctypes-{os.getpid()}/missing".encode()
code, message = call(open_, client, missing, None, ctypes.byref(c_buffer_p()))
assert code == MEMD_NOT_FOUND and missing.decode() in message, (code, message)

# No error object asked for: the code alone.
assert open_(client, missing, None, ctypes.byref(c_buffer_p()), None) == MEMD_NOT_FOUND

# The session, and the reports memctl prints with --json.
assert session_id(client) != 0
assert socket_dir(client).decode() == os.environ["MEMD_SOCKET_DIR"]
assert call(ping, client) == (MEMD_OK, "")
assert lease_id(writer) != 0 and lease_id(reader) not in (0, lease_id(writer))
stats = report(stats_json, client)
assert {"version", "backend", "socket_dir", "buffers", "sessions", "leases", "pools",
        "devices", "transfers", "durability"} <= stats.keys(), stats.keys()
assert stats["socket_dir"] == os.environ["MEMD_SOCKET_DIR"]
assert stats["buffers"] >= 1 and stats["leases"] >= 2, stats
assert "host" in [pool["location"] for pool in stats["pools"]], stats["pools"]
sessions = report(sessions_json, client)
mine = [s for s in sessions if s["pid"] == os.getpid()]
assert len(mine) == 1 and mine[0]["id"] == session_id(client), sessions
assert mine[0]["lease_count"] == 2 and mine[0]["uid"] == os.geteuid(), mine
usage = report(usage_json, client)
assert any(u["uid"] == os.geteuid() and u["location"] == "host" and
           u["buffers"] >= 1 and u["bytes"] >= len(payload) for u in usage), usage
trimmed = report(trim_json, client, b"host")
assert [t["location"] for t in trimmed] == ["host"] and trimmed[0]["released_bytes"] >= 0

# A copy the daemon runs, waited for, and its progress.
copied = c_buffer_p()
assert call(create, client, name + b".copy", len(payload), None,
            ctypes.byref(copied))[0] == MEMD_OK
options = CopyOptions()
copy_options_init(ctypes.byref(options))
assert options.struct_size == ctypes.sizeof(CopyOptions) and options.priority == 1
transfer = c_transfer_p()
assert call(copy, client, reader, 0, copied, 0, MEMD_TO_END, ctypes.byref(options),
            ctypes.byref(transfer)) == (MEMD_OK, "")
assert call(transfer_wait, transfer, -1) == (MEMD_OK, "")
progress = report(transfer_progress_json, transfer)
assert progress == {"id": transfer_id(transfer), "state": "done",
                    "bytes_done": len(payload), "bytes_total": len(payload),
                    "direction": "h2h", "path": "cpu", "device": -1, "retries": 0,
                    "error_code": 0, "error_message": "",
                    "elapsed_ns": progress["elapsed_ns"]}, progress
assert ctypes.string_at(data(copied), len(payload)) == payload
transfer_free(transfer)
options.struct_size = ctypes.sizeof(CopyOptions) + 8
code, message = call(copy, client, reader, 0, copied, 0, MEMD_TO_END, ctypes.byref(options),
                     ctypes.byref(c_transfer_p()))
assert code == MEMD_INVALID_ARGUMENT and "struct_size" in message, (code, message)
assert call(release, copied)[0] == MEMD_OK

assert call(release, reader)[0] == MEMD_OK
assert call(release, writer)[0] == MEMD_OK
assert call(unlink, client, name)[0] == MEMD_OK
close(client)
print("ctypes: ok")
