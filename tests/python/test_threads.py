"""Blocking calls release the GIL: another Python thread runs meanwhile."""

import threading
import time

import pytest

import memd


def test_open_waiting_for_a_name_lets_other_threads_run(client, name):
    count = 0
    stop = threading.Event()

    def spin():
        nonlocal count
        while not stop.is_set():
            count += 1

    thread = threading.Thread(target=spin)
    thread.start()
    try:
        start_count = count
        started = time.monotonic()
        with pytest.raises(memd.DeadlineExceededError):
            client.open(name, timeout=1.0)
        waited = time.monotonic() - started
        during = count - start_count
    finally:
        stop.set()
        thread.join()
    assert waited >= 0.9
    # Holding the GIL for the wait, the main thread would leave the spinner
    # a switch interval (5 ms, some 10^4 turns) at most.
    assert during > 200_000, during


def test_a_thread_may_release_a_buffer_while_another_seals_it(client, name):
    # The seal's RPC runs without the GIL; a release() arriving meanwhile
    # waits for it instead of destroying the lease under it.
    for i in range(50):
        buf = client.create(f"{name}/{i}", 4096)
        errors = []

        def seal():
            try:
                buf.seal()
            except (memd.Error, ValueError) as e:  # Released first: fine.
                errors.append(e)

        thread = threading.Thread(target=seal)
        thread.start()
        buf.release()
        thread.join()
        assert buf.released
        if errors:  # The release came first: the unsealed buffer went with it.
            with pytest.raises(memd.NotFoundError):
                client.stat(f"{name}/{i}")
        else:
            info = client.stat(f"{name}/{i}")
            assert info.state == "sealed" and info.lease_count == 0
            client.unlink(f"{name}/{i}")


def _poll(condition, what, seconds=30.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_close_while_a_call_waits_ends_the_session_after_that_call(client, daemon, name):
    closing = memd.connect(daemon.socket_dir)
    session = closing.session_id
    outcome = {}

    def wait_for_the_name():
        try:
            with closing.open(name, timeout=30.0) as buf:
                outcome["read"] = bytes(memoryview(buf)[:2])
        except Exception as error:  # noqa: BLE001 - reported below.
            outcome["error"] = error

    waiter = threading.Thread(target=wait_for_the_name)
    waiter.start()
    _poll(lambda: client.stats().waits >= 1, "the open to wait in the daemon")
    closing.close()  # The call in flight holds the session.
    with pytest.raises(ValueError, match="closed"):
        closing.ping()
    assert session in [s.id for s in client.sessions()]
    with client.create(name, 64) as buf:
        memoryview(buf)[:2] = b"ok"
        buf.seal()
    waiter.join(timeout=30)
    assert outcome == {"read": b"ok"}
    # The last call returned: the session ends with it.
    _poll(lambda: session not in [s.id for s in client.sessions()], "the session to end")
