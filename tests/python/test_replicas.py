"""Replicas from Python: a sealed host buffer opened at device:N (the daemon
copies it there once for every opener), prefetched, dropped, and a writer's
sync, on the fake CUDA driver with two GPUs."""

import os

import pytest

import memd
from conftest import FAKE_CUDA, Daemon

pytestmark = pytest.mark.skipif(not os.path.exists(FAKE_CUDA),
                                reason=f"no fake CUDA driver at {FAKE_CUDA}")

SIZE = 1 << 20
PATTERN = bytes((i * 7 + 3) % 251 for i in range(SIZE))


@pytest.fixture(scope="module")
def cuda_client():
    # The daemon's GPUs, and this process's view of them (read by the fake
    # when libmemd first loads it).
    saved = {k: os.environ.get(k) for k in ("MEMD_CUDA_DRIVER", "MEMD_FAKE_CUDA_DEVICES")}
    os.environ.update(MEMD_CUDA_DRIVER=FAKE_CUDA, MEMD_FAKE_CUDA_DEVICES="2")
    daemon = Daemon("--backend", "cuda", "--cuda-driver", FAKE_CUDA)
    client = memd.connect(daemon.socket_dir)
    yield client
    client.close()
    daemon.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def sealed_host_buffer(client, name):
    with client.create(name, SIZE) as buf:
        memoryview(buf)[:] = PATTERN
        buf.seal()


def replica(info, location):
    found = [r for r in info.replicas if r.location == location]
    return found[0] if found else None


def read_back(client, source, name):
    """The bytes of `source` (any location), through a host buffer."""
    with client.create(name + ".back", SIZE, persistent=False) as back:
        client.copy(source, back).wait()
        return bytes(memoryview(back))


def test_open_at_a_device_makes_one_current_copy(cuda_client, name):
    # device:0: in one pytest run with other files this process's fake
    # driver may have been loaded earlier, seeing one GPU only.
    sealed_host_buffer(cuda_client, name)
    with cuda_client.open(name, location="device:0") as gpu:
        assert gpu.location == "device:0" and gpu.device_pointer != 0
        with cuda_client.open(name, location="device:0") as again:
            assert again.info.location == "device:0"
            info = cuda_client.stat(name)
            assert info.location == "host"
            assert [r.location for r in info.replicas] == ["host", "device:0"]
            copy = replica(info, "device:0")
            assert copy.state == "current" and copy.readers == 2 and copy.writers == 0
            assert copy.generation == info.generation and copy.bytes >= SIZE
            assert copy.charged_uid == os.getuid()
            assert info.sync_state == "synchronized" and info.fill_failure == ""
        assert read_back(cuda_client, gpu, name) == PATTERN


def test_prefetch_then_drop(cuda_client, name):
    sealed_host_buffer(cuda_client, name)
    info = cuda_client.prefetch(name, "device:0", wait=60)
    assert replica(info, "device:0").state == "current"
    assert replica(info, "device:0").readers == 0
    with cuda_client.open(name, location="device:0") as gpu:
        with pytest.raises(memd.FailedPreconditionError):
            cuda_client.drop_replica(name, "device:0")
        assert read_back(cuda_client, gpu, name) == PATTERN
    info = cuda_client.drop_replica(name, "device:0")
    assert replica(info, "device:0") is None and len(info.replicas) == 1
    with pytest.raises(memd.FailedPreconditionError):
        cuda_client.drop_replica(name, "host")  # The home.


def test_prefetch_errors(cuda_client, name):
    with pytest.raises(memd.NotFoundError):
        cuda_client.prefetch(name, "device:0")
    sealed_host_buffer(cuda_client, name)
    with pytest.raises(memd.InvalidArgumentError):
        cuda_client.prefetch(name, "device:9", wait=10)
    with pytest.raises(ValueError):
        cuda_client.prefetch(name, "device:0", wait=-1)


def test_a_writers_sync_publishes_a_new_generation(cuda_client, name):
    with cuda_client.create(name, SIZE) as buf:
        memoryview(buf)[:] = PATTERN
        before = buf.sync()
        assert before.location == "host" and before.generation >= 1
        buf.seal()
        with pytest.raises(memd.FailedPreconditionError):
            buf.sync()
    with cuda_client.open(name) as reader:
        with pytest.raises(memd.FailedPreconditionError):
            reader.sync()
