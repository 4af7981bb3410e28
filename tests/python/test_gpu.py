"""The Python package on a real NVIDIA GPU with PyTorch (label gpu): device
tensors shared between processes, memd.safetensors.load on cuda:0, and what
a write through a read-only tensor does. Skipped without a GPU (failed
instead under MEMD_REQUIRE_GPU=1, as tools/gpu-check sets on a GPU node).

Every child is a fresh Python that makes no CUDA context before it opens:
libmemd imports into the GPU's primary context, the one torch then uses."""

import json
import os
import struct
import subprocess
import sys
import tempfile

import pytest

from conftest import Daemon


def _gpu_or_skip():
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        if os.environ.get("MEMD_REQUIRE_GPU"):
            pytest.fail("MEMD_REQUIRE_GPU is set but torch sees no CUDA GPU")
        pytest.skip("needs PyTorch with a CUDA GPU")
    return torch


@pytest.fixture(scope="module")
def gpu_daemon():
    torch = _gpu_or_skip()
    daemon = Daemon("--backend", "cuda")
    previous = os.environ.get("MEMD_SOCKET_DIR")
    os.environ["MEMD_SOCKET_DIR"] = daemon.socket_dir
    yield daemon, torch
    if previous is None:
        os.environ.pop("MEMD_SOCKET_DIR", None)
    else:
        os.environ["MEMD_SOCKET_DIR"] = previous
    daemon.stop()


def _run(code, timeout=120):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=timeout)
    return result


def test_device_tensor_shared_between_processes(gpu_daemon, name):
    daemon, torch = gpu_daemon
    import memd
    with memd.connect(daemon.socket_dir) as client:
        location = client.device_location(0)
        with client.create_array(name, (1024, 1024), "float16", location=location,
                                 mode=0o600) as buf:
            tensor = buf.torch()  # Writable lease: zero-copy.
            assert tensor.device.type == "cuda" and tensor.data_ptr() == buf.device_pointer
            tensor.copy_(torch.arange(1024 * 1024, device="cuda").reshape(1024, 1024) % 7)
            torch.cuda.synchronize()
            expected = float(tensor.float().sum())
            del tensor
            buf.seal()
            reader = ("import json, memd\n"
                      f"buf = memd.connect().open({name!r})\n"
                      "t = buf.torch()\n"
                      "print(json.dumps({'sum': float(t.float().sum()), "
                      "'zero_copy': t.data_ptr() == buf.device_pointer, "
                      "'device': str(t.device)}))\n")
            outs = [_run(reader) for _ in range(2)]
            for out in outs:
                assert out.returncode == 0, out.stderr
                seen = json.loads(out.stdout.strip().splitlines()[-1])
                assert seen == {"sum": expected, "zero_copy": True, "device": "cuda:0"}


def test_torch_own_dlpack_import_of_a_sealed_buffer(gpu_daemon, name):
    """What this torch does with torch.from_dlpack(buf) of read-only memory:
    memd offers a versioned read-only capsule (max_version >= (1, 0)) or
    refuses a legacy one; either way nothing writable-looking is handed out
    without asking through buf.torch()."""
    daemon, torch = gpu_daemon
    import memd
    with memd.connect(daemon.socket_dir) as client:
        with client.create(name, 4096, location=client.device_location(0)) as buf:
            buf.seal()
        with client.open(name) as reader:
            try:
                tensor = torch.from_dlpack(reader)
            except (BufferError, RuntimeError) as error:
                print(f"torch {torch.__version__} from_dlpack(read-only): refused: {error}")
            else:
                print(f"torch {torch.__version__} from_dlpack(read-only): took it "
                      f"(read-only capsule) at {tensor.data_ptr():#x}")
                assert tensor.data_ptr() == reader.device_pointer
                del tensor


def _write_safetensors(path, count, elements):
    import numpy as np
    header, offset = {}, 0
    for i in range(count):
        header[f"layer.{i}"] = {"dtype": "F16", "shape": [elements],
                                "data_offsets": [offset, offset + 2 * elements]}
        offset += 2 * elements
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for i in range(count):
            f.write((np.arange(elements) % (i + 3)).astype(np.float16).tobytes())


def test_safetensors_load_on_cuda(gpu_daemon):
    daemon, torch = gpu_daemon
    import memd
    import memd.safetensors as st
    with tempfile.TemporaryDirectory() as files:
        path = os.path.join(files, "model.safetensors")
        _write_safetensors(path, 4, 1 << 20)
        # Its own client: the process's default one would outlive this daemon.
        client = memd.connect(daemon.socket_dir)
        weights = st.load(path, device="cuda:0", client=client)
        assert [t.device.type for t in weights.values()] == ["cuda"] * 4
        for i, t in enumerate(weights.values()):
            assert float(t.float().sum()) == float(
                (torch.arange(1 << 20) % (i + 3)).to(torch.float16).float().sum())
        pointers = sorted(t.data_ptr() for t in weights.values())
        assert pointers[-1] - pointers[0] == 3 * 2 * (1 << 20)  # One buffer, file order.
        child = ("import memd.safetensors as st\n"
                 "calls = []\n"
                 "stream_in = st._stream_in\n"
                 "st._stream_in = lambda *a: (calls.append(1), stream_in(*a))[1]\n"
                 f"w = st.load({path!r}, device='cuda:0')\n"
                 "print(len(calls), float(w['layer.1'].float().sum()))\n")
        out = _run(child)
        assert out.returncode == 0, out.stderr
        calls, total = out.stdout.split()
        assert calls == "0" and float(total) == float(weights["layer.1"].float().sum())
        for info in client.list(prefix="safetensors/"):
            client.unlink(info.name)
        del weights
        client.close()


def test_a_write_through_a_read_only_device_tensor_faults_the_writer_not_the_buffer(
        gpu_daemon, name):
    daemon, torch = gpu_daemon
    import memd
    with memd.connect(daemon.socket_dir) as client:
        with client.create_array(name, (1024,), "float32",
                                 location=client.device_location(0)) as buf:
            buf.torch().fill_(2.0)
            torch.cuda.synchronize()
            buf.seal()
        writer = ("import memd, torch\n"
                  f"t = memd.connect().open({name!r}).torch()\n"
                  "t.add_(1)\n"
                  "torch.cuda.synchronize()\n"
                  "print('wrote')\n")
        out = _run(writer)
        print(f"writer: exit {out.returncode}, stderr tail: {out.stderr[-300:]!r}")
        assert out.returncode != 0 and "wrote" not in out.stdout
        with client.open(name) as reader:
            assert float(reader.torch().sum()) == 2.0 * 1024
