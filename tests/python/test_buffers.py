"""Buffers: the client calls, attributes, the buffer protocol and numpy views,
and the read-only rules of read leases and sealed buffers."""

import importlib.util
import os
import time

import numpy as np
import pytest

import memd
from conftest import address_of

PyBUF_WRITABLE = 0x0001


def _get_writable_buffer(exporter):
    """PyObject_GetBuffer(exporter, PyBUF_WRITABLE), as C consumers call it
    (Python-level callers turn the exporter's error into a TypeError)."""
    import ctypes
    view = (ctypes.c_char * 256)()  # Room for a Py_buffer.
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
    if get(exporter, ctypes.addressof(view), PyBUF_WRITABLE) == 0:
        ctypes.pythonapi.PyBuffer_Release(ctypes.addressof(view))
        return True
    return False


def test_create_write_seal_open_read(client, name):
    before = time.time()
    with client.create(name, 4096, attrs={"purpose": "test"}) as buf:
        assert (buf.name, buf.size, buf.location) == (name, 4096, "host")
        assert buf.writable and not buf.readonly and not buf.sealed
        assert buf.device == -1 and buf.device_pointer == 0
        assert buf.attrs == {"purpose": "test"}
        view = memoryview(buf)
        assert not view.readonly and view.nbytes == 4096 and view.format == "B"
        view[:5] = b"hello"
        view.release()
        buf.seal()
        assert buf.sealed and buf.readonly and buf.writable
        assert buf.info.state == "sealed" and buf.info.sealed >= before - 1
    with client.open(name) as reader:
        assert not reader.writable and reader.readonly
        assert bytes(memoryview(reader)[:5]) == b"hello"
        info = reader.info
        assert info.name == name and info.size == 4096 and info.owner_uid == os.getuid()
        assert info.mode == 0o600 and info.persistent and info.attrs == {"purpose": "test"}
        assert info.creator_pid == os.getpid()


def test_stat_list_stats_sessions_usage_ping(client, name):
    client.ping()
    with client.create(name, 8192, mode=0o640, persistent=False) as buf:
        info = client.stat(name)
        assert info.lease_count == 1 and info.state == "creating" and not info.persistent
        assert info.mode == 0o640 and info.sealed is None
        assert info.created <= time.time() + 1
        names = [i.name for i in client.list(prefix=name)]
        assert names == [name]
        stats = client.stats()
        assert stats.backend == "host" and stats.buffers >= 1 and stats.leases >= 1
        assert any(p.location == "host" and p.used_bytes >= 8192 for p in stats.pools)
        assert stats.transfers.active >= 0
        assert stats.durability.generation >= 1 and stats.durability.lost_buffers == 0
        assert any(s.pid == os.getpid() for s in client.sessions())
        assert any(u.uid == os.getuid() and u.location == "host" and u.bytes >= 8192
                   for u in client.usage())
        assert client.session_id > 0
        buf.release()
    # Ephemeral: gone with its last lease.
    with pytest.raises(memd.NotFoundError):
        client.stat(name)


def test_stats_documents_have_no_field_the_dataclasses_drop(client, name):
    """memd/_records.py keeps only the keys its dataclasses name (a newer
    libmemd may send more): a statistic added to the C++ records
    (client/src/record_fields.h) must be added to memd/_types.py too."""
    import dataclasses
    from memd import _capi

    def fields(cls):
        return {f.name for f in dataclasses.fields(cls)}

    # Renamed on the way: nanoseconds become seconds under the record's name.
    renamed = {"recovered_unix_ns": "recovered_at", "recovery_ns": "recovery",
               "started_unix_ns": "started"}

    def expect_known(document, cls):
        keys = {renamed.get(key, key) for key in document}
        assert keys <= fields(cls), f"{cls.__name__} drops {sorted(keys - fields(cls))}"

    with client.create(name, 4096):
        stats = client._json(_capi.lib.memd_stats_json)
        for pool in stats["pools"]:
            expect_known(pool, memd.PoolStats)
            for size_class in pool["size_classes"]:
                expect_known(size_class, memd.SizeClassStats)
        for device in stats["devices"]:
            expect_known(device, memd.DeviceInfo)
        for waits in stats["memory_waits"]:
            expect_known(waits, memd.MemoryWaits)
        expect_known(stats["transfers"], memd.TransferStats)
        expect_known(stats["durability"], memd.DurabilityStats)
        for usage in client._json(_capi.lib.memd_usage_json):
            expect_known(usage, memd.UidUsage)
        for session in client._json(_capi.lib.memd_sessions_json):
            expect_known(session, memd.SessionInfo)


def test_stat_says_which_sessions_hold_the_leases(client, name):
    """Issue 29: Client.stat names the holders of a buffer's leases (this
    uid's sessions; every uid's for root)."""
    with client.create(name, 4096):
        holders = client.stat(name).holders
        assert [(h.session_id, h.pid, h.access, h.location, h.leases) for h in holders.listed] \
            == [(client.session_id, os.getpid(), "read_write", "host", 1)]
        assert holders.unlisted_leases == 0 and holders.other_users_leases == 0
        assert holders.listed[0].since > 0
        assert client.list(prefix=name)[0].holders == memd.LeaseHolders()


def test_list_shows_an_unlinked_leased_buffer_only_when_asked(client, name):
    """Issue 29: Client.list(include_unlinked=True), as memctl ls shows
    buffers unlinked but still leased."""
    with client.create(name, 4096) as buf:
        buf.seal()
        client.unlink(name)
        assert client.list(prefix=name) == []
        listed = client.list(prefix=name, include_unlinked=True)
        assert [(i.name, i.unlinked, i.lease_count) for i in listed] == [(name, True, 1)]
    assert client.list(prefix=name, include_unlinked=True) == []


def test_open_or_create_creates_then_opens(client, name):
    with client.open_or_create(name, 4096) as first:
        assert first.created and first.writable
        first.seal()
    with client.open_or_create(name, 4096, timeout=1.0) as second:
        assert not second.created and not second.writable


def test_writable_open_joins_a_buffer_being_written(client, name):
    with client.create(name, 4096) as producer:
        with client.open(name, writable=True) as helper:
            memoryview(helper)[:3] = b"abc"
        assert bytes(memoryview(producer)[:3]) == b"abc"


def test_write_from_file_through_the_kept_descriptor(client, name, tmp_path):
    data = os.urandom(3 * 1024 * 1024 + 17)
    path = tmp_path / "input.bin"
    path.write_bytes(data)
    with open(path, "rb") as f, client.create(name, len(data), keep_descriptor=True) as b:
        b.write_from_file(f)  # The whole file, its size from fstat.
        assert bytes(memoryview(b)) == data
        assert f.tell() == 0  # The position does not move.
        b.write_from_file(f.fileno(), file_offset=5, length=100, offset=1000, threads=2)
        assert bytes(memoryview(b)[1000:1100]) == data[5:105]
        with pytest.raises(memd.InvalidArgumentError, match="run past the end"):
            b.write_from_file(f, length=len(data), offset=1)
        with pytest.raises(memd.OutOfRangeError, match="the file ended"):
            b.write_from_file(f, file_offset=len(data) - 10, length=20)
        with pytest.raises(memd.InvalidArgumentError, match="at least 0"):
            b.write_from_file(f, length=-1)
        with client.open(name, writable=True, keep_descriptor=True) as joined:
            joined.write_from_file(f, length=4)
        b.seal()
        with pytest.raises(memd.FailedPreconditionError, match="sealed"):
            b.write_from_file(f, length=4)
        with client.create(name + "-plain", 16) as plain:
            with pytest.raises(memd.FailedPreconditionError, match="keep_descriptor"):
                plain.write_from_file(f, length=4)


def test_read_lease_views_are_read_only(client, name):
    with client.create(name, 64) as buf:
        buf.seal()
    with client.open(name) as reader:
        view = memoryview(reader)
        assert view.readonly
        with pytest.raises(TypeError):
            view[0] = 1
        array = np.asarray(reader)
        assert not array.flags.writeable
        with pytest.raises(ValueError):
            array[0] = 1
        assert not reader.numpy().flags.writeable
        with pytest.raises(BufferError, match="read lease"):
            _get_writable_buffer(reader)
        del view, array


def test_seal_refused_while_a_writable_view_lives(client, name):
    with client.create(name, 64) as buf:
        view = memoryview(buf)
        with pytest.raises(BufferError, match="writable view"):
            buf.seal()
        array = np.asarray(buf)
        view.release()
        with pytest.raises(BufferError, match="1 writable view"):
            buf.seal()
        del array
        buf.seal()
        # Sealed: the contents are final, new views are read-only.
        assert memoryview(buf).readonly
        assert not np.asarray(buf).flags.writeable


def test_np_asarray_and_frombuffer_are_zero_copy(client, name):
    with client.create(name, 256) as buf:
        a = np.asarray(buf)
        b = np.frombuffer(buf, dtype=np.uint8)
        a[:4] = [1, 2, 3, 4]
        assert list(b[:4]) == [1, 2, 3, 4]
        assert np.shares_memory(a, b)
        assert a.__array_interface__["data"][0] == address_of(buf)
        del a, b


def test_numpy_uses_the_attrs(client, name):
    with client.create_array(name, (3, 4), "float32") as buf:
        assert buf.attrs == {"dtype": "float32", "shape": "3,4"}
        assert buf.size == 48
        array = buf.numpy()
        assert array.shape == (3, 4) and array.dtype == np.float32 and array.flags.writeable
        array[...] = np.arange(12, dtype=np.float32).reshape(3, 4)
        again = buf.numpy()
        assert np.shares_memory(array, again) and again[2, 3] == 11
        # Explicit dtype without shape: the whole buffer, one dimension.
        words = buf.numpy(dtype="uint32")
        assert words.shape == (12,)
        assert buf.numpy(dtype=np.uint8, shape=(6, 8)).shape == (6, 8)
        with pytest.raises(ValueError, match="needs 96 bytes.*has 48"):
            buf.numpy(dtype="float64", shape=(3, 4))
        del array, again, words


@pytest.mark.parametrize("attrs, message", [
    ({"dtype": "float32", "shape": "4,x"}, "comma-separated"),
    ({"dtype": "float32", "shape": "100,100"}, "needs 40000 bytes"),
    ({"dtype": "not-a-dtype"}, "not"),
    ({"dtype": ">f4"}, "big-endian"),
    ({"layout": "column-major"}, "row-major"),
    # A producer's attributes are anyone's bytes: an object dtype over shared
    # memory would make numpy follow pointers the producer wrote.
    ({"dtype": "object"}, "not supported"),
    ({"dtype": "O"}, "not supported"),
    ({"dtype": "uint8", "shape": "0," + "9" * 30}, "dimension over"),
    ({"dtype": "uint8", "shape": ",".join(["1"] * 33)}, "33 dimensions"),
])
def test_numpy_refuses_bad_attrs(client, name, attrs, message):
    with client.create(name, 64, attrs=attrs) as buf:
        with pytest.raises(ValueError, match=message):
            buf.numpy()
        with pytest.raises(ValueError, match=message):
            buf.__dlpack__()


def test_numpy_accepts_numpy_dtype_spellings(client, name):
    with client.create(name, 64, attrs={"dtype": "<f2", "shape": "2, 16"}) as buf:
        assert buf.numpy().dtype == np.float16 and buf.numpy().shape == (2, 16)
        assert buf.numpy(dtype="half").dtype == np.float16
        assert buf.numpy(dtype=np.dtype("i8")).shape == (8,)


def test_released_buffer_raises_value_error_but_keeps_its_name(client, name):
    buf = client.create(name, 64)
    buf.release()
    buf.release()  # Idempotent.
    assert buf.released and buf.name == name and buf.size == 64
    with pytest.raises(ValueError, match="released"):
        memoryview(buf)
    with pytest.raises(ValueError, match="released"):
        buf.seal()
    with pytest.raises(ValueError, match="released"):
        buf.__dlpack__()
    assert "released" in repr(buf)


def test_context_manager_releases(client, name):
    with client.create(name, 64) as buf:
        assert client.stat(name).lease_count == 1
    assert buf.released
    with pytest.raises(memd.NotFoundError):  # The lease ended: an unsealed buffer goes.
        client.stat(name)


def test_garbage_collected_buffer_ends_its_lease(client, name):
    buf = client.create(name, 64)
    assert client.stat(name).lease_count == 1
    del buf
    with pytest.raises(memd.NotFoundError):  # The lease ended: an unsealed buffer goes.
        client.stat(name)


def test_buffer_outlives_its_client(daemon, name):
    c = memd.connect(daemon.socket_dir)
    buf = c.create(name, 64)
    c.close()
    memoryview(buf)[:2] = b"ok"
    buf.seal()
    buf.release()
    with memd.connect(daemon.socket_dir) as other:
        with other.open(name) as reader:
            assert bytes(memoryview(reader)[:2]) == b"ok"
        other.unlink(name)


def test_buffers_cannot_be_constructed_directly():
    with pytest.raises(TypeError):
        memd.Buffer()


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed")
def test_torch_without_torch_is_import_error(client, name):
    with client.create_array(name, (4,), "bfloat16") as buf:
        with pytest.raises(ImportError):
            buf.torch()
        with pytest.raises(ValueError, match="bfloat16 has no numpy dtype"):
            buf.numpy()
        assert buf.numpy(dtype="uint16").shape == (4,)


def test_advise_moves_a_buffer_opened_only_away_from_its_home(client, name):
    """Usage and advice end to end (issue 25), through memd_advise_json: a
    host buffer opened 16 times in pinned memory only is a move there."""
    prefix = name + "/"
    with client.create(prefix + "0", 4096) as buf:
        buf.seal()
    assert client.advise(prefix) == []
    for _ in range(16):
        client.open(prefix + "0", location="pinned").release()
    advice = client.advise(prefix)
    assert [(r.subject, r.action, r.locations) for r in advice] == [
        (prefix, "move", ("pinned",))]
    assert "16" in advice[0].evidence
    assert client.advise(prefix + "nothing/") == []


def test_leaks_report_a_buffer_nobody_opened_and_a_session_holding_many(client, name):
    """The leak report end to end (issue 26), through memd_leaks_json: a
    sealed buffer nobody opened shows once it is older than older_than
    (polled: the smallest age the C API asks for is a second), and this
    session, holding one lease, shows when the mark is one."""
    with client.create(name, 4096) as buf:
        buf.seal()
    deadline = time.monotonic() + 30
    while True:
        report = client.leaks(older_than=1)
        found = [leak for leak in report.leaks if leak.subject == name]
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert isinstance(report, memd.LeakReport) and report.omitted == 0
    assert [(leak.kind, leak.uid, leak.bytes, leak.pid) for leak in found] == [
        ("never_opened", os.geteuid(), 4096, os.getpid())]
    assert isinstance(found[0], memd.Leak) and found[0].age >= 1.0
    assert "never opened" in found[0].evidence
    # An hour (the default) is far off for everything this run made.
    assert [leak for leak in client.leaks().leaks if leak.subject == name] == []

    mine = f"session {client.session_id} ("
    with client.create(name + "/held", 4096):
        held = [leak for leak in client.leaks(many_leases=1).leaks
                if leak.subject.startswith(mine)]
        assert [(leak.kind, leak.pid) for leak in held] == [("many_leases", os.getpid())]
        assert "1 leases held" in held[0].evidence
    assert [leak for leak in client.leaks(many_leases=1).leaks
            if leak.subject.startswith(mine)] == []

    with pytest.raises(ValueError):
        client.leaks(older_than=-1)
    with pytest.raises(memd.InvalidArgumentError, match="3650 days"):
        client.leaks(older_than=3651 * 86400)
