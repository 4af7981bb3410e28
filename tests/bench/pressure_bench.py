"""A workload larger than the device, replayed with and without giving way (issue 26).

    python3 tests/bench/pressure_bench.py [--scenario scratch,replicas]
        [--device-mib 64] [--rounds 3] [--seed 26] [--json] [--cuda-driver PATH]
        [--scratch-mib 4] [--scratch-buffers 96] [--opens-per-create 2]
        [--weights-mib 8] [--weights-buffers 24] [--weights-opens 200]

Starts memd on the CUDA driver given (default: the project's fake,
build/lib/libmemd_fake_cuda.so) with one GPU whose pool is limited to
--device-mib, a fresh daemon for every run, and replays the same seeded
workload under two retentions:

scratch: a producer creates --scratch-buffers buffers of --scratch-mib at
  device:0 (several times the device), writes each with Client.copy from a
  host buffer and seals it; after each create a consumer opens
  --opens-per-create of the recent names, Zipf-skewed towards the newest.
  `pinned`: creates fail RESOURCE_EXHAUSTED once the device is full, and the
  consumer finds those names missing. `evictable`: memd evicts the least
  recently used unheld buffers; a consumer open that finds its name evicted
  (NotFoundError "evicted") puts it again (create, copy, seal: bytes re-put).

replicas: --weights-buffers sealed host buffers of --weights-mib (more than
  the device holds) are opened at device:0 --weights-opens times in a
  Zipf-skewed order (memd makes the copy there, or finds it). `pinned`: the
  copy's open fails RESOURCE_EXHAUSTED once the device is full of unheld
  copies. `demotable`: memd drops the least recently used unheld copies and
  the next open there copies again (bytes re-copied).

Every byte a consumer opens is copied back to the host and compared with
what was written. Each run checks the daemon's counters against the
client's: scratch, buffers created - evicted (memd_pressure_reclaims_total)
= names left; replicas, copies made (memd_replica_copies_total) = the opens
that found no copy, and copies made - demoted = copies left. It prints one
line per run (--json: one object per line) with the failures, what was
taken back and re-copied, and create or open latency p50 and p99 in ms.
Results: docs/benchmarks.md."""

import argparse
import json
import os
import random
import re
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "python"))
sys.path.insert(0, os.environ.get("MEMD_PYTHONPATH") or os.path.join(REPO, "build", "python"))

import numpy as np  # noqa: E402

from memd_daemon import Daemon  # noqa: E402

MIB = 1 << 20
DEVICE = "device:0"


def percentile(samples, p):
    if not samples:
        return None
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def ms(samples, p):
    value = percentile(samples, p)
    return None if value is None else round(value * 1e3, 2)


def zipf_weights(n, s):
    return [1.0 / (rank ** s) for rank in range(1, n + 1)]


class Counters:
    """The daemon's Prometheus counters this bench reads (Client.stats()
    carries no pressure counts)."""

    LINE = re.compile(r'^(memd_[a-z_]+)(\{[^}]*\})? ([0-9.e+-]+)$')

    def __init__(self, address):
        self.url = f"http://{address}/metrics"

    def read(self):
        text = urllib.request.urlopen(self.url, timeout=10).read().decode()
        found = {}
        for line in text.splitlines():
            match = self.LINE.match(line)
            if match:
                found[(match.group(1), match.group(2) or "")] = float(match.group(3))
        return found

    @staticmethod
    def total(found, family, **labels):
        total = 0.0
        for (name, label_text), value in found.items():
            if name == family and all(f'{k}="{v}"' in label_text for k, v in labels.items()):
                total += value
        return int(total)


class Memd:
    """One daemon for one run: the fake GPU with a pool limit, metrics on."""

    def __init__(self, driver, device_mib):
        env = {"MEMD_CUDA_DRIVER": driver, "MEMD_FAKE_CUDA_DEVICES": "1"}
        # This process maps device buffers through the same fake driver.
        os.environ.update(env)
        import memd
        self.memd = memd
        # Durability off: Daemon reads its notify socket only until READY=1,
        # so with durability on, once that socket's queue is full every new
        # segment's FDSTORE=1 waits 5 s in memd (an open or create with it).
        self.daemon = Daemon("--backend", "cuda", "--cuda-driver", driver,
                             "--device-pool-limit-bytes", f"{device_mib}MiB",
                             "--durability", "off", env=env,
                             metrics_address="127.0.0.1:0")
        self.client = memd.Client.connect(self.daemon.socket_dir)
        self.counters = Counters(self.client.stats().metrics_address)

    def stop(self):
        self.client.close()
        self.daemon.stop()


def fill(buffer, index):
    """Every byte of `buffer`: the index's pattern (what check() expects)."""
    view = np.frombuffer(memoryview(buffer), dtype=np.uint8)
    view[:] = index % 251 + 1
    view[:8] = np.frombuffer(int(index).to_bytes(8, "little"), dtype=np.uint8)


class Checker:
    """Copies a device lease back to a host buffer and compares every byte."""

    def __init__(self, m, size):
        self.m = m
        self.scratch = m.client.create("bench/check", size)
        self.view = np.frombuffer(memoryview(self.scratch), dtype=np.uint8)

    def check(self, lease, index, name):
        self.view[:] = 0
        self.m.client.copy(lease, self.scratch).wait()
        head = int.from_bytes(self.view[:8].tobytes(), "little")
        bad = np.count_nonzero(self.view[8:] != index % 251 + 1)
        if head != index or bad:
            raise AssertionError(f"{name}: data not as written: head {head} (want {index}), "
                                 f"{bad} bytes of the rest differ")


def pool_stats(client):
    """device:0's pool: allocations served from memory it held (hits) and
    those that grew it (misses)."""
    pool = next(p for p in client.stats().pools if p.location == DEVICE)
    return dict(pool_hits=pool.hit_count, pool_misses=pool.miss_count)


def scratch_run(args, retention):
    size = args.scratch_mib * MIB
    rng = random.Random(args.seed)
    m = Memd(args.driver, args.device_mib)
    memd = m.memd
    client = m.client
    try:
        staging = client.create("bench/staging", size)
        checker = Checker(m, size)
        fits = args.device_mib // args.scratch_mib
        out = dict(scenario="scratch", retention=retention, mib=args.scratch_mib,
                   buffers=args.scratch_buffers, device_mib=args.device_mib,
                   creates_ok=0, creates_failed=0, bytes_not_stored=0,
                   opens_ok=0, opens_evicted=0, opens_missing=0,
                   reputs_ok=0, reputs_failed=0, bytes_reput=0)
        create_fill, create_full, create_failed = [], [], []
        stored = set()

        def put(index, timings):
            """create + copy + seal of scratch/index; True if it is stored."""
            name = f"scratch/{index}"
            fill(staging, index)
            start = time.monotonic()
            try:
                lease = client.create(name, size, location=DEVICE, retention=retention)
            except memd.ResourceExhaustedError:
                create_failed.append(time.monotonic() - start)
                return False
            timings.append(time.monotonic() - start)
            client.copy(staging, lease).wait()
            lease.seal()
            lease.close()
            stored.add(index)
            return True

        weights = zipf_weights(args.recent_window, args.zipf)
        start_run = time.monotonic()
        for index in range(args.scratch_buffers):
            if put(index, create_fill if index < fits else create_full):
                out["creates_ok"] += 1
            else:
                out["creates_failed"] += 1
                out["bytes_not_stored"] += size
            newest = index + 1
            window = min(newest, args.recent_window)
            for age in rng.choices(range(window), weights[:window], k=args.opens_per_create):
                wanted = newest - 1 - age
                name = f"scratch/{wanted}"
                try:
                    lease = client.open(name)
                except memd.NotFoundError as error:
                    if wanted not in stored:
                        out["opens_missing"] += 1  # Its create failed: never stored.
                        continue
                    if "evicted" not in str(error):
                        raise
                    out["opens_evicted"] += 1
                    stored.discard(wanted)
                    # The consumer makes it again, as a cache would.
                    if put(wanted, create_full):
                        out["reputs_ok"] += 1
                        out["bytes_reput"] += size
                    else:
                        out["reputs_failed"] += 1
                    continue
                checker.check(lease, wanted, name)
                lease.close()
                out["opens_ok"] += 1
        out["run_s"] = round(time.monotonic() - start_run, 2)
        found = m.counters.read()
        evicted = Counters.total(found, "memd_pressure_reclaims_total", location=DEVICE,
                                 kind="evicted")
        out["evicted"] = evicted
        out["evicted_mib"] = Counters.total(found, "memd_pressure_reclaimed_bytes_total",
                                            location=DEVICE, kind="evicted") // MIB
        left = len(client.list("scratch/"))
        created = out["creates_ok"] + out["reputs_ok"]
        if created - evicted != left:
            raise AssertionError(f"scratch {retention}: {created} created - {evicted} evicted "
                                 f"!= {left} names left")
        out["names_left"] = left
        out.update(create_fit_n=len(create_fill), create_fit_p50_ms=ms(create_fill, 50),
                   create_fit_p99_ms=ms(create_fill, 99),
                   create_full_n=len(create_full), create_full_p50_ms=ms(create_full, 50),
                   create_full_p99_ms=ms(create_full, 99),
                   create_failed_n=len(create_failed),
                   create_failed_p50_ms=ms(create_failed, 50),
                   create_failed_p99_ms=ms(create_failed, 99))
        out.update(pool_stats(client))
        return out
    finally:
        m.stop()


def replicas_run(args, retention):
    size = args.weights_mib * MIB
    rng = random.Random(args.seed)
    m = Memd(args.driver, args.device_mib)
    memd = m.memd
    client = m.client
    try:
        checker = Checker(m, size)
        for index in range(args.weights_buffers):
            lease = client.create(f"weights/{index}", size, retention=retention)
            fill(lease, index)
            lease.seal()
            lease.close()
        order = list(range(args.weights_buffers))
        rng.shuffle(order)  # Popularity rank -> buffer.
        picks = rng.choices(order, zipf_weights(len(order), args.zipf), k=args.weights_opens)
        out = dict(scenario="replicas", retention=retention, mib=args.weights_mib,
                   buffers=args.weights_buffers, opens=args.weights_opens,
                   device_mib=args.device_mib, opens_found=0, opens_made=0,
                   opens_failed=0, bytes_not_served=0, recopies=0, bytes_recopied=0)
        found_times, made_fit, made_full, failed_times = [], [], [], []
        fits = args.device_mib // args.weights_mib
        copied_before = set()
        start_run = time.monotonic()
        for index in picks:
            name = f"weights/{index}"
            present = any(r.location == DEVICE and r.state == "current"
                          for r in client.stat(name).replicas)
            start = time.monotonic()
            try:
                lease = client.open(name, location=DEVICE)
            except memd.ResourceExhaustedError:
                failed_times.append(time.monotonic() - start)
                out["opens_failed"] += 1
                out["bytes_not_served"] += size
                continue
            elapsed = time.monotonic() - start
            if present:
                found_times.append(elapsed)
                out["opens_found"] += 1
            else:
                out["opens_made"] += 1
                # The first copies fill free memory; pinned fails after them,
                # demotable first drops a copy.
                (made_fit if out["opens_made"] <= fits else made_full).append(elapsed)
                if index in copied_before:
                    out["recopies"] += 1
                    out["bytes_recopied"] += size
                copied_before.add(index)
            checker.check(lease, index, name)
            lease.close()
        out["run_s"] = round(time.monotonic() - start_run, 2)
        found = m.counters.read()
        copies = Counters.total(found, "memd_replica_copies_total")
        demoted = Counters.total(found, "memd_pressure_reclaims_total", location=DEVICE,
                                 kind="demoted")
        left = sum(1 for index in range(args.weights_buffers)
                   if any(r.location == DEVICE for r in client.stat(f"weights/{index}").replicas))
        if copies != out["opens_made"] or copies - demoted != left:
            raise AssertionError(f"replicas {retention}: memd made {copies} copies, the client "
                                 f"saw {out['opens_made']}; {demoted} demoted, {left} left")
        out.update(copies_made=copies, demoted=demoted,
                   demoted_mib=Counters.total(found, "memd_pressure_reclaimed_bytes_total",
                                              location=DEVICE, kind="demoted") // MIB,
                   h2d_mib=Counters.total(found, "memd_replica_bytes_copied_total") // MIB,
                   copies_left=left,
                   found_p50_ms=ms(found_times, 50), found_p99_ms=ms(found_times, 99),
                   made_fit_n=len(made_fit), made_fit_p50_ms=ms(made_fit, 50),
                   made_fit_p99_ms=ms(made_fit, 99), made_full_n=len(made_full),
                   made_full_p50_ms=ms(made_full, 50), made_full_p99_ms=ms(made_full, 99),
                   failed_p50_ms=ms(failed_times, 50), failed_p99_ms=ms(failed_times, 99))
        out.update(pool_stats(client))
        return out
    finally:
        m.stop()


def ratio(a, b):
    return None if a is None or b is None or b == 0 else round(a / b, 3)


def show(result, as_json):
    if as_json:
        print(json.dumps(result), flush=True)
        return
    r = result
    if r["scenario"] == "scratch":
        print(f"round {r['round']} scratch {r['retention']:>9}: creates ok {r['creates_ok']} "
              f"failed {r['creates_failed']} ({r['bytes_not_stored'] // MIB} MiB not stored); "
              f"opens ok {r['opens_ok']} evicted {r['opens_evicted']} missing "
              f"{r['opens_missing']}; re-put {r['reputs_ok']} ({r['bytes_reput'] // MIB} MiB, "
              f"{r['reputs_failed']} failed); memd evicted {r['evicted']} "
              f"({r['evicted_mib']} MiB); create ms p50/p99: device not full "
              f"{r['create_fit_p50_ms']}/{r['create_fit_p99_ms']} (n={r['create_fit_n']}), "
              f"full {r['create_full_p50_ms']}/{r['create_full_p99_ms']} "
              f"(n={r['create_full_n']}), failed {r['create_failed_p50_ms']}/"
              f"{r['create_failed_p99_ms']} (n={r['create_failed_n']}); device pool hits "
              f"{r['pool_hits']} misses {r['pool_misses']}; run {r['run_s']} s",
              flush=True)
    else:
        print(f"round {r['round']} replicas {r['retention']:>9}: opens found {r['opens_found']} "
              f"made {r['opens_made']} failed {r['opens_failed']} "
              f"({r['bytes_not_served'] // MIB} MiB not served); re-copies {r['recopies']} "
              f"({r['bytes_recopied'] // MIB} MiB); memd demoted {r['demoted']} "
              f"({r['demoted_mib']} MiB), copied {r['h2d_mib']} MiB; open ms p50/p99: found "
              f"{r['found_p50_ms']}/{r['found_p99_ms']} (n={r['opens_found']}), made into room "
              f"{r['made_fit_p50_ms']}/{r['made_fit_p99_ms']} (n={r['made_fit_n']}), made "
              f"when full {r['made_full_p50_ms']}/{r['made_full_p99_ms']} "
              f"(n={r['made_full_n']}), failed {r['failed_p50_ms']}/{r['failed_p99_ms']}; "
              f"device pool hits {r['pool_hits']} misses {r['pool_misses']}; "
              f"run {r['run_s']} s", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="scratch,replicas")
    parser.add_argument("--device-mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--scratch-mib", type=int, default=4)
    parser.add_argument("--scratch-buffers", type=int, default=96)
    parser.add_argument("--opens-per-create", type=int, default=2)
    parser.add_argument("--recent-window", type=int, default=32)
    parser.add_argument("--weights-mib", type=int, default=8)
    parser.add_argument("--weights-buffers", type=int, default=24)
    parser.add_argument("--weights-opens", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cuda-driver", default=os.path.join(REPO, "build", "lib",
                                                              "libmemd_fake_cuda.so"))
    args = parser.parse_args()
    args.driver = os.path.abspath(args.cuda_driver)
    scenarios = {"scratch": (scratch_run, "pinned", "evictable"),
                 "replicas": (replicas_run, "pinned", "demotable")}
    affinity = sorted(os.sched_getaffinity(0))
    if not args.json:
        print(f"# CPUs {affinity}, seed {args.seed}, device pool {args.device_mib} MiB",
              flush=True)
    for scenario in args.scenario.split(","):
        run, *retentions = scenarios[scenario]
        for round_number in range(1, args.rounds + 1):
            # Alternate which retention runs first, so that drift on a shared
            # machine does not favour one.
            order = retentions if round_number % 2 else retentions[::-1]
            results = {}
            for retention in order:
                result = run(args, retention)
                result.update(round=round_number, cpus=",".join(map(str, affinity)))
                results[retention] = result
                show(result, args.json)
            if scenario == "scratch":
                ev = results["evictable"]
                line = dict(scenario="scratch", round=round_number, summary=True,
                            full_over_fit_p50=ratio(ev["create_full_p50_ms"],
                                                    ev["create_fit_p50_ms"]),
                            evictable_over_pinned_fit_p50=ratio(
                                ev["create_fit_p50_ms"], results["pinned"]["create_fit_p50_ms"]))
            else:
                de = results["demotable"]
                line = dict(scenario="replicas", round=round_number, summary=True,
                            made_fit_over_found_p50=ratio(de["made_fit_p50_ms"],
                                                          de["found_p50_ms"]),
                            made_full_over_made_fit_p50=ratio(de["made_full_p50_ms"],
                                                              de["made_fit_p50_ms"]),
                            demotable_over_pinned_found_p50=ratio(
                                de["found_p50_ms"], results["pinned"]["found_p50_ms"]))
            print(json.dumps(line) if args.json else
                  "round %d %s ratios (p50): %s" % (round_number, scenario, ", ".join(
                      f"{k} {v}" for k, v in line.items()
                      if k not in ("scenario", "round", "summary"))), flush=True)


if __name__ == "__main__":
    main()
