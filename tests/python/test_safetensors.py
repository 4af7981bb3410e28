"""memd.safetensors: one buffer per file and place, every caller's tensors
views of it; the contract in docs/safetensors.md, shared with memctl."""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import memd
import memd.safetensors as st
from conftest import Daemon, is_mapped

MEMCTL = os.environ.get("MEMD_MEMCTL") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "build", "bin", "memctl")


def write_file(path, tensors, metadata=None, header_override=None, pad_to=8):
    """A safetensors file: tensors is {name: numpy array}; the header is
    padded with spaces so the data starts `pad_to`-aligned, as the
    safetensors library does."""
    header, data, offset = {}, b"", 0
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        dtype = {"float32": "F32", "float16": "F16", "int64": "I64", "uint8": "U8",
                 "int32": "I32", "bool": "BOOL", "uint16": "BF16"}[array.dtype.name]
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = header_override if header_override is not None else json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % pad_to)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    return path


@pytest.fixture
def files():
    d = tempfile.mkdtemp(prefix="memd-st-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def model(files):
    rng = np.random.default_rng(7)
    tensors = {"w": rng.standard_normal((64, 32)).astype(np.float32),
               "b": np.arange(32, dtype=np.int64), "scalar": np.array(3.5, dtype=np.float32),
               "mask": np.array([True, False, True])}
    return write_file(os.path.join(files, "model.safetensors"), tensors,
                      metadata={"format": "pt"}), tensors


@pytest.fixture
def clean(client):
    """No safetensors buffers before or after (other tests' are in the way of
    counting)."""
    def sweep():
        for info in client.list(prefix="safetensors/"):
            client.unlink(info.name)
    sweep()
    yield
    sweep()


def test_fingerprint_is_the_known_answer_memctl_gives():
    # tests/tools/safetensors_test.cc: FingerprintOfFixedInputsIsTheKnownAnswer.
    fields = [0] * 10
    fields[1], fields[2], fields[6] = 1234567, 2049, 200
    stat = os.stat_result(fields, {"st_mtime_ns": 1700000000123456789,
                                   "st_ctime_ns": 1700000001987654321})
    assert st.fingerprint(stat, b'{"__metadata__":{"format":"pt"}}') == (
        "f4cb6f4407948fbc177b84e396800776b5ee91e2f9dd97c5d6f08865bc19a7c9")
    assert st.buffer_name("f4cb6f4407948fbc177b84e396800776b5ee91e2f9dd97c5d6f08865bc19a7c9",
                          "device:01") == "safetensors/f4cb6f4407948fbc177b84e396800776/device-1"


def test_numpy_views_of_one_buffer(client, clean, model):
    path, tensors = model
    loaded = st.load(path, framework="numpy", client=client)
    assert list(loaded) == list(tensors)
    for key, array in tensors.items():
        assert loaded[key].dtype == array.dtype and np.array_equal(loaded[key], array)
        assert not loaded[key].flags.writeable
    [info] = client.list(prefix="safetensors/")
    assert info.size == os.path.getsize(path) and info.state == "sealed"
    stat = os.stat(path)
    with open(path, "rb") as f:
        header = st.read_header(f, stat.st_size)
    fingerprint = st.fingerprint(stat, header.header_bytes)
    assert info.name == f"safetensors/{fingerprint[:32]}/host"
    assert info.attrs == {"format": "safetensors", "safetensors.fingerprint": fingerprint,
                          "safetensors.file_size": str(stat.st_size),
                          "safetensors.mtime_ns": str(stat.st_mtime_ns),
                          "safetensors.header_bytes": str(len(header.header_bytes)),
                          "safetensors.file": "model.safetensors"}
    # Every array is a view into the one mapping, at the tensor's offset.
    start = loaded["w"].__array_interface__["data"][0] - header.tensors[0].offset
    for t in header.tensors:
        assert loaded[t.name].__array_interface__["data"][0] == start + t.offset
    assert is_mapped(start)
    # A second caller opens the same buffer (a lease of its own, so a
    # mapping of its own), and loads nothing.
    again = st.load(path, framework="numpy", client=client)
    again_start = again["w"].__array_interface__["data"][0] - header.tensors[0].offset
    assert again["b"].__array_interface__["data"][0] == again_start + header.tensors[1].offset
    assert np.array_equal(again["w"], tensors["w"])
    assert len(client.list(prefix="safetensors/")) == 1


def test_torch_views_share_one_mapping(client, clean, model):
    torch = pytest.importorskip("torch")
    path, tensors = model
    loaded = st.load(path, device="cpu", client=client)
    assert loaded["w"].dtype == torch.float32 and loaded["mask"].dtype == torch.bool
    assert loaded["scalar"].shape == () and float(loaded["scalar"]) == 3.5
    for key, array in tensors.items():
        assert np.array_equal(loaded[key].numpy(), array)
    w, b = loaded["w"], loaded["b"]
    assert b.data_ptr() - w.data_ptr() == tensors["w"].nbytes  # One mapping, file order.
    with open(path, "rb") as f:
        header = st.read_header(f, os.path.getsize(path))
    assert is_mapped(w.data_ptr() - header.tensors[0].offset)


def test_another_process_attaches_and_memctl_made_buffers_are_found(client, clean, model,
                                                                    daemon):
    path, tensors = model
    loaded = subprocess.run([MEMCTL, "--socket-dir", daemon.socket_dir, "put", "--format",
                             "safetensors", "--mode", "0644", path],
                            capture_output=True, text=True, timeout=60)
    assert loaded.returncode == 0, loaded.stderr
    [info] = client.list(prefix="safetensors/")
    assert info.name in loaded.stdout
    child = ("import memd.safetensors as st, numpy as np, sys\n"
             "calls = []\n"
             "stream_in = st._stream_in\n"
             "st._stream_in = lambda *a: (calls.append(1), stream_in(*a))[1]\n"
             f"w = st.load({path!r}, framework='numpy')['w']\n"
             "print(len(calls), float(w.sum()))\n")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    calls, total = out.stdout.split()
    assert calls == "0"  # Attached to memctl's buffer, loaded nothing.
    assert float(total) == pytest.approx(float(tensors["w"].sum()), rel=1e-5)
    assert [i.name for i in client.list(prefix="safetensors/")] == [info.name]


def test_concurrent_first_callers_load_it_once(client, clean, model):
    path, tensors = model
    child = ("import memd.safetensors as st, sys\n"
             "calls = []\n"
             "stream_in = st._stream_in\n"
             "st._stream_in = lambda *a: (calls.append(1), stream_in(*a))[1]\n"
             "sys.stdin.read()\n"  # All start together.
             f"w = st.load({path!r}, framework='numpy')['w']\n"
             "print(len(calls), float(w.sum()))\n")
    children = [subprocess.Popen([sys.executable, "-c", child], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(6)]
    results = [c.communicate("", timeout=120) for c in children]
    assert all(c.returncode == 0 for c in children), [r[1] for r in results]
    loads = sum(int(out.split()[0]) for out, _ in results)
    assert loads == 1
    assert len({out.split()[1] for out, _ in results}) == 1
    assert len(client.list(prefix="safetensors/")) == 1


def test_a_changed_file_is_never_served_from_the_old_buffer(client, clean, files):
    path = write_file(os.path.join(files, "m.safetensors"), {"x": np.zeros(4, np.float32)})
    first = st.load(path, framework="numpy", client=client)
    old = os.stat(path)
    # New bytes of the same size, and the old mtime put back: ctime moved.
    write_file(path, {"x": np.ones(4, np.float32)})
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    second = st.load(path, framework="numpy", client=client)
    assert first["x"].tolist() == [0, 0, 0, 0] and second["x"].tolist() == [1, 1, 1, 1]
    assert len(client.list(prefix="safetensors/")) == 2


def test_host_memory_is_loaded_through_the_buffers_descriptor(client, clean, model,
                                                              write_from_file_calls):
    path, tensors = model
    loaded = st.load(path, framework="numpy", client=client)
    calls = write_from_file_calls
    assert len(calls) == 1 and calls[0][1:] == (0, os.path.getsize(path))
    for key, array in tensors.items():
        assert np.array_equal(loaded[key], array)


def test_a_file_changed_while_loading_fails_and_leaves_no_buffer(client, clean, model,
                                                                 monkeypatch):
    path, _ = model
    stream_in = st._stream_in

    def touch_meanwhile(*args):
        stream_in(*args)
        os.utime(path, ns=(1, 1))

    monkeypatch.setattr(st, "_stream_in", touch_meanwhile)
    with pytest.raises(memd.AbortedError, match="changed while loading"):
        st.load(path, framework="numpy", client=client)
    assert client.list(prefix="safetensors/") == []


def test_a_buffer_of_the_name_with_other_bytes_is_refused(client, clean, model):
    path, _ = model
    stat = os.stat(path)
    with open(path, "rb") as f:
        header = st.read_header(f, stat.st_size)
    name = st.buffer_name(st.fingerprint(stat, header.header_bytes), "host")
    with client.create(name, stat.st_size, attrs={"safetensors.fingerprint": "0" * 64}) as buf:
        buf.seal()
    with pytest.raises(memd.PermissionDeniedError, match="does not hold this file"):
        st.load(path, framework="numpy", client=client)


def test_another_users_buffer_of_the_name_is_refused(files):
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another uid")
    mallory = 61003
    daemon = Daemon("--backend", "host", "--socket-mode", "0666")
    try:
        for d in (daemon.dir, daemon.socket_dir, files):
            os.chmod(d, 0o755)
        path = write_file(os.path.join(files, "m.safetensors"), {"x": np.ones(4, np.float32)})
        os.chmod(path, 0o644)
        try:
            usable = subprocess.run([MEMCTL, "--version"], user=mallory, capture_output=True,
                                    timeout=60).returncode == 0
        except PermissionError:
            usable = False
        if not usable:  # E.g. a bundle unpacked in a directory only root may enter.
            pytest.skip(f"{MEMCTL} does not run as uid {mallory} here")
        squat = subprocess.run([MEMCTL, "--socket-dir", daemon.socket_dir, "put", "--format",
                                "safetensors", "--mode", "0644", path], user=mallory,
                               capture_output=True, text=True, timeout=60)
        assert squat.returncode == 0, squat.stderr
        with memd.connect(daemon.socket_dir) as c:
            with pytest.raises(memd.PermissionDeniedError, match=f"uid {mallory}"):
                st.load(path, framework="numpy", client=c)
    finally:
        daemon.stop()


def _header(entries, data_bytes=16):
    return json.dumps(entries).encode(), data_bytes


@pytest.mark.parametrize("entries, message", [
    ({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 32]}}, "past the data"),
    ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, "needs 8"),
    ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, "begin <= end"),
    ({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "y": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, "overlap"),
    ({"x": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, "dtype 'C64'"),
    ({"x": {"dtype": "F32", "shape": [True], "data_offsets": [0, 4]}}, "shape"),
    ({"x": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, "shape"),
    ({"x": {"dtype": "F64", "shape": [2**40, 2**40], "data_offsets": [0, 4]}}, "overflows"),
    ({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "extra": 1}}, "exactly"),
    ({"x": [1, 2]}, "exactly"),
    ({"__metadata__": {"a": 1}}, "__metadata__"),
    ([1, 2], "not a JSON object"),
])
def test_hostile_headers_are_refused(entries, message):
    header, data = _header(entries)
    with pytest.raises(ValueError, match=message):
        st.parse_header(header, 8 + len(header) + data)


@pytest.mark.parametrize("header, message", [
    (b'{"x": 1, "x": 2}', "repeats the key"),
    (b'{"x": NaN}', "not JSON"),
    (b'{"x": "\xff"}', "not UTF-8"),
    (b'{"a\x00": 1}', "NUL"),
    (b'{"\\ud800": 1}', "lone surrogate"),
    (b'\xef\xbb\xbf{}', "not UTF-8 JSON"),
    (b"[" * 200000 + b"]" * 200000, "nests too deeply|not a JSON object|not UTF-8 JSON"),
])
def test_malformed_json_is_refused(header, message):
    with pytest.raises(ValueError, match=message):
        st.parse_header(header, 8 + len(header))


@pytest.mark.parametrize("length, size, message", [
    (0, 64, "is 0"), (10**8 + 1, 10**9, "limit"), (100, 50, "past the end"),
])
def test_header_lengths_are_checked_before_anything_is_read(files, length, size, message):
    path = os.path.join(files, "bad.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", length))
        f.truncate(size)  # Sparse: a 1 GB claim costs nothing.
    with open(path, "rb") as f, pytest.raises(ValueError, match=message):
        st.read_header(f, size)


def test_short_file_and_misaligned_torch_tensor(client, clean, files):
    path = os.path.join(files, "short.safetensors")
    with open(path, "wb") as f:
        f.write(b"abc")
    with pytest.raises(ValueError, match="fewer than the 8"):
        st.load(path, framework="numpy", client=client)
    torch = pytest.importorskip("torch")
    header = json.dumps({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
                         "b": {"dtype": "F32", "shape": [1], "data_offsets": [1, 5]}}).encode()
    path = write_file(os.path.join(files, "odd.safetensors"), {}, header_override=header)
    with open(path, "ab") as f:
        f.write(bytes(5))
    assert st.load(path, framework="numpy", client=client)["b"].tolist() == [0.0]
    with pytest.raises(ValueError, match="'b'.*not a multiple"):
        st.load(path, framework="torch", client=client)
    del torch


def test_numpy_refuses_what_it_lacks(client, clean, files):
    path = write_file(os.path.join(files, "bf.safetensors"),
                      {"h": np.array([0x3F80], dtype=np.uint16)})  # BF16
    with pytest.raises(ValueError, match="numpy has no BF16"):
        st.load(path, framework="numpy", client=client)
    with pytest.raises(ValueError, match="host memory only"):
        st.load(path, device="device:0", framework="numpy", client=client)


def test_dtypes_this_torch_lacks_are_refused_by_name(client, clean, files):
    torch = pytest.importorskip("torch")
    header = json.dumps({"f8": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [0, 4]},
                         "u16": {"dtype": "U16", "shape": [2], "data_offsets": [4, 8]}})
    path = write_file(os.path.join(files, "f8.safetensors"), {},
                      header_override=header.encode())
    with open(path, "ab") as f:
        f.write(bytes([0x38, 0x40, 0, 0]) + struct.pack("<2H", 7, 9))
    missing = [name for name, attr in (("f8", "float8_e4m3fn"), ("u16", "uint16"))
               if not hasattr(torch, attr)]
    if missing:  # Debian's torch 1.13 has neither.
        with pytest.raises(ValueError, match=f"tensor '{missing[0]}': this torch"):
            st.load(path, client=client)
    else:  # torch >= 2.3 has both: zero-copy views.
        loaded = st.load(path, client=client)
        assert loaded["f8"].dtype == torch.float8_e4m3fn
        assert loaded["u16"].tolist() == [7, 9]
    # numpy has U16, and no F8.
    with pytest.raises(ValueError, match="tensor 'f8': numpy has no F8_E4M3"):
        st.load(path, framework="numpy", client=client)


def test_a_header_at_the_100_mb_limit_loads_and_one_past_it_is_refused(client, clean, files):
    limit = st.MAX_HEADER_BYTES
    prefix, suffix = b'{"__metadata__": {"pad": "', b'"}}'
    header = prefix + b"x" * (limit - len(prefix) - len(suffix)) + suffix
    path = os.path.join(files, "big.safetensors")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
    assert len(header) == limit
    assert st.load(path, framework="numpy", client=client) == {}
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", limit + 1) + header + b" ")
    with pytest.raises(ValueError, match="limit"):
        st.load(path, framework="numpy", client=client)
