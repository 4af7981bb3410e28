"""DLPack's structs through ctypes, written from the spec (dmlc/dlpack
dlpack.h 1.0) independently of the binding's C++ definitions."""

import ctypes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


# DLPack 1.0's layout, written from the spec independently of the binding's.
class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


READ_ONLY = 1 << 0
IS_COPIED = 1 << 1

get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
get_pointer.restype = ctypes.c_void_p
get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
get_name = ctypes.pythonapi.PyCapsule_GetName
get_name.restype = ctypes.c_char_p
get_name.argtypes = [ctypes.py_object]
set_name = ctypes.pythonapi.PyCapsule_SetName
set_name.restype = ctypes.c_int
set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
# A capsule keeps the pointer it is renamed with: these must live as long.
USED_LEGACY = ctypes.c_char_p(b"used_dltensor")
USED_VERSIONED = ctypes.c_char_p(b"used_dltensor_versioned")


def versioned(capsule) -> DLManagedTensorVersioned:
    assert get_name(capsule) == b"dltensor_versioned"
    return DLManagedTensorVersioned.from_address(get_pointer(capsule, b"dltensor_versioned"))


def legacy(capsule) -> DLManagedTensor:
    assert get_name(capsule) == b"dltensor"
    return DLManagedTensor.from_address(get_pointer(capsule, b"dltensor"))
