#!/usr/bin/env python3
"""The headline: N worker processes that each need the same model weights on
the GPU. Through memd, one copy lives on the GPU and every worker's tensors
are views of it (memd.safetensors.load); without it, each worker loads the
file itself (safetensors.torch.load_file, device="cuda:0").

    PYTHONPATH=... python3 tests/bench/weights_bench.py --memd BIN --memctl BIN \
        [--gib 4 | --mib M] [--workers 1,8] [--json OUT] [--fake-cuda LIB]

For each N it records "all ready": seconds from the start signal until the
last worker holds its tensors on the GPU with one value checked, and the GPU
memory used: what the workers' loads took (device free memory at the start
signal minus at all-ready) and what the model holds on the device in all at
all-ready (from before the run's memctl put, if any); and memd's pool at
device:0 at all-ready (memctl stats: used, its buffers; reserved, what it
holds of the device, free segments included). Before each run the
model's buffers of the run before are unlinked and memd's device pool is
trimmed, so every run starts from a device without them. Workers import
torch and make their CUDA context before the signal, so that neither path is
charged for it. memd runs twice: "memd cold" (no buffer yet: the N workers
race, one loads, the rest wait for its seal) and "memd warm" (loaded
beforehand with memctl put --format safetensors, which is timed too). Needs
an NVIDIA GPU, PyTorch with CUDA, numpy, and the safetensors package for
the baseline (skipped, and said so, without it). docs/benchmarks.md records
the figures.

--fake-cuda LIB runs the same three paths on the project's fake CUDA driver
(tests/fake_cuda, build/lib/libmemd_fake_cuda.so) with no GPU and no torch:
memd serves device:0 from the fake, and each worker drives the fake itself
through ctypes. A memd worker makes the call memd.safetensors.load makes
(the same attach-or-load), without the torch views (torch cannot view
device memory without CUDA), and reads the checked value back with
cuMemcpyDtoH; a baseline worker reads each tensor of the file into its own
memory and copies it into its own cuMemAlloc allocation with cuMemcpyHtoD,
as safetensors.torch.load_file does on a GPU. Device memory comes from the
fake's own accounting, which is per process: memd's (memctl devices) plus
each worker's (cuMemGetInfo). It checks the logic (one copy for N workers,
who waits for whom), not the GPU's link: the fake's copies are memmoves.
tests/python/test_weights_bench.py runs it small as a ctest."""

import argparse
import ctypes
import json
import multiprocessing as mp
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

# The memd starter of the Python tests (beside this directory, here and in
# the GPU bundle).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from memd_daemon import Daemon  # noqa: E402

MODES = ("baseline", "memd cold", "memd warm")
# The value every worker reads back: element 1020 of the first tensor.
CHECKED_ELEMENT = 1020
FAKE_BASELINE = ("each worker reads every tensor of the file into its own memory and copies "
                 "it into its own cuMemAlloc allocation of the fake driver (cuMemcpyHtoD), as "
                 "safetensors.torch.load_file does on a GPU: N copies")


def write_model(path, nbytes, tensors):
    """A safetensors file of `tensors` fp16 tensors, `nbytes` of data in all."""
    import numpy as np
    elements = nbytes // 2 // tensors
    header, offset = {}, 0
    for i in range(tensors):
        header[f"layers.{i}.weight"] = {"dtype": "F16", "shape": [elements],
                                        "data_offsets": [offset, offset + 2 * elements]}
        offset += 2 * elements
    text = json.dumps(header).encode()
    text += b" " * (-(8 + len(text)) % 8)
    chunk = (np.arange(1 << 24) % 1021).astype(np.float16).tobytes()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        left = offset
        while left:
            piece = chunk[:min(len(chunk), left)]
            f.write(piece)
            left -= len(piece)
    return elements


class FakeCuda:
    """The fake CUDA driver in a worker, through ctypes: this process's
    device 0 with its primary context current (the one libmemd imports
    into; dlopen of the same path gives libmemd the same instance)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self.lib.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        self.lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        self._check("cuInit", self.lib.cuInit(0))
        device, context = ctypes.c_int(), ctypes.c_void_p()
        self._check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(device), 0))
        self._check("cuDevicePrimaryCtxRetain",
                    self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
        self._check("cuCtxSetCurrent", self.lib.cuCtxSetCurrent(context))

    @staticmethod
    def _check(call, code):
        if code != 0:
            raise RuntimeError(f"fake CUDA driver: {call} returned {code}")

    def used_bytes(self):
        """Device 0's memory this process allocated (the fake counts per
        process; imports of another process's memory do not count)."""
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self._check("cuMemGetInfo_v2",
                    self.lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)))
        return total.value - free.value

    def upload(self, host):
        """A new allocation holding the bytes of `host` (a bytearray)."""
        pointer = ctypes.c_uint64()
        self._check("cuMemAlloc_v2", self.lib.cuMemAlloc_v2(ctypes.byref(pointer), len(host)))
        source = (ctypes.c_char * len(host)).from_buffer(host)
        self._check("cuMemcpyHtoD_v2",
                    self.lib.cuMemcpyHtoD_v2(pointer.value, ctypes.addressof(source), len(host)))
        return pointer.value

    def read_f16(self, pointer):
        out = ctypes.create_string_buffer(2)
        self._check("cuMemcpyDtoH_v2", self.lib.cuMemcpyDtoH_v2(out, pointer, 2))
        return struct.unpack("<e", out.raw)[0]


def load_fake_baseline(path, cuda):
    """{name: device pointer}: every tensor read from the file and copied
    into an allocation of this process's own."""
    weights = {}
    with open(path, "rb", buffering=0) as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        header.pop("__metadata__", None)
        for name, entry in header.items():
            begin, end = entry["data_offsets"]
            f.seek(8 + length + begin)
            host = bytearray(end - begin)
            if f.readinto(host) != len(host):
                raise RuntimeError(f"{path}: short read of {name}")
            weights[name] = cuda.upload(host)
    return weights


def worker(mode, path, socket_dir, device, fake_cuda, ready, start, results):
    cuda = None
    if fake_cuda:
        cuda = FakeCuda(fake_cuda)  # The context: made before the signal.
    else:
        import torch
        if device != "cpu":
            torch.zeros(1, device=device)  # The CUDA context: made before the signal.
    import memd
    import memd.safetensors
    if mode == "baseline" and not fake_cuda:
        from safetensors.torch import load_file
    used_before = cuda.used_bytes() if cuda else 0
    ready.wait()
    start.wait()
    try:
        if cuda is None:
            if mode == "baseline":
                weights = load_file(path, device=device)
            else:
                client = memd.connect(socket_dir)
                weights = memd.safetensors.load(path, device=device, client=client)
            first = weights["layers.0.weight"]
            value = float(first[CHECKED_ELEMENT].float())  # Forces the tensor to be there.
            if device != "cpu":
                torch.cuda.synchronize()
            pointer = first.data_ptr()
        elif mode == "baseline":
            weights = load_fake_baseline(path, cuda)
            pointer = weights["layers.0.weight"]
            value = cuda.read_f16(pointer + 2 * CHECKED_ELEMENT)
        else:
            client = memd.connect(socket_dir)
            with open(path, "rb", buffering=0) as file:
                # What memd.safetensors.load does before it makes torch views.
                buffer, header = memd.safetensors._attach_or_load(
                    client, path, file, "device:0", 0o600, 600.0)
            first = next(t for t in header.tensors if t.name == "layers.0.weight")
            pointer = buffer.device_pointer + first.offset
            value = cuda.read_f16(pointer + 2 * CHECKED_ELEMENT)
        own_bytes = cuda.used_bytes() - used_before if cuda else 0
        results.put((time.time(), value, pointer, own_bytes, None))
    except Exception as error:  # noqa: BLE001 - the parent reports it.
        results.put((time.time(), None, 0, 0, f"{type(error).__name__}: {error}"))
    start.wait()  # Hold the tensors until the parent has measured memory.


class DeviceMemory:
    """Bytes in use on device 0 across the node's processes: the device's
    own count on a GPU (torch), memd's count on the fake driver (whose
    accounting is per process: the workers add their own)."""

    def __init__(self, device, fake_cuda, memctl, socket_dir):
        self.device, self.fake_cuda = device, fake_cuda
        self.memctl, self.socket_dir = memctl, socket_dir
        self.location = "host" if device == "cpu" else "device:0"

    def pool(self):
        """memd's pool at the model's location (memctl stats): used_bytes
        (its buffers) and reserved_bytes (what it holds of the device,
        free segments included)."""
        out = subprocess.run([self.memctl, "--socket-dir", self.socket_dir, "stats", "--json"],
                             capture_output=True, text=True, check=True).stdout
        for pool in json.loads(out)["pools"]:
            if pool["location"] == self.location:
                return pool
        return {"used_bytes": 0, "reserved_bytes": 0}

    def used(self):
        if self.fake_cuda:
            out = subprocess.run([self.memctl, "--socket-dir", self.socket_dir, "devices",
                                  "--json"], capture_output=True, text=True, check=True).stdout
            gpu = json.loads(out)[0]
            return gpu["total_bytes"] - gpu["free_bytes"]
        if self.device == "cpu":
            return 0
        import torch
        free, total = torch.cuda.mem_get_info(0)
        return total - free


def _watch(procs, barriers, done):
    """Breaks the barriers when a worker dies before it reached them (an
    import or the driver failed), so that the parent fails at once instead
    of at its timeout."""
    while not done.wait(0.1):
        if any(p.exitcode not in (None, 0) for p in procs):
            for barrier in barriers:
                barrier.abort()
            return


def run(mode, workers, path, socket_dir, device, fake_cuda, memory, used_at_start,
        timeout=600):
    ctx = mp.get_context("spawn")
    ready, start, results = ctx.Barrier(workers + 1), ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(mode, path, socket_dir, device, fake_cuda,
                                              ready, start, results))
             for _ in range(workers)]
    for p in procs:
        p.start()
    watching = threading.Event()
    watcher = threading.Thread(target=_watch, args=(procs, (ready, start), watching), daemon=True)
    watcher.start()
    try:
        ready.wait(timeout=timeout)
        time.sleep(0.5)  # Let the workers reach the start barrier (not timed).
        used_at_signal = memory.used()
        t0 = time.time()
        start.wait(timeout=timeout)
        got = [results.get(timeout=timeout) for _ in range(workers)]
        errors = [e for *_, e in got if e]
        if errors:
            raise RuntimeError(f"{mode}, {workers} workers: {errors[0]}")
        all_ready = max(t for t, *_ in got) - t0
        used_after = memory.used() + sum(own for _, _, _, own, _ in got)
        pool = memory.pool()
        start.wait(timeout=timeout)
    except BaseException:
        ready.abort()
        start.abort()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
        raise
    finally:
        watching.set()
    for p in procs:
        p.join(timeout=120)
    values = {v for _, v, *_ in got}
    pointers = len({ptr for _, _, ptr, *_ in got})
    return {"mode": mode, "workers": workers, "all_ready_s": round(all_ready, 4),
            "gpu_bytes_used": used_after - used_at_signal,
            "gpu_bytes_held": used_after - used_at_start,
            "worker_gpu_bytes": sorted(own for _, _, _, own, _ in got),
            "memd_pool_used_bytes": pool["used_bytes"],
            "memd_pool_reserved_bytes": pool["reserved_bytes"],
            "values": sorted(values), "distinct_pointers": pointers,
            "exit_codes": [p.exitcode for p in procs]}


def bench(memd_bin, memctl, nbytes, tensors, workers, device="cuda:0", fake_cuda=None,
          log=print, timeout=600):
    """Runs every path for each N in `workers`; returns the report (the
    JSON --json writes)."""
    if fake_cuda:
        fake_cuda = os.path.abspath(fake_cuda)
        device = "device:0"
        modes = list(MODES)
        # libmemd in the workers imports device memory through the fake.
        os.environ["MEMD_CUDA_DRIVER"] = fake_cuda
        report = {"gpu": f"none: memd's fake CUDA driver ({fake_cuda})",
                  "baseline": FAKE_BASELINE}
    else:
        import torch
        if device != "cpu" and not torch.cuda.is_available():
            sys.exit("weights_bench: needs a CUDA GPU (or --device cpu, or --fake-cuda)")
        try:
            import safetensors  # noqa: F401
            modes = list(MODES)
        except ImportError:
            log("weights_bench: no safetensors package: the baseline is skipped")
            modes = list(MODES[1:])
        report = {"gpu": torch.cuda.get_device_name(0) if device != "cpu" else "none",
                  "torch": torch.__version__,
                  "baseline": "each worker calls safetensors.torch.load_file(device=...)"}
    location = "host" if device == "cpu" else "device:0"
    report.update({"python": sys.version.split()[0], "model_bytes": nbytes, "tensors": tensors,
                   "runs": []})
    directory = tempfile.mkdtemp(prefix="memd-weights-")
    daemon = None
    try:
        path = os.path.join(directory, "model.safetensors")
        write_model(path, nbytes, tensors)
        report["file_bytes"] = os.path.getsize(path)
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # Page cache.
        backend = ["--backend", "host"] if device == "cpu" else ["--backend", "cuda"]
        if fake_cuda:
            backend += ["--cuda-driver", fake_cuda]
        daemon = Daemon(*backend, memd_bin=memd_bin)
        socket_dir = daemon.socket_dir
        memory = DeviceMemory(device, fake_cuda, memctl, socket_dir)
        for n in workers:
            for mode in modes:
                # Every run starts from a device without the model: the run
                # before's buffer unlinked and its pool memory given back.
                for name in _buffers(memctl, socket_dir):
                    subprocess.run([memctl, "--socket-dir", socket_dir, "unlink", name],
                                   check=True, capture_output=True)
                subprocess.run([memctl, "--socket-dir", socket_dir, "trim", location],
                               check=True, capture_output=True)
                used_at_start = memory.used()
                if mode == "memd warm":
                    t0 = time.time()
                    put = subprocess.run([memctl, "--socket-dir", socket_dir, "put",
                                          "--format", "safetensors", "--location", location,
                                          "--json", path], capture_output=True, text=True)
                    if put.returncode != 0:
                        raise RuntimeError(put.stderr)
                    report["runs"].append({"mode": "memctl put", "workers": 0,
                                           "wall_s": round(time.time() - t0, 3),
                                           "report": json.loads(put.stdout)})
                result = run(mode, n, path, socket_dir, device, fake_cuda, memory,
                             used_at_start, timeout=timeout)
                log(json.dumps(result))
                report["runs"].append(result)
    finally:
        if daemon is not None:
            daemon.stop()
        shutil.rmtree(directory, ignore_errors=True)
    return report


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memd", required=True)
    parser.add_argument("--memctl", required=True)
    parser.add_argument("--gib", type=int, default=4)
    parser.add_argument("--mib", type=int, default=None, help="the model's size in MiB (not --gib)")
    parser.add_argument("--tensors", type=int, default=8)
    parser.add_argument("--workers", default="1,8")
    parser.add_argument("--json", default=None)
    parser.add_argument("--device", default="cuda:0",
                        help="cuda:0; cpu tries the script out on a machine without a GPU")
    parser.add_argument("--fake-cuda", default=None, metavar="LIB",
                        help="run on the project's fake CUDA driver (no GPU, no torch): "
                             "build/lib/libmemd_fake_cuda.so")
    args = parser.parse_args()
    nbytes = (args.mib << 20) if args.mib is not None else (args.gib << 30)
    report = bench(args.memd, args.memctl, nbytes, args.tensors,
                   [int(n) for n in args.workers.split(",")], device=args.device,
                   fake_cuda=args.fake_cuda, log=lambda line: print(line, flush=True))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))


def _buffers(memctl, socket_dir):
    out = subprocess.run([memctl, "--socket-dir", socket_dir, "ls", "--json"],
                         capture_output=True, text=True, check=True).stdout
    listing = json.loads(out) if out.strip() else []
    if isinstance(listing, dict):
        listing = listing.get("buffers", [])
    return [b["name"] for b in listing if b["name"].startswith("safetensors/")]


if __name__ == "__main__":
    main()
