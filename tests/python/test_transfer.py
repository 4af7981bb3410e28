"""Client.copy and Transfer on host memory."""

import time

import numpy as np
import pytest

import memd


def test_host_to_host_copy(client, name):
    size = 3 << 20
    with client.create(f"{name}/a", size) as a, client.create(f"{name}/b", size) as b:
        np.asarray(a)[:] = (np.arange(size) % 253).astype(np.uint8)
        transfer = client.copy(a, b, chunk_bytes=1 << 20, deadline=time.time() + 60)
        assert isinstance(transfer.id, int) and transfer.id > 0
        assert transfer.wait(timeout=30) is None
        progress = transfer.progress()
        assert progress.state == "done" and progress.finished and progress.error is None
        assert progress.bytes_done == progress.bytes_total == size
        assert progress.direction == "h2h" and progress.elapsed >= 0
        assert np.array_equal(np.asarray(a), np.asarray(b))
        transfer.cancel()  # Finished: changes nothing.
        assert f"id={transfer.id}" in repr(transfer)


def test_transfers_lists_no_copy_that_ended(client, name):
    """Client.transfers() through memd_transfers_json (issue 29): the copies
    queued or running; one waited for is gone. (memctl_device_test and
    what_others_learn_test hold copies running to check what shows.)"""
    with client.create(f"{name}/a", 4096) as a, client.create(f"{name}/b", 4096) as b:
        transfer = client.copy(a, b)
        assert transfer.wait(timeout=30) is None
        listed = client.transfers()
        assert isinstance(listed, memd.TransferList) and listed.omitted == 0
        assert transfer.id not in [t.progress.id for t in listed.transfers]
        assert all(isinstance(t, memd.TransferInfo) for t in listed.transfers)


def test_partial_copy_with_offsets(client, name):
    with client.create(f"{name}/a", 8192) as a, client.create(f"{name}/b", 8192) as b:
        np.asarray(a)[:] = 9
        client.copy(a, b, src_offset=100, dst_offset=4000, length=50).wait(10)
        view = np.asarray(b)
        assert view[4000:4050].tolist() == [9] * 50
        assert view[3999] == 0 and view[4050] == 0
        del view


def test_copy_errors(client, name):
    with client.create(f"{name}/a", 4096) as a, client.create(f"{name}/b", 4096) as b:
        with pytest.raises(memd.InvalidArgumentError):
            client.copy(a, b, src_offset=4000, length=200)
        with pytest.raises(ValueError, match="priority"):
            client.copy(a, b, priority="urgent")
        b.seal()
        with pytest.raises(memd.FailedPreconditionError):
            client.copy(a, b)
        a.release()
        with pytest.raises(ValueError, match="released"):
            client.copy(a, b)
