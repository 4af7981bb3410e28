"""Buffer.torch() (skipped where torch is not installed)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def test_writable_lease_is_a_zero_copy_tensor(client, name):
    with client.create_array(name, (4, 4), "float32") as buf:
        tensor = buf.torch()
        assert tensor.shape == (4, 4) and tensor.dtype == torch.float32
        tensor.fill_(2.0)
        assert float(buf.numpy().sum()) == 32.0
        assert buf.torch(dtype=torch.int32).shape == (16,)
        del tensor
        buf.seal()


def test_torch_from_dlpack_of_a_writable_lease(client, name):
    with client.create_array(name, (8,), "int64") as buf:
        tensor = torch.from_dlpack(buf)
        tensor[3] = 42
        assert buf.numpy()[3] == 42
        del tensor


def test_read_only_memory_is_a_zero_copy_tensor(client, name):
    with client.create_array(name, (2, 2), "float32") as buf:
        buf.numpy()[...] = 1.5
        buf.seal()
    with client.open(name) as reader:
        tensor = reader.torch()
        assert tensor.shape == (2, 2) and float(tensor.sum()) == 6.0
        # The same memory: no copy was made.
        assert tensor.data_ptr() == reader.numpy().__array_interface__["data"][0]
        # torch before 2.x asks for a legacy capsule, which cannot say
        # "read-only": refused. A torch that asks with max_version (1, 0)
        # gets the read-only capsule: the same zero-copy tensor as torch().
        try:
            imported = torch.from_dlpack(reader)
        except BufferError:
            assert not _asks_for_versioned_capsules(reader)
        else:
            assert imported.data_ptr() == tensor.data_ptr()
            del imported
        copy = reader.torch(copy=True)
        copy += 1
        assert float(copy.sum()) == 10.0 and copy.data_ptr() != tensor.data_ptr()
        assert float(reader.numpy().sum()) == 6.0  # The buffer is untouched.
        # The tensor holds the lease: released, the mapping stays for it.
        reader.release()
        assert float(tensor.sum()) == 6.0
        del tensor


def test_a_write_through_a_read_only_tensor_kills_the_writer_not_the_buffer(client, name):
    import os
    import signal
    import subprocess
    import sys
    with client.create_array(name, (4,), "float32") as buf:
        buf.numpy()[...] = 2.0
        buf.seal()
    writer = ("import memd\n"
              f"t = memd.connect().open({name!r}).torch()\n"
              "t += 1\n"
              "print('wrote')\n")
    result = subprocess.run([sys.executable, "-c", writer], capture_output=True, text=True,
                            timeout=60)
    if "asan" in os.environ.get("LD_PRELOAD", ""):
        # AddressSanitizer's handler reports the SEGV and exits 1 instead.
        assert result.returncode != 0 and "SEGV" in result.stderr, result.stderr[-2000:]
    else:
        assert result.returncode == -signal.SIGSEGV, (result.returncode, result.stderr)
    assert "wrote" not in result.stdout
    with client.open(name) as reader:
        assert reader.numpy().tolist() == [2.0, 2.0, 2.0, 2.0]


def test_bfloat16_copy(client, name):
    with client.create_array(name, (4,), "bfloat16") as buf:
        # bfloat16 is the top half of a float32: 1.0, -2.0, 0.5, 0.
        np.asarray(buf).view(np.uint16)[:] = [0x3F80, 0xC000, 0x3F00, 0x0000]
        buf.seal()
        copy = buf.torch(copy=True)
        assert copy.dtype == torch.bfloat16
        assert copy.float().tolist() == [1.0, -2.0, 0.5, 0.0]


def _asks_for_versioned_capsules(buf):
    """Whether this torch's from_dlpack passes max_version to __dlpack__."""
    asked = {}

    class Probe:
        def __dlpack_device__(self):
            return buf.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            asked.update(kwargs)
            raise BufferError("probe")

    try:
        torch.from_dlpack(Probe())
    except BufferError:
        pass
    return asked.get("max_version") is not None
