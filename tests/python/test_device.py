"""Device buffers on the fake CUDA driver (tests/fake_cuda): the daemon runs
the cuda backend on it and this process imports the memory through it
(MEMD_CUDA_DRIVER), as on a GPU node. Nothing here makes a CUDA context
first: a process or thread without one gets the GPU's primary context (the
one PyTorch uses), as a fresh Python process does on a GPU node."""

import ctypes
import os

import numpy as np
import pytest

import memd
from conftest import FAKE_CUDA, Daemon

pytestmark = pytest.mark.skipif(not os.path.exists(FAKE_CUDA),
                                reason=f"no fake CUDA driver at {FAKE_CUDA}")


def current_context(driver_path: str) -> int:
    """The calling thread's current CUDA context (0: none). libmemd loads
    the same library (dlopen of one path gives one instance)."""
    cuda = ctypes.CDLL(driver_path)
    context = ctypes.c_void_p()
    assert cuda.cuInit(0) == 0
    assert cuda.cuCtxGetCurrent(ctypes.byref(context)) == 0
    return context.value or 0


@pytest.fixture(scope="module")
def cuda_client():
    daemon = Daemon("--backend", "cuda", "--cuda-driver", FAKE_CUDA)
    # Read by libmemd when it first imports device memory.
    previous = os.environ.get("MEMD_CUDA_DRIVER")
    os.environ["MEMD_CUDA_DRIVER"] = FAKE_CUDA
    client = memd.connect(daemon.socket_dir)
    yield client
    client.close()
    if previous is None:
        os.environ.pop("MEMD_CUDA_DRIVER")
    else:
        os.environ["MEMD_CUDA_DRIVER"] = previous
    daemon.stop()


def test_device_buffer_protocols(cuda_client, name):
    with cuda_client.create_array(name, (256, 256), "float16", location="device:0") as buf:
        assert buf.location == "device:0" and buf.device == 0
        assert buf.device_pointer != 0
        assert buf.__dlpack_device__() == (2, 0)
        cai = buf.__cuda_array_interface__
        assert cai == {
            "shape": (256, 256),
            "typestr": "<f2",
            "data": (buf.device_pointer, False),
            "version": 3,
            "strides": None,
            "stream": None,
        }
        with pytest.raises(BufferError, match="GPU memory"):
            memoryview(buf)
        with pytest.raises(BufferError, match="GPU memory"):
            buf.numpy()
        buf.seal()
        assert buf.__cuda_array_interface__["data"] == (buf.device_pointer, True)


def test_device_read_lease_dlpack(cuda_client, name):
    from dlpack_ctypes import versioned

    with cuda_client.create(name, 1 << 20, location="device:0") as buf:
        buf.seal()
    with cuda_client.open(name) as reader:
        assert reader.__cuda_array_interface__["data"] == (reader.device_pointer, True)
        with pytest.raises(BufferError, match="read-only"):
            reader.__dlpack__()
        capsule = reader.__dlpack__(max_version=(1, 0), stream=None)
        managed = versioned(capsule)
        assert managed.flags & 1
        tensor = managed.dl_tensor
        assert (tensor.device.device_type, tensor.device.device_id) == (2, 0)
        assert tensor.data == reader.device_pointer
        assert tensor.shape[0] == 1 << 20
        # A CUDA consumer's stream is accepted (no synchronisation needed).
        assert reader.__dlpack__(max_version=(1, 0), stream=7) is not None
        with pytest.raises(BufferError, match="would need a copy"):
            reader.__dlpack__(max_version=(1, 0), dl_device=(1, 0))
        # numpy takes host memory only.
        with pytest.raises((BufferError, RuntimeError, TypeError)):
            np.from_dlpack(reader)
        del capsule, managed, tensor


def test_a_thread_without_a_context_opens_device_buffers(cuda_client, name):
    import threading
    outcome = {}

    def create():
        try:
            with cuda_client.create(name, 4096, location="device:0") as buf:
                outcome["pointer"] = buf.device_pointer
                outcome["context"] = current_context(FAKE_CUDA)
        except Exception as e:  # noqa: BLE001 - reported below.
            outcome["error"] = e

    thread = threading.Thread(target=create)
    thread.start()
    thread.join()
    assert "error" not in outcome, outcome.get("error")
    # Imported into the primary context, which libmemd does not leave
    # current: PyTorch's idea of the current device stays its own.
    assert outcome["pointer"] != 0 and outcome["context"] == 0


def test_device_writable_lease_legacy_capsule(cuda_client, name):
    from dlpack_ctypes import legacy

    with cuda_client.create(name, 4096, location="device:0") as buf:
        capsule = buf.__dlpack__()
        tensor = legacy(capsule).dl_tensor
        assert tensor.data == buf.device_pointer and tensor.device.device_type == 2
        del tensor, capsule


def test_copy_host_to_device_and_back(cuda_client, name):
    size = 1 << 20
    with cuda_client.create(f"{name}/src", size) as src, \
            cuda_client.create(f"{name}/gpu", size, location="device:0") as gpu, \
            cuda_client.create(f"{name}/dst", size) as dst:
        pattern = (np.arange(size) % 251).astype(np.uint8)
        np.asarray(src)[:] = pattern
        up = cuda_client.copy(src, gpu)
        up.wait(timeout=30)
        assert up.progress().direction == "h2d"
        down = cuda_client.copy(gpu, dst, priority="critical")
        down.wait(timeout=30)
        assert down.progress().direction == "d2h"
        assert np.array_equal(np.asarray(dst), pattern)


def test_device_memory_is_accounted_and_trims_say_what_the_driver_freed(cuda_client, name):
    """Issue 26: memd's pool beside the driver's figures; a trim says how
    much the driver's free memory rose (all of it here: no import is left
    once this process lets go)."""
    before = cuda_client.stats().devices[0]
    assert before.has_free
    assert before.total_bytes - before.free_bytes == before.memd_bytes + before.outside_memd_bytes
    with cuda_client.create(name, 8 << 20, location="device:0"):
        holding = cuda_client.stats().devices[0]
        assert holding.memd_bytes >= 8 << 20
    # Never sealed: it went with its lease.
    (trimmed,) = cuda_client.trim("device:0")
    assert trimmed.location == "device:0"
    assert trimmed.released_bytes >= 8 << 20
    assert trimmed.driver_freed_bytes == trimmed.released_bytes
    assert cuda_client.stats().devices[0].memd_bytes <= holding.memd_bytes - (8 << 20)
    (host,) = cuda_client.trim("host")
    assert host.driver_freed_bytes is None


def _device_bytes(client, buf):
    """The device buffer's bytes, copied back through a host buffer."""
    with client.create(f"{buf.name}.back", buf.size) as back:
        client.copy(buf, back).wait(timeout=60)
        return bytes(np.asarray(back))


def test_write_from_file_fills_a_device_buffer_and_leaves_no_staging(cuda_client, name,
                                                                     tmp_path):
    """libmemd reads the file into staging of its own (two 32 MiB slices
    here, the second part full) and has memd copy each slice to the GPU."""
    data = np.random.default_rng(3).integers(0, 256, (33 << 20) + 5, dtype=np.uint8).tobytes()
    path = tmp_path / "weights.bin"
    path.write_bytes(data)
    with open(path, "rb") as f, \
            cuda_client.create(name, len(data) + 4096, location="device:0") as buf:
        with cuda_client.create(f"{name}.zeros", buf.size) as zeros:
            cuda_client.copy(zeros, buf).wait(timeout=60)
        buf.write_from_file(f, 7, len(data) - 7, offset=4096 + 3, threads=2)
        assert f.tell() == 0  # Its position does not move.
        got = _device_bytes(cuda_client, buf)
        assert got[:4099] == bytes(4099) and got[4099:4099 + len(data) - 7] == data[7:]
        assert got[4099 + len(data) - 7:] == bytes(len(got) - 4099 - len(data) + 7)
        assert cuda_client.list(prefix=".libmemd/") == []

        with pytest.raises(memd.OutOfRangeError, match="ended"):
            buf.write_from_file(f, 4096, len(data))
        with pytest.raises(memd.InvalidArgumentError, match="past the end"):
            buf.write_from_file(f, 0, 2, offset=buf.size - 1)
        assert cuda_client.list(prefix=".libmemd/") == []
        buf.seal()
        with pytest.raises(memd.FailedPreconditionError, match="sealed"):
            buf.write_from_file(f, 0, 16)
        with cuda_client.open(name) as reader:
            with pytest.raises(memd.FailedPreconditionError, match="open for reading"):
                reader.write_from_file(f, 0, 16)
    cuda_client.unlink(name)
    assert cuda_client.stats().transfers.active == 0


def test_safetensors_loads_a_gpu_through_write_from_file(cuda_client, tmp_path,
                                                         write_from_file_calls):
    """memd.safetensors to a GPU, on the fake driver (framework='torch'
    needs torch; the buffer it views is what counts): one write_from_file
    of the whole file, no read loop of its own, every byte on the device."""
    import json
    import struct

    import memd.safetensors as st

    elements = 3 << 20  # float16: two tensors of 6 MiB.
    header = {f"layer.{i}": {"dtype": "F16", "shape": [elements],
                             "data_offsets": [2 * elements * i, 2 * elements * (i + 1)]}
              for i in range(2)}
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    data = struct.pack("<Q", len(text)) + text + b"".join(
        (np.arange(elements) % (i + 3)).astype(np.float16).tobytes() for i in range(2))
    path = tmp_path / "model.safetensors"
    path.write_bytes(data)

    with open(path, "rb", buffering=0) as f:
        buf, parsed = st._attach_or_load(cuda_client, str(path), f, "device:0", 0o600, 30.0)
    try:
        calls = write_from_file_calls
        assert len(calls) == 1 and calls[0][1:] == (0, len(data))
        assert buf.is_device and buf.location == "device:0" and buf.size == len(data)
        assert [t.name for t in parsed.tensors] == ["layer.0", "layer.1"]
        assert _device_bytes(cuda_client, buf) == data
        assert cuda_client.list(prefix=".libmemd/") == []
    finally:
        name = buf.name
        buf.release()
        cuda_client.unlink(name)
