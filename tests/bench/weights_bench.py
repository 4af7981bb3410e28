#!/usr/bin/env python3
"""The headline: N worker processes that each need the same model weights on
the GPU. Through memd, one copy lives on the GPU and every worker's tensors
are views of it (memd.safetensors.load); without it, each worker loads the
file itself (safetensors.torch.load_file, device="cuda:0").

    PYTHONPATH=... python3 tests/bench/weights_bench.py --memd BIN --memctl BIN \
        [--gib 4] [--workers 1,8] [--json OUT]

For each N it records "all ready": seconds from the start signal until the
last worker holds its tensors on the GPU with one value checked, and the GPU
memory the workers' loads took (device free memory at the start signal minus
at all-ready). Workers import torch and make their CUDA context before the
signal, so that neither path is charged for it. memd runs twice: "memd cold"
(no buffer yet: the N workers race, one loads, the rest wait for its seal)
and "memd warm" (loaded beforehand with memctl put --format safetensors,
which is timed too). Needs an NVIDIA GPU, PyTorch with CUDA, numpy, and the
safetensors package for the baseline (skipped, and said so, without it).
docs/benchmarks.md records the figures."""

import argparse
import json
import multiprocessing as mp
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

# The memd starter of the Python tests (beside this directory, here and in
# the GPU bundle).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from memd_daemon import Daemon  # noqa: E402


def write_model(path, gib, tensors):
    """A safetensors file of `tensors` fp16 tensors, `gib` GiB in all."""
    import numpy as np
    elements = (gib << 30) // 2 // tensors
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


def worker(mode, path, socket_dir, device, ready, start, results):
    import torch
    if device != "cpu":
        torch.zeros(1, device=device)  # The CUDA context: made before the signal.
    import memd.safetensors
    if mode == "baseline":
        from safetensors.torch import load_file
    ready.wait()
    start.wait()
    if mode == "baseline":
        weights = load_file(path, device=device)
    else:
        client = memd.connect(socket_dir)
        weights = memd.safetensors.load(path, device=device, client=client)
    first = weights["layers.0.weight"]
    value = float(first[1020].float())  # Forces the tensor to be there.
    if device != "cpu":
        torch.cuda.synchronize()
    results.put((time.time(), value, first.data_ptr()))
    start.wait()  # Hold the tensors until the parent has measured memory.


def free_gpu_bytes(device):
    import torch
    return torch.cuda.mem_get_info(0)[0] if device != "cpu" else 0


def run(mode, workers, path, socket_dir, device):
    ctx = mp.get_context("spawn")
    ready, start, results = ctx.Barrier(workers + 1), ctx.Barrier(workers + 1), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(mode, path, socket_dir, device, ready, start, results))
             for _ in range(workers)]
    for p in procs:
        p.start()
    ready.wait()
    time.sleep(0.5)  # Let the workers reach the start barrier (not timed).
    free_before = free_gpu_bytes(device)
    t0 = time.time()
    start.wait()
    got = [results.get(timeout=600) for _ in range(workers)]
    all_ready = max(t for t, _, _ in got) - t0
    free_after = free_gpu_bytes(device)
    start.wait()
    for p in procs:
        p.join(timeout=120)
    values = {v for _, v, _ in got}
    pointers = len({ptr for _, _, ptr in got})
    return {"mode": mode, "workers": workers, "all_ready_s": round(all_ready, 4),
            "gpu_bytes_used": free_before - free_after, "values": sorted(values),
            "distinct_pointers": pointers,
            "exit_codes": [p.exitcode for p in procs]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memd", required=True)
    parser.add_argument("--memctl", required=True)
    parser.add_argument("--gib", type=int, default=4)
    parser.add_argument("--tensors", type=int, default=8)
    parser.add_argument("--workers", default="1,8")
    parser.add_argument("--json", default=None)
    parser.add_argument("--device", default="cuda:0",
                        help="cuda:0; cpu tries the script out on a machine without a GPU")
    args = parser.parse_args()
    import torch
    if args.device != "cpu" and not torch.cuda.is_available():
        sys.exit("weights_bench: needs a CUDA GPU (or --device cpu)")
    try:
        import safetensors  # noqa: F401
        modes = ["baseline", "memd cold", "memd warm"]
    except ImportError:
        print("weights_bench: no safetensors package: the baseline is skipped")
        modes = ["memd cold", "memd warm"]
    directory = tempfile.mkdtemp(prefix="memd-weights-")
    report = {"gpu": torch.cuda.get_device_name(0) if args.device != "cpu" else "none", "torch": torch.__version__,
              "python": sys.version.split()[0], "gib": args.gib, "runs": []}
    daemon = None
    try:
        path = os.path.join(directory, "model.safetensors")
        write_model(path, args.gib, args.tensors)
        subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # Page cache.
        daemon = Daemon("--backend", "host" if args.device == "cpu" else "cuda",
                        memd_bin=args.memd)
        socket_dir = daemon.socket_dir
        for workers in [int(n) for n in args.workers.split(",")]:
            for mode in modes:
                for name in _buffers(args.memctl, socket_dir):
                    subprocess.run([args.memctl, "--socket-dir", socket_dir, "unlink", name],
                                   check=True, capture_output=True)
                if mode == "memd warm":
                    t0 = time.time()
                    put = subprocess.run([args.memctl, "--socket-dir", socket_dir, "put",
                                          "--format", "safetensors", "--location",
                                          "host" if args.device == "cpu" else "device:0",
                                          "--json", path], capture_output=True, text=True)
                    if put.returncode != 0:
                        raise RuntimeError(put.stderr)
                    report["runs"].append({"mode": "memctl put", "workers": 0,
                                           "wall_s": round(time.time() - t0, 3),
                                           "report": json.loads(put.stdout)})
                result = run(mode, workers, path, socket_dir, args.device)
                print(json.dumps(result), flush=True)
                report["runs"].append(result)
    finally:
        if daemon is not None:
            daemon.stop()
        shutil.rmtree(directory, ignore_errors=True)
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
