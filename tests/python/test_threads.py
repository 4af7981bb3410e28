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
