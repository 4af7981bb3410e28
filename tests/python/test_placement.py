"""Location "auto": memd chooses where a buffer lives, says which rule chose
(info.placement), refuses bad hints and locations, and never chooses a GPU
this process cannot map (fake CUDA with two GPUs, this process seeing one)."""

import json
import os
import subprocess
import sys

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


# Run in a child: CUDA reads CUDA_VISIBLE_DEVICES when it first loads, and
# this process may have loaded the fake driver already (the GPU bundle runs
# every test file in one pytest process).
_ONE_OF_TWO = """
import json, sys
import memd
MiB = 1 << 20
client = memd.connect(sys.argv[1])
out = {"cuda_device": client.cuda_device("device:1")}
with client.create("two/medium", 8 * MiB, location="auto") as buf:
    out["medium"] = [buf.location, buf.info.placement]
with client.create("two/gpu", 4096, location="auto", hint="device_frequent") as buf:
    out["gpu"] = buf.location
with client.create("two/none", 8 * MiB, location="auto", hint="device_frequent",
                   mappable=["host"]) as buf:
    out["none"] = buf.location
print(json.dumps(out))
"""


def test_auto_never_chooses_a_gpu_this_process_does_not_see():
    """Two fake GPUs; this process's CUDA sees only the second (memd's
    device:1) as its device 0."""
    if not os.path.exists(FAKE_CUDA):
        pytest.skip(f"no fake CUDA driver at {FAKE_CUDA}")
    daemon = Daemon("--backend", "cuda", "--cuda-driver", FAKE_CUDA,
                    env={"MEMD_FAKE_CUDA_DEVICES": "2"})
    try:
        env = dict(os.environ, MEMD_CUDA_DRIVER=FAKE_CUDA, MEMD_FAKE_CUDA_DEVICES="2",
                   CUDA_VISIBLE_DEVICES="1")
        child = subprocess.run([sys.executable, "-c", _ONE_OF_TWO, daemon.socket_dir],
                               env=env, capture_output=True, text=True, timeout=60)
        assert child.returncode == 0, child.stderr
        out = json.loads(child.stdout)
    finally:
        daemon.stop()
    assert out["cuda_device"] == 0
    # Both GPUs have the same free memory: the tie would go to device:0,
    # which the child cannot map.
    location, placement = out["medium"]
    assert location == "device:1"
    assert "device:1 has the most free" in placement
    assert out["gpu"] == "device:1"
    # A list the caller gives is what counts.
    assert out["none"] == "host"
