"""The C API through Python's ctypes: what any language with a C FFI does.

Usage: c_api_ctypes.py PATH/libmemd.so (a daemon on $MEMD_SOCKET_DIR).
Prints "ctypes: ok" after every check passed; an AssertionError otherwise.
"""
import ctypes
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

MEMD_OK, MEMD_NOT_FOUND, MEMD_ALREADY_EXISTS = 0, 5, 6


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


assert abi_version() >> 16 == 0, hex(abi_version())
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

missing = f"ctypes-{os.getpid()}/missing".encode()
code, message = call(open_, client, missing, None, ctypes.byref(c_buffer_p()))
assert code == MEMD_NOT_FOUND and missing.decode() in message, (code, message)

# No error object asked for: the code alone.
assert open_(client, missing, None, ctypes.byref(c_buffer_p()), None) == MEMD_NOT_FOUND

assert call(release, reader)[0] == MEMD_OK
assert call(release, writer)[0] == MEMD_OK
assert call(unlink, client, name)[0] == MEMD_OK
close(client)
print("ctypes: ok")
