"""memd quickstart: one process writes a float32 array into a named buffer,
another maps it read-only, zero-copy. Needs a running memd (found through
$MEMD_SOCKET_DIR, or the default socket directory) and nothing but the memd
package: numpy and torch work on the same buffers (buf.numpy(), buf.torch())
but are not needed here."""

import multiprocessing
import sys
from array import array

import memd

NAME = "quickstart/frame"
SHAPE = (480, 640)


def consumer():
    with memd.connect() as client:
        with client.open(NAME, timeout=10.0) as buf:  # Waits for the seal.
            frame = memoryview(buf).cast("f", SHAPE)  # Read-only: the buffer is sealed.
            total = sum(memoryview(buf).cast("f"))
            print(f"consumer read {SHAPE[0] * SHAPE[1]} floats, sum {total}, "
                  f"zero-copy: {frame.obj is buf and frame.readonly}")
            frame.release()


if __name__ == "__main__":
    reader = multiprocessing.get_context("spawn").Process(target=consumer)
    reader.start()
    with memd.connect() as client:
        with client.create_array(NAME, SHAPE, "float32") as buf:
            with memoryview(buf).cast("f") as floats:
                floats[:] = array("f", [1.0]) * len(floats)  # Writes the shared memory itself.
            buf.seal()  # Contents final: the consumer wakes.
        reader.join()
        client.unlink(NAME)
    sys.exit(reader.exitcode)
