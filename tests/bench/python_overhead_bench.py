#!/usr/bin/env python3
"""What the Python layer costs over libmemd's C API: open (and release) of a
sealed host buffer whose mapping the client keeps cached, timed call by call
through memd.Client.open and through the C API itself (ctypes, the same
library in the same process), interleaved so that both see the same noise.

    PYTHONPATH=build/python python3 tests/bench/python_overhead_bench.py \
        (--memd build/bin/memd | --socket-dir DIR) [--rounds 20000]

Starts a host-backend memd of its own with --memd, else uses the one at DIR
(or $MEMD_SOCKET_DIR). Prints p50/p99 of each
path and of the difference, in microseconds (docs/benchmarks.md records
them)."""

import argparse
import ctypes
import os
import statistics
import sys
import time

# The memd starter of the Python tests (beside this directory, here and in
# the GPU bundle).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from memd_daemon import Daemon  # noqa: E402

import memd
from memd import _capi


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket-dir", default=None)
    parser.add_argument("--memd", default=None, help="start this memd (host backend)")
    parser.add_argument("--rounds", type=int, default=20000)
    args = parser.parse_args()
    if args.memd:
        daemon = Daemon("--backend", "host", memd_bin=args.memd)
        try:
            measure(daemon.socket_dir, args.rounds)
        finally:
            daemon.stop()
    else:
        measure(args.socket_dir, args.rounds)


def measure(socket_dir, rounds):
    client = memd.connect(socket_dir)
    name = f"bench/python-overhead/{time.time_ns()}"
    with client.create(name, 1 << 20, persistent=False) as writer:
        writer.seal()
        lib = _capi.lib
        options = _capi.OpenOptions(_capi.OPEN_OPTIONS_SIZE, 0, 0, 0, -1)
        raw_name = name.encode()
        handle = client._handle()

        clock = time.perf_counter_ns

        def c_open_release():
            buffer = _capi.BufferP()
            start = clock()
            if lib.memd_open(handle, raw_name, ctypes.byref(options), ctypes.byref(buffer),
                             None) != 0:
                raise RuntimeError("memd_open failed")
            opened = clock()
            lib.memd_buffer_release(buffer, None)
            return opened - start, clock() - opened

        def python_open_release():
            start = clock()
            buf = client.open(name)
            opened = clock()
            buf.release()
            del buf  # Its finalizer is part of the cost.
            return opened - start, clock() - opened

        for _ in range(500):  # Warm-up: the mapping is cached from here on.
            c_open_release()
            python_open_release()
        c_times, python_times = [], []
        for _ in range(rounds):
            c_times.append(c_open_release())
            python_times.append(python_open_release())
    client.close()

    def us(ns):
        return ns / 1000.0

    print(f"rounds {rounds}; a sealed 1 MiB host buffer whose mapping the client caches")
    for index, call in ((0, "open"), (1, "release")):
        c = [t[index] for t in c_times]
        p = [t[index] for t in python_times]
        c50, c99 = percentile(c, 0.5), percentile(c, 0.99)
        p50, p99 = percentile(p, 0.5), percentile(p, 0.99)
        print(f"{call:8} C API (ctypes) p50 {us(c50):7.1f} us p99 {us(c99):7.1f} us | "
              f"memd.Client p50 {us(p50):7.1f} us p99 {us(p99):7.1f} us | "
              f"Python layer p50 {us(p50 - c50):5.1f} us (x{p50 / c50:.3f}), median of "
              f"per-round differences {us(statistics.median(a - b for a, b in zip(p, c))):5.1f} us")


if __name__ == "__main__":
    main()
