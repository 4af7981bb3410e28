"""The weights headline (tests/bench/weights_bench.py) as a smoke run on the
fake CUDA driver: a 64 MiB model, 1 and 4 workers, each path once. It
checks what the benchmark's figures rest on, never its times against a
target: every worker read the right value, memd kept one copy of the model
on the device where the baseline kept one per worker, and workers attach
to a buffer memctl put there sooner than they load it."""

import os
import sys

import pytest

from conftest import FAKE_CUDA, MEMD_BIN, REPO

MEMCTL = os.environ.get("MEMD_MEMCTL") or os.path.join(REPO, "build", "bin", "memctl")
sys.path.insert(0, os.path.join(REPO, "tests", "bench"))

pytestmark = pytest.mark.skipif(not os.path.exists(FAKE_CUDA),
                                reason=f"no fake CUDA driver at {FAKE_CUDA}")

MIB = 64
WORKERS = (1, 4)


@pytest.fixture(scope="module")
def report():
    import weights_bench
    previous = os.environ.get("MEMD_CUDA_DRIVER")
    try:
        yield weights_bench.bench(MEMD_BIN, MEMCTL, MIB << 20, 8, list(WORKERS),
                                  fake_cuda=FAKE_CUDA, log=print, timeout=60)
    finally:
        if previous is None:
            os.environ.pop("MEMD_CUDA_DRIVER", None)
        else:
            os.environ["MEMD_CUDA_DRIVER"] = previous


def runs(report, mode):
    return {r["workers"]: r for r in report["runs"] if r["mode"] == mode}


def test_every_path_ran_for_every_n(report):
    for mode in ("baseline", "memd cold", "memd warm"):
        assert sorted(runs(report, mode)) == list(WORKERS), mode
    assert sum(r["mode"] == "memctl put" for r in report["runs"]) == len(WORKERS)
    assert "cuMemAlloc" in report["baseline"]


def test_every_worker_saw_the_checked_value(report):
    for run in report["runs"]:
        if run["mode"] == "memctl put":
            continue
        assert run["values"] == [1020.0], run
        assert run["exit_codes"] == [0] * run["workers"], run


def test_the_baseline_keeps_one_copy_per_worker(report):
    data = MIB << 20
    for n, run in runs(report, "baseline").items():
        # Each worker's own allocations, counted by the fake in that worker.
        assert len(run["worker_gpu_bytes"]) == n
        assert all(data <= own < data + (1 << 20) for own in run["worker_gpu_bytes"]), run
        assert run["gpu_bytes_held"] >= n * data, run
        assert run["distinct_pointers"] == n
        assert run["memd_pool_used_bytes"] == 0, run


def test_memd_keeps_one_copy_whatever_the_number_of_workers(report):
    data, file_bytes = MIB << 20, report["file_bytes"]
    for mode in ("memd cold", "memd warm"):
        for n, run in runs(report, mode).items():
            # No worker holds device memory of its own: they import memd's.
            assert run["worker_gpu_bytes"] == [0] * n, run
            # One buffer of the file's size, in granularity-rounded memory.
            assert file_bytes <= run["memd_pool_used_bytes"] < 2 * data, run
            # The fake's own count of the device: what memd reserved.
            assert run["gpu_bytes_held"] == run["memd_pool_reserved_bytes"], run
    for n, run in runs(report, "memd warm").items():
        # memctl put made the one copy before the workers came.
        assert run["gpu_bytes_held"] == run["memd_pool_used_bytes"], run
        assert run["gpu_bytes_used"] == 0, run
    for n, run in runs(report, "memd cold").items():
        # Racing first callers allocate once: the others wait for the one
        # create of the name in flight (Broker's CreatingNames), so the
        # device holds one copy however many workers race.
        assert file_bytes <= run["gpu_bytes_held"] < 2 * data, run


def test_workers_attach_to_a_put_model_sooner_than_they_load_it(report):
    cold, warm = runs(report, "memd cold"), runs(report, "memd warm")
    for n in WORKERS:
        assert warm[n]["all_ready_s"] < cold[n]["all_ready_s"], (warm[n], cold[n])
