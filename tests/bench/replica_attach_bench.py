"""N processes on M GPUs attach one model put once on the host (issue 25).

    python3 tests/bench/replica_attach_bench.py [--devices 2,4] [--per-device 4]
        [--mib 64] [--rounds 3] [--cuda-driver PATH]

Starts memd on the CUDA driver given (default: the project's fake,
build/lib/libmemd_fake_cuda.so), puts one sealed
host buffer, then starts --per-device memd-test-client processes per GPU at
once, each opening the buffer at its GPU (`device-consume-at`: the daemon
makes the copy there, or waits for the one being made) and checking every
byte. Per round it prints each attach's wall time (process start to exit,
p50 and p99), the round's total, and how many copies memd made (replicas
at the end, and transfers finished), which must be M: one per GPU, however
many processes. The first round makes the copies; later rounds find them.
Results: docs/benchmarks.md."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))
sys.path.insert(0, os.path.join(REPO, "client", "python"))

from memd_daemon import Daemon  # noqa: E402

BIN = os.environ.get("MEMD_BIN_DIR") or os.path.join(REPO, "build", "bin")


def percentile(samples, p):
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def memctl(socket_dir, *args):
    out = subprocess.run([os.path.join(BIN, "memctl"), "--socket-dir", socket_dir, *args],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out) if "--json" in args else out


def attach_round(socket_dir, env, name, size, devices, per_device):
    started = []
    for device in range(devices):
        for _ in range(per_device):
            started.append((time.monotonic(), subprocess.Popen(
                [os.path.join(BIN, "memd-test-client"), "device-consume-at", name, str(size),
                 "7", f"device:{device}"], env=env, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE)))
    times = []
    for start, process in started:
        out, err = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"attach failed ({process.returncode}): {out!r} {err!r}")
        times.append(time.monotonic() - start)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", default="2,4")
    parser.add_argument("--per-device", type=int, default=4)
    parser.add_argument("--mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cuda-driver", default=os.path.join(REPO, "build", "lib",
                                                              "libmemd_fake_cuda.so"))
    args = parser.parse_args()
    driver = os.path.abspath(args.cuda_driver)
    size = args.mib << 20
    for devices in [int(d) for d in args.devices.split(",")]:
        env = dict(os.environ, MEMD_CUDA_DRIVER=driver, MEMD_FAKE_CUDA_DEVICES=str(devices))
        daemon = Daemon("--backend", "cuda", "--cuda-driver", driver, env=env)
        try:
            env["MEMD_SOCKET_DIR"] = daemon.socket_dir
            subprocess.run([os.path.join(BIN, "memd-test-client"), "produce", "bench/model",
                            str(size), "7"], env=env, check=True, capture_output=True)
            for round_number in range(args.rounds):
                start = time.monotonic()
                times = attach_round(daemon.socket_dir, env, "bench/model", size, devices,
                                     args.per_device)
                total = time.monotonic() - start
                info = memctl(daemon.socket_dir, "inspect", "bench/model", "--json")
                stats = memctl(daemon.socket_dir, "stats", "--json")
                # The produce wrote through its mapping: every transfer is a copy.
                finished = stats["transfers"]["completed"]
                print(json.dumps({
                    "devices": devices, "processes": devices * args.per_device,
                    "mib": args.mib, "round": round_number + 1,
                    "attach_p50_ms": round(statistics.median(times) * 1e3, 1),
                    "attach_p99_ms": round(percentile(times, 99) * 1e3, 1),
                    "round_ms": round(total * 1e3, 1),
                    "replicas": len(info["replicas"]) - 1,
                    "copies_made": info["usage"]["lazy_copies"],
                    "copies_avoided": info["usage"]["copies_avoided"],
                    "transfers_finished": finished,
                    "sync_state": info["sync_state"]}), flush=True)
        finally:
            daemon.stop()


if __name__ == "__main__":
    main()
