"""The mapping outlives every view: release() with views alive defers the
unmap to the last view, and nothing leaks over many cycles."""

import gc
import os

import numpy as np
import pytest

import memd

from conftest import address_of, is_mapped, memd_mappings


def test_release_with_a_live_memoryview_defers_the_unmap(client, name):
    buf = client.create(name, 4096)
    view = memoryview(buf)
    view[:4] = b"abcd"
    address = address_of(view)
    assert is_mapped(address)
    buf.release()
    assert buf.released
    with pytest.raises(ValueError, match="released"):
        memoryview(buf)  # No new views of a released Buffer...
    assert bytes(view[:4]) == b"abcd"  # ...but the live one still reads.
    view[4:8] = b"efgh"
    assert is_mapped(address)
    assert client.stat(name).lease_count == 1
    view.release()  # The last view: the lease ends, the mapping goes.
    assert not is_mapped(address)
    with pytest.raises(memd.NotFoundError):  # The lease ended: an unsealed buffer goes.
        client.stat(name)


def test_release_with_live_arrays_defers_the_unmap(client, name):
    buf = client.create_array(name, (16,), "float64")
    array = buf.numpy()
    array[:] = 2.5
    also = np.asarray(buf)
    address = address_of(buf)
    buf.release()
    assert float(array.sum()) == 40.0 and also.size == 128
    del also
    assert is_mapped(address)  # `array` still holds a view.
    array[0] = 1.0
    del array
    gc.collect()
    assert not is_mapped(address)


def test_read_lease_mapping_goes_with_its_last_view(client, name):
    with client.create(name, 4096) as buf:
        buf.seal()
    reader = client.open(name)
    array = np.asarray(reader)
    address = address_of(reader)
    reader.release()
    assert array[0] == 0 and is_mapped(address)
    del array
    # This client keeps no read-only mappings (mapping_cache_bytes=0).
    assert not is_mapped(address)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_many_cycles_leave_no_mapping_and_no_descriptor(client, name):
    def cycle(i):
        buf = client.create(f"{name}/{i}", 4096)
        array = np.asarray(buf)
        array[0] = i & 0xFF
        buf.release()  # Deferred: the array holds a view.
        client.unlink(f"{name}/{i}")
        assert array[0] == i & 0xFF
        del array

    for i in range(20):  # Warm-up: the client's own descriptors (gRPC) settle.
        cycle(i)
    mappings, fds = len(memd_mappings()), _open_fds()
    for i in range(20, 2020):
        cycle(i)
    gc.collect()
    assert len(memd_mappings()) == mappings
    assert _open_fds() == fds
    assert client.list(prefix=name) == []
