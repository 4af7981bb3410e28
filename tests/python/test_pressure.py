"""Under memory pressure (issue 26): a buffer's retention says what memd may
take back when its location is full; a full host evicts the least recently
used unheld evictable buffer, whose name then says why it is gone."""

import pytest

import memd
from conftest import Daemon

MiB = 1 << 20


@pytest.fixture
def small_daemon():
    """A memd whose host pool holds four 2 MiB buffers."""
    daemon = Daemon("--backend", "host", "--host-pool-limit-bytes", str(8 * MiB))
    try:
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture
def small_host(small_daemon):
    with memd.connect(small_daemon.socket_dir) as client:
        yield client


def put(client, name, fill, retention="evictable"):
    with client.create(name, 2 * MiB, retention=retention) as buf:
        assert buf.info.retention == retention
        buf.numpy()[:] = fill
        buf.seal()


def test_a_full_host_evicts_the_least_recently_used_evictable_buffer(small_host):
    for i in range(4):
        put(small_host, f"p/{i}", i)
    with small_host.open("p/0"):  # Now p/1 is the least recently used.
        pass
    put(small_host, "p/4", 4)
    with pytest.raises(memd.NotFoundError, match="evicted at .* under memory pressure on host"):
        small_host.stat("p/1")
    with pytest.raises(memd.NotFoundError, match="evicted at"):
        small_host.open("p/1")
    (host,) = [pool for pool in small_host.stats().pools if pool.location == "host"]
    assert (host.evictions, host.evicted_bytes, host.demotions) == (1, 2 * MiB, 0)
    for i in (0, 2, 3, 4):
        info = small_host.stat(f"p/{i}")
        assert info.retention == "evictable"
        with small_host.open(f"p/{i}") as buf:
            assert int(buf.numpy()[0]) == i and int(buf.numpy()[-1]) == i


def test_pinned_and_held_buffers_stay_and_the_create_fails(small_host):
    put(small_host, "q/pinned", 1, retention="pinned")
    held = []
    for i in range(3):
        put(small_host, f"q/{i}", 2)
        held.append(small_host.open(f"q/{i}"))
    with pytest.raises(memd.ResourceExhaustedError, match="nothing could give way"):
        small_host.create("q/more", 2 * MiB, retention="evictable")
    assert small_host.stat("q/pinned").retention == "pinned"
    # list() carries every field too (memd_list_json), retention among them.
    assert {(i.name, i.retention) for i in small_host.list(prefix="q/")} == {
        ("q/pinned", "pinned"), ("q/0", "evictable"), ("q/1", "evictable"),
        ("q/2", "evictable")}
    for buf in held:
        buf.release()


def test_an_unknown_retention_is_invalid_argument(client, name):
    with pytest.raises(memd.InvalidArgumentError, match="unknown retention 'forever'"):
        client.create(name, 8, retention="forever")
    with pytest.raises(memd.InvalidArgumentError, match="a retention of 100 bytes"):
        client.create(name, 8, retention="x" * 100)
    assert client.list(prefix=name) == []


def test_a_create_waits_for_memory_and_a_killed_waiter_leaves_nothing(small_daemon, small_host):
    """wait_for_memory: past it, DeadlineExceededError with the numbers; a
    waiting process that is killed takes its wait with it."""
    import os
    import subprocess
    import sys
    import time

    for i in range(4):
        put(small_host, f"full/{i}", i, retention="pinned")
    with pytest.raises(memd.DeadlineExceededError, match="no room for buffer 'full/late'"):
        small_host.create("full/late", 2 * MiB, wait_for_memory=0.05)
    socket_dir = small_daemon.socket_dir
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, memd\n"
         "c = memd.connect(sys.argv[1])\n"
         "c.create('full/child', 2 << 20, wait_for_memory=600)\n", socket_dir],
        env=dict(os.environ))
    try:
        deadline = time.monotonic() + 30
        while small_host.stats().waits != 1:
            assert time.monotonic() < deadline, "the child's create never waited"
            time.sleep(0.01)
        (waiting,) = small_host.stats().memory_waits
        assert (waiting.location, waiting.calls, waiting.bytes) == ("host", 1, 2 * MiB)
    finally:
        child.kill()
        child.wait()
    deadline = time.monotonic() + 30
    while small_host.stats().waits != 0:
        assert time.monotonic() < deadline, "the killed child's wait stayed"
        time.sleep(0.01)
    # Its place is gone too: the next free room goes to a create that waits now.
    small_host.unlink("full/0")
    with small_host.create("full/late", 2 * MiB, wait_for_memory=5) as buf:
        assert buf.size == 2 * MiB
    # open_or_create waits for memory too, when it would create.
    put(small_host, "full/4", 4, retention="pinned")  # Full again.
    with pytest.raises(memd.DeadlineExceededError, match="no room for buffer 'full/either'"):
        small_host.open_or_create("full/either", 2 * MiB, wait_for_memory=0.05)
    small_host.unlink("full/1")
    with small_host.open_or_create("full/either", 2 * MiB, wait_for_memory=5) as buf:
        assert buf.created


def test_a_copy_waits_for_memory_at_a_full_location(small_host):
    """open(location=, wait_for_memory=) and prefetch(wait_for_memory=): the
    copy of a pinned buffer at the full host waits for room there."""
    import threading

    with small_host.create("src/pinned", 2 * MiB, location="pinned") as buf:
        buf.numpy()[:] = 7
        buf.seal()
    for i in range(4):
        put(small_host, f"full/{i}", i, retention="pinned")
    with pytest.raises(memd.ResourceExhaustedError):
        small_host.prefetch("src/pinned", "host")
    with pytest.raises(memd.DeadlineExceededError,
                       match="no room for a copy of buffer 'src/pinned' .* at host"):
        small_host.open("src/pinned", location="host", wait_for_memory=0.05)
    with pytest.raises(memd.InvalidArgumentError, match="needs a location"):
        small_host.open("src/pinned", wait_for_memory=1)

    done = {}
    prefetcher = threading.Thread(target=lambda: done.setdefault(
        "info", small_host.prefetch("src/pinned", "host", wait_for_memory=60)))
    prefetcher.start()
    try:
        import time
        deadline = time.monotonic() + 30
        while not small_host.stats().memory_waits:
            assert time.monotonic() < deadline, "the prefetch never waited for memory"
            time.sleep(0.01)
        (waiting,) = small_host.stats().memory_waits
        assert (waiting.location, waiting.calls, waiting.bytes) == ("host", 1, 2 * MiB)
        small_host.unlink("full/2")
    finally:
        prefetcher.join(60)
    assert [r.state for r in done["info"].replicas if r.location == "host"] == ["current"]
    with small_host.open("src/pinned", location="host", wait_for_memory=5) as copy:
        assert int(copy.numpy()[0]) == 7 and int(copy.numpy()[-1]) == 7
