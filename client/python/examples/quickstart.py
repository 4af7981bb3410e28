"""memd quickstart: one process writes a float32 array into a named buffer,
another maps it read-only, zero-copy. Needs a running memd (found through
$MEMD_SOCKET_DIR, or the default socket directory)."""

import multiprocessing
import sys

import numpy as np

import memd

NAME = "quickstart/frame"


def consumer():
    with memd.connect() as client:
        with client.open(NAME, timeout=10.0) as buf:  # Waits for the seal.
            frame = buf.numpy()  # (480, 640) float32 from the attributes; read-only.
            print(f"consumer read {frame.size} floats, sum {frame.sum()}, "
                  f"zero-copy: {np.shares_memory(frame, np.asarray(buf))}")


if __name__ == "__main__":
    reader = multiprocessing.get_context("spawn").Process(target=consumer)
    reader.start()
    with memd.connect() as client:
        with client.create_array(NAME, (480, 640), "float32") as buf:
            buf.numpy()[:] = 1.0  # Writes the shared memory itself.
            buf.seal()            # Contents final: the consumer wakes.
        reader.join()
        client.unlink(NAME)
    sys.exit(reader.exitcode)
