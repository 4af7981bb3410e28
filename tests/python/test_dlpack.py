"""DLPack export: legacy and versioned capsules, the read-only rules, the
argument checks, and the deleter's contract (any thread, keeps the mapping)."""

import ctypes
import threading

import numpy as np
import pytest

import memd
from conftest import address_of, is_mapped
from dlpack_ctypes import (READ_ONLY, IS_COPIED, USED_VERSIONED, DLManagedTensorVersioned,
                          get_name, get_pointer, legacy, set_name, versioned)


@pytest.fixture
def sealed(client, name):
    """A sealed 4x8 float32 buffer holding 0..31, and its name."""
    with client.create_array(name, (4, 8), "float32") as buf:
        buf.numpy()[...] = np.arange(32, dtype=np.float32).reshape(4, 8)
        buf.seal()
    yield name


def test_dlpack_device_of_host_memory(client, name):
    with client.create(name, 64) as buf:
        assert buf.__dlpack_device__() == (1, 0)


def test_read_lease_refuses_a_legacy_capsule(client, sealed):
    with client.open(sealed) as reader:
        with pytest.raises(BufferError, match="max_version=\\(1, 0\\)") as caught:
            reader.__dlpack__()
        assert "np.asarray" in str(caught.value)
        with pytest.raises(BufferError):
            reader.__dlpack__(max_version=(0, 8))
        _numpy_import_of_read_only_memory(reader)


def _numpy_import_of_read_only_memory(reader):
    """numpy 1.x asks for a legacy capsule: refused. numpy 2 asks with
    max_version=(1, 0) and takes the read-only capsule: a read-only,
    zero-copy array."""
    if int(np.__version__.split(".")[0]) < 2:
        with pytest.raises(BufferError):
            np.from_dlpack(reader)
        return
    array = np.from_dlpack(reader)
    assert not array.flags.writeable
    assert array.__array_interface__["data"][0] == address_of(reader)


def test_read_lease_exports_a_read_only_versioned_capsule(client, sealed):
    with client.open(sealed) as reader:
        capsule = reader.__dlpack__(max_version=(1, 0))
        managed = versioned(capsule)
        assert (managed.version.major, managed.version.minor) == (1, 0)
        assert managed.flags & READ_ONLY and not managed.flags & IS_COPIED
        tensor = managed.dl_tensor
        assert tensor.data == address_of(reader)
        assert (tensor.device.device_type, tensor.device.device_id) == (1, 0)
        assert tensor.ndim == 2 and [tensor.shape[i] for i in range(2)] == [4, 8]
        assert [tensor.strides[i] for i in range(2)] == [8, 1]
        assert (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (2, 32, 1)
        assert tensor.byte_offset == 0
        # A newer minor version or major is answered with 1.0.
        assert versioned(reader.__dlpack__(max_version=(1, 7))).version.major == 1
        del capsule, managed, tensor


def test_writable_lease_versioned_capsule_is_not_read_only(client, name):
    with client.create(name, 64) as buf:
        capsule = buf.__dlpack__(max_version=(1, 0))
        tensor = versioned(capsule)
        assert tensor.flags == 0
        assert tensor.dl_tensor.ndim == 1 and tensor.dl_tensor.shape[0] == 64
        assert (tensor.dl_tensor.dtype.code, tensor.dl_tensor.dtype.bits) == (1, 8)
        # The export is a writable view: no seal while it lives.
        with pytest.raises(BufferError, match="writable view"):
            buf.seal()
        del capsule, tensor
        buf.seal()


def test_sealed_buffer_exports_read_only_through_its_writable_lease(client, name):
    # The lease is still read-write in libmemd; the seal made the contents
    # final, and the export says so (memd_dlpack_options.read_only).
    with client.create(name, 64) as buf:
        buf.seal()
        capsule = buf.__dlpack__(max_version=(1, 0))
        assert versioned(capsule).flags & READ_ONLY
        with pytest.raises(BufferError, match="read-only"):
            buf.__dlpack__()
        del capsule


def test_np_from_dlpack_of_a_writable_lease_is_zero_copy(client, name):
    with client.create_array(name, (2, 3), "int16") as buf:
        buf.numpy()[...] = [[1, 2, 3], [4, 5, 6]]
        array = np.from_dlpack(buf)
        assert array.shape == (2, 3) and array.dtype == np.int16
        assert array.__array_interface__["data"][0] == address_of(buf)
        assert np.shares_memory(array, np.asarray(buf))
        assert array[1, 2] == 6
        buf.numpy()[1, 2] = 60
        assert array[1, 2] == 60
        del array
        buf.seal()


def test_argument_checks(client, name):
    with client.create(name, 64) as buf:
        with pytest.raises(BufferError, match="never a copy"):
            buf.__dlpack__(copy=True)
        assert get_name(buf.__dlpack__(copy=False)) == b"dltensor"
        with pytest.raises(BufferError, match="would need a copy"):
            buf.__dlpack__(dl_device=(2, 0))
        assert get_name(buf.__dlpack__(dl_device=(1, 0))) == b"dltensor"
        with pytest.raises(BufferError, match="stream must be None"):
            buf.__dlpack__(stream=1)
        with pytest.raises(TypeError):
            buf.__dlpack__(max_version=1)
        with pytest.raises(TypeError):
            buf.__dlpack__(None)  # Keyword-only, as the array API says.
        buf.seal()  # Every export above was let go.


def test_unconsumed_capsule_lets_the_buffer_go(client, name):
    buf = client.create(name, 4096)
    address = address_of(buf)
    capsule = buf.__dlpack__()
    buf.release()
    assert client.stat(name).lease_count == 1  # The capsule holds the lease.
    assert is_mapped(address)
    del capsule  # Unconsumed: its destructor calls the deleter.
    with pytest.raises(memd.NotFoundError):  # The lease ended: an unsealed buffer goes.
        client.stat(name)
    assert not is_mapped(address)


def test_consumed_capsule_is_let_go_by_the_deleter_from_another_thread(client, name):
    buf = client.create(name, 4096)
    address = address_of(buf)
    capsule = buf.__dlpack__(max_version=(1, 0))
    pointer = get_pointer(capsule, b"dltensor_versioned")
    managed = DLManagedTensorVersioned.from_address(pointer)
    deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(managed.deleter)
    # What a consumer does: rename, then call the deleter when done - here on
    # a thread without the GIL (ctypes lets it go for the call).
    assert set_name(capsule, USED_VERSIONED) == 0
    buf.release()
    del capsule  # Consumed: its destructor must not call the deleter.
    assert client.stat(name).lease_count == 1 and is_mapped(address)
    thread = threading.Thread(target=deleter, args=(pointer,))
    thread.start()
    thread.join()
    with pytest.raises(memd.NotFoundError):  # The lease ended: an unsealed buffer goes.
        client.stat(name)
    assert not is_mapped(address)


def test_dlpack_with_explicit_layout(client, name):
    with client.create(name, 64) as buf:
        capsule = buf._dlpack("float16", (4, 8))  # The tensor lives with its capsule.
        tensor = legacy(capsule)
        assert (tensor.dl_tensor.dtype.code, tensor.dl_tensor.dtype.bits) == (2, 16)
        assert [tensor.dl_tensor.shape[i] for i in range(2)] == [4, 8]
        assert [tensor.dl_tensor.strides[i] for i in range(2)] == [8, 1]
        other = buf._dlpack("bfloat16", None)
        bf16 = legacy(other)
        assert (bf16.dl_tensor.dtype.code, bf16.dl_tensor.dtype.bits) == (4, 16)
        assert bf16.dl_tensor.shape[0] == 32
        with pytest.raises(ValueError, match="needs 128 bytes"):
            buf._dlpack("float32", (4, 8))
        del tensor, bf16, capsule, other


def test_host_buffer_has_no_cuda_array_interface(client, name):
    with client.create(name, 64) as buf:
        assert not hasattr(buf, "__cuda_array_interface__")
        with pytest.raises(AttributeError, match="host memory"):
            buf.__cuda_array_interface__


def test_memd_error_is_not_raised_for_dlpack_misuse(client, name):
    # Export refusals are BufferError (what consumers catch), not memd.Error.
    with client.create(name, 64) as buf:
        with pytest.raises(BufferError) as caught:
            buf.__dlpack__(copy=True)
        assert not isinstance(caught.value, memd.Error)


def test_export_libmemd_refuses_keeps_no_view(client, name, monkeypatch):
    # The capsule's tensor comes from libmemd (memd_buffer_to_dlpack*): where
    # it refuses, the view counted for it is let go and its error raised.
    from memd import _capi
    for function in ("memd_buffer_to_dlpack", "memd_buffer_to_dlpack_versioned"):
        real = getattr(_capi.lib, function)

        def refused(handle, options, tensor, error, real=real):
            options._obj.struct_size = 3  # byref(): the struct itself.
            return real(handle, options, tensor, error)

        monkeypatch.setattr(_capi.lib, function, refused)
    with client.create(name, 64) as buf:
        with pytest.raises(memd.InvalidArgumentError, match="struct_size is 3"):
            buf.__dlpack__()
        with pytest.raises(memd.InvalidArgumentError, match="struct_size is 3"):
            buf.__dlpack__(max_version=(1, 0))
        assert buf._views == 0 and buf._writable_views == 0
        buf.seal()  # No writable view was left behind.


def test_scalar_layout_exports_zero_dimensions(client, name):
    with client.create(name, 8) as buf:
        buf.numpy("float64", ())[...] = 1.5
        capsule = buf._dlpack("float64", (), max_version=(1, 0))
        managed = versioned(capsule)
        assert managed.dl_tensor.ndim == 0
        assert (managed.dl_tensor.dtype.code, managed.dl_tensor.dtype.bits) == (2, 64)
        assert ctypes.c_double.from_address(managed.dl_tensor.data).value == 1.5
        del managed, capsule


def test_package_dlpack_options_match_libmemd():
    # memd/_capi.py writes memd_dlpack_options by hand: libmemd's init must
    # agree on its size and defaults.
    from memd import _capi
    options = _capi.DlpackOptions()
    _capi.lib.memd_dlpack_options_init(ctypes.byref(options))
    assert options.struct_size == ctypes.sizeof(_capi.DlpackOptions)
    assert (options.dtype.code, options.dtype.bits, options.dtype.lanes) == (1, 8, 1)
    assert not options.on_delete and not options.read_only and not options.scalar
