"""Level Zero device buffers on the fake Level Zero driver (tests/fake_ze)
under the real loader: the daemon runs the level_zero backend on it, and
this process imports the memory in libmemd's own context, as an application
that passes none does. DLPack says kDLOneAPI (14); there is no
__cuda_array_interface__."""

import os

import numpy as np
import pytest

import memd
from conftest import REPO, Daemon

FAKE_ZE = os.environ.get("MEMD_FAKE_ZE") or os.path.join(
    REPO, "build", "lib", "libmemd_fake_ze.so")
K_DL_ONEAPI = 14

pytestmark = pytest.mark.skipif(not os.path.exists(FAKE_ZE),
                                reason=f"no fake Level Zero driver at {FAKE_ZE}")


@pytest.fixture(scope="module")
def ze_client():
    # Read by the loader at its first zeInit, in the daemon and in this
    # process (libmemd loads the loader when it first opens such a buffer).
    previous = os.environ.get("ZE_ENABLE_ALT_DRIVERS")
    os.environ["ZE_ENABLE_ALT_DRIVERS"] = FAKE_ZE
    daemon = Daemon("--backend", "level_zero")
    client = memd.connect(daemon.socket_dir)
    yield client
    client.close()
    daemon.stop()
    if previous is None:
        os.environ.pop("ZE_ENABLE_ALT_DRIVERS")
    else:
        os.environ["ZE_ENABLE_ALT_DRIVERS"] = previous


def test_devices_say_level_zero(ze_client):
    devices = ze_client.stats().devices
    assert [d.api for d in devices] == ["level_zero"]
    assert devices[0].uuid.startswith("ZE-") and devices[0].pci_address == "0000:10:00.0"


def test_level_zero_buffer_exports_oneapi_dlpack(ze_client, name):
    from dlpack_ctypes import versioned

    with ze_client.create_array(name, (256, 256), "float16", location="device:0") as buf:
        assert buf.location == "device:0" and buf.device == 0
        assert buf.device_pointer != 0
        assert buf.__dlpack_device__() == (K_DL_ONEAPI, 0)
        with pytest.raises(AttributeError, match="Level Zero GPU memory"):
            buf.__cuda_array_interface__
        assert not hasattr(buf, "__cuda_array_interface__")
        with pytest.raises(BufferError, match="GPU memory"):
            memoryview(buf)
        capsule = buf.__dlpack__(max_version=(1, 0), stream=None)
        managed = versioned(capsule)
        tensor = managed.dl_tensor
        assert (tensor.device.device_type, tensor.device.device_id) == (K_DL_ONEAPI, 0)
        assert tensor.data == buf.device_pointer
        assert (tensor.ndim, tensor.shape[0], tensor.shape[1]) == (2, 256, 256)
        assert (tensor.dtype.code, tensor.dtype.bits) == (2, 16)  # kDLFloat, 16 bits.
        assert not managed.flags & 1  # A writable lease: not read-only.
        del capsule, managed, tensor
        # numpy takes host memory only.
        with pytest.raises((BufferError, RuntimeError, TypeError)):
            np.from_dlpack(buf)
        buf.seal()


def test_reader_of_level_zero_buffer_gets_read_only_tensor(ze_client, name):
    from dlpack_ctypes import versioned

    with ze_client.create(name, 1 << 20, location="device:0") as buf:
        buf.seal()
    with ze_client.open(name) as reader:
        assert reader.device_pointer != 0
        with pytest.raises(BufferError, match="read-only"):
            reader.__dlpack__()
        managed = versioned(reader.__dlpack__(max_version=(1, 0)))
        assert managed.flags & 1
        assert managed.dl_tensor.device.device_type == K_DL_ONEAPI
        assert managed.dl_tensor.data == reader.device_pointer
        del managed
