"""Across processes: a producer process writes an array, a consumer process
reads it zero-copy; a Buffer travels through a multiprocessing queue."""

import multiprocessing
import os

import numpy as np

import helpers

SPAWN = multiprocessing.get_context("spawn")


def _result(queue, process, what):
    kind, value = queue.get(timeout=60)
    process.join(timeout=60)
    assert kind == what, value
    assert process.exitcode == 0
    return value


def test_producer_process_to_consumer_process_zero_copy(client, name):
    queue = SPAWN.Queue()
    # The consumer starts first and waits for the seal.
    consumer = SPAWN.Process(target=helpers.consume, args=(name, queue))
    consumer.start()
    producer_queue = SPAWN.Queue()
    producer = SPAWN.Process(target=helpers.produce, args=(name, (64, 32), producer_queue))
    producer.start()
    assert _result(producer_queue, producer, "produced") == name
    report = _result(queue, consumer, "consumed")
    assert report == {
        "shape": (64, 32),
        "dtype": "float32",
        "writeable": False,
        "shares_memory": True,
        "in_memd_mapping": True,
        "equal": True,
    }
    info = client.stat(name)
    assert info.state == "sealed" and info.lease_count == 0 and info.creator_pid != os.getpid()


def test_buffer_travels_through_a_queue_by_name(client, name):
    with client.create(name, 1000) as buf:
        np.asarray(buf)[:] = 3
        buf.seal()
        to_child, from_child = SPAWN.Queue(), SPAWN.Queue()
        child = SPAWN.Process(target=helpers.receive_pickled, args=(to_child, from_child))
        child.start()
        to_child.put(buf)  # Pickled by name: the child opens it again.
        report = _result(from_child, child, "received")
    assert report == {
        "type": "Buffer",
        "name": name,
        "writable": False,
        "readonly": True,
        "sum": 3000,
        "owner": os.getuid(),
    }


def test_pickle_in_process_reopens_read_only(client, name):
    import pickle

    with client.create(name, 16) as buf:
        np.asarray(buf)[:] = 7
        buf.seal()
        again = pickle.loads(pickle.dumps(buf))
        assert again is not buf and again.name == name and not again.writable
        assert again.lease_id != buf.lease_id
        assert np.asarray(again).tolist() == [7] * 16
        again.release()
