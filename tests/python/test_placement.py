"""Location "auto": memd chooses where a buffer lives, says which rule chose
(info.placement), refuses bad hints and locations, and never chooses a GPU
this process cannot map (fake CUDA with two GPUs, this process seeing one)."""

import os

import pytest

import memd
from conftest import FAKE_CUDA, Daemon

MiB = 1 << 20


def test_auto_says_which_rule_chose(client, name):
    with client.create(name, 8, location="auto", hint="host_frequent") as buf:
        assert buf.location == "host"
        assert buf.info.placement == "8 B with hint host_frequent: host"
        buf.seal()
    info = client.stat(name)
    assert (info.location, info.placement) == ("host", "8 B with hint host_frequent: host")
    assert info.size == 8 and info.state == "sealed" and info.mode == 0o600


def test_a_named_location_has_no_placement(client, name):
    with client.create(name, 8) as buf:
        assert buf.info.placement == ""
        buf.seal()
    assert client.stat(name).placement == ""


def test_open_or_create_auto_creates_then_opens_where_it_lives(client, name):
    with client.open_or_create(name, 4096, location="auto", hint="host_frequent") as buf:
        assert buf.created and buf.location == "host"
        buf.seal()
    with client.open_or_create(name, 4096, location="auto", hint="streaming") as again:
        assert not again.created and again.location == "host"


def test_bad_hints_and_locations_are_invalid_argument(client, name):
    with pytest.raises(memd.InvalidArgumentError, match="unknown access hint 'gpu_please'"):
        client.create(name, 8, location="auto", hint="gpu_please")
    with pytest.raises(memd.InvalidArgumentError, match="go with location auto"):
        client.create(name, 8, hint="streaming")
    with pytest.raises(memd.InvalidArgumentError, match="mappable location 'device:x'"):
        client.create(name, 8, location="auto", mappable=["host", "device:x"])
    assert client.list(prefix=name) == []


@pytest.fixture(scope="module")
def one_of_two_gpus():
    """A CUDA memd over two fake GPUs; this process's CUDA sees only the
    second (memd's device:1), as its own device 0."""
    if not os.path.exists(FAKE_CUDA):
        pytest.skip(f"no fake CUDA driver at {FAKE_CUDA}")
    daemon = Daemon("--backend", "cuda", "--cuda-driver", FAKE_CUDA,
                    env={"MEMD_FAKE_CUDA_DEVICES": "2"})
    saved = {k: os.environ.get(k)
             for k in ("MEMD_CUDA_DRIVER", "MEMD_FAKE_CUDA_DEVICES", "CUDA_VISIBLE_DEVICES")}
    # Read when libmemd first loads the driver: this file runs in a process
    # of its own, so nothing loaded it before.
    os.environ.update(MEMD_CUDA_DRIVER=FAKE_CUDA, MEMD_FAKE_CUDA_DEVICES="2",
                      CUDA_VISIBLE_DEVICES="1")
    client = memd.connect(daemon.socket_dir)
    yield client
    client.close()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    daemon.stop()


def test_auto_never_chooses_a_gpu_this_process_does_not_see(one_of_two_gpus):
    client = one_of_two_gpus
    assert client.cuda_device("device:1") == 0
    # Both GPUs have the same free memory: the tie would go to device:0,
    # which this process cannot map.
    with client.create("two/medium", 8 * MiB, location="auto") as buf:
        assert buf.location == "device:1"
        assert "device:1 has the most free" in buf.info.placement
    with client.create("two/gpu", 4096, location="auto", hint="device_frequent") as buf:
        assert buf.location == "device:1"
    # A list the caller gives is what counts.
    with client.create("two/none", 8 * MiB, location="auto", hint="device_frequent",
                       mappable=["host"]) as buf:
        assert buf.location == "host"
