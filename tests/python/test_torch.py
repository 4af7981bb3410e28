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


def test_read_only_memory_needs_copy(client, name):
    with client.create_array(name, (2, 2), "float32") as buf:
        buf.numpy()[...] = 1.5
        buf.seal()
    with client.open(name) as reader:
        with pytest.raises(BufferError, match="copy=True"):
            reader.torch()
        with pytest.raises(BufferError):
            torch.from_dlpack(reader)
        copy = reader.torch(copy=True)
        copy += 1
        assert float(copy.sum()) == 10.0
        assert float(reader.numpy().sum()) == 6.0  # The buffer is untouched.


def test_bfloat16_copy(client, name):
    with client.create_array(name, (4,), "bfloat16") as buf:
        # bfloat16 is the top half of a float32: 1.0, -2.0, 0.5, 0.
        np.asarray(buf).view(np.uint16)[:] = [0x3F80, 0xC000, 0x3F00, 0x0000]
        buf.seal()
        copy = buf.torch(copy=True)
        assert copy.dtype == torch.bfloat16
        assert copy.float().tolist() == [1.0, -2.0, 0.5, 0.0]
