"""Code that runs in child processes (multiprocessing, spawn), which find
this directory (conftest's helpers included) on the path they inherit. Each
function reports through a queue and raises nothing (a failure is reported
as a string)."""

from __future__ import annotations

import traceback

import numpy as np

import memd
from conftest import memd_mappings


def produce(name: str, shape, queue) -> None:
    """Writes np.arange into a new array buffer through numpy(), seals it."""
    try:
        with memd.connect() as client:
            with client.create_array(name, shape, "float32") as buf:
                array = buf.numpy()
                array[...] = np.arange(array.size, dtype=np.float32).reshape(shape)
                del array  # A live writable view would refuse the seal.
                buf.seal()
        queue.put(("produced", name))
    except Exception:
        queue.put(("error", traceback.format_exc()))


def consume(name: str, queue) -> None:
    """Opens `name`, reads it zero-copy and reports what it saw."""
    try:
        with memd.connect() as client:
            with client.open(name, timeout=10.0) as buf:
                array = buf.numpy()
                address = array.__array_interface__["data"][0]
                report = {
                    "shape": array.shape,
                    "dtype": str(array.dtype),
                    "writeable": bool(array.flags.writeable),
                    "shares_memory": bool(np.shares_memory(array, np.asarray(buf))),
                    "in_memd_mapping": any(s <= address < e for s, e in memd_mappings()),
                    "equal": bool(np.array_equal(
                        array, np.arange(array.size, dtype=np.float32).reshape(array.shape))),
                }
                del array
        queue.put(("consumed", report))
    except Exception:
        queue.put(("error", traceback.format_exc()))


def receive_pickled(queue_in, queue_out) -> None:
    """Gets a Buffer through a queue (unpickled: reopened by name) and reports."""
    try:
        buf = queue_in.get(timeout=30)
        report = {
            "type": type(buf).__name__,
            "name": buf.name,
            "writable": buf.writable,
            "readonly": buf.readonly,
            "sum": int(np.asarray(buf).sum()),
            "owner": buf.info.owner_uid,
        }
        buf.release()
        queue_out.put(("received", report))
    except Exception:
        queue_out.put(("error", traceback.format_exc()))
