// memd-pool-bench: what the pool engine costs and what it saves.
//
//   build/bin/memd-pool-bench [--benchmark_* flags]
//
// BM_SizeClassHit   Allocate of a cached 64 KiB block (the hot path) and,
//                   apart, its Free; pool over a backend without memory.
// BM_Coalescing     Allocate and Free in a large segment where every Free
//                   merges with free neighbours (split + coalesce path).
// BM_Acquire64MiB   End to end, side by side in one run: a client creates a
//                   64 MiB host buffer through a real memd, writes one byte
//                   per page and releases it ("memd"), against creating a
//                   fresh memfd of 64 MiB, mapping it and touching every page
//                   ("fresh_shm"). The memd buffer comes from the pool (its
//                   pages were committed once); the fresh one allocates and
//                   zeroes every page. /populate:1 maps with MAP_POPULATE on
//                   both sides (CreateOptions::populate for memd).
// BM_Crc32c         The state file's checksum of one frame of 64, 256 or
//                   4096 bytes (a lease granted or ended appends one of
//                   about 100), by the CPU's crc32 instruction and by the
//                   table, side by side in one run.
//
// Latencies are p50/p99 counters in nanoseconds (pool paths: per operation,
// from batches of kBatch operations, since one operation is close to the
// clock's own cost) or microseconds (end to end, per acquisition).
// Figures and commands: docs/benchmarks.md.

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "common/clock.h"
#include "daemon/backend/backend.h"
#include "daemon/durable/crc32c.h"
#include "daemon/pool/carving_pool.h"
#include "memd/client.h"
#include "tests/support/daemon_process.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kBatch = 64;
constexpr std::uint64_t kMiB = 1 << 20;
const memd::pool::Domain kDomain{1000, 1000, 0600};

double NanosSince(Clock::time_point start) {
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count();
}

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * samples.size()));
  return samples[std::clamp<std::size_t>(rank, 1, samples.size()) - 1];
}

void Report(benchmark::State& state, const std::string& prefix,
            const std::vector<double>& samples, const char* unit) {
  state.counters[absl::StrCat(prefix, "p50_", unit)] = Percentile(samples, 50);
  state.counters[absl::StrCat(prefix, "p99_", unit)] = Percentile(samples, 99);
}

// Segments without memory: the pool's own work is all that is measured.
class HollowBackend : public memd::backend::Backend {
 public:
  std::string_view name() const override { return "hollow"; }
  std::vector<memd::Location> locations() const override {
    return {memd::Location::Host()};
  }
  std::uint64_t alignment(const memd::Location&) const override { return 4096; }
  absl::StatusOr<std::unique_ptr<memd::backend::Segment>> Reserve(
      const memd::Location&, std::uint64_t bytes) override {
    return std::unique_ptr<memd::backend::Segment>(new Hollow(bytes));
  }

 private:
  class Hollow : public memd::backend::Segment {
   public:
    explicit Hollow(std::uint64_t size) : size_(size) {}
    std::uint64_t size() const override { return size_; }
    absl::StatusOr<memd::backend::ExportedHandle> Export(
        memd::backend::Access) const override {
      return absl::UnimplementedError("hollow");
    }

   private:
    std::uint64_t size_;
  };
};

void BM_SizeClassHit(benchmark::State& state) {
  HollowBackend backend;
  memd::RealClock clock;
  memd::pool::CarvingPool pool(backend, memd::Location::Host(), {}, clock);
  std::vector<memd::pool::Allocation> held(kBatch);
  // Fill the 64 KiB class cache once.
  for (auto& allocation : held) allocation = *pool.Allocate(64 << 10, kDomain);
  for (auto& allocation : held) pool.Free(std::move(allocation));
  std::vector<double> allocate, free;
  for (auto _ : state) {
    Clock::time_point start = Clock::now();
    for (auto& allocation : held) allocation = *pool.Allocate(64 << 10, kDomain);
    allocate.push_back(NanosSince(start) / kBatch);
    start = Clock::now();
    for (auto& allocation : held) pool.Free(std::move(allocation));
    free.push_back(NanosSince(start) / kBatch);
    state.SetIterationTime(allocate.back() * kBatch / 1e9);
  }
  memd::pool::PoolStats stats = pool.Stats();
  state.counters["hit_ratio"] =
      static_cast<double>(stats.hit_count) / (stats.hit_count + stats.miss_count);
  Report(state, "allocate_", allocate, "ns");
  Report(state, "free_", free, "ns");
}

void BM_Coalescing(benchmark::State& state) {
  HollowBackend backend;
  memd::RealClock clock;
  // Every request may split the one big block: this measures the split and
  // merge path itself, not the growth policy (which would give each size a
  // segment of its own).
  memd::pool::CarvingPoolOptions options;
  options.large_fit_slack = 1e6;
  options.idle_budget = -1;
  memd::pool::CarvingPool pool(backend, memd::Location::Host(), options, clock);
  // One 64 MiB segment, then blocks of mixed sizes carved from it and freed
  // in an order where each free merges with a free neighbour.
  pool.Free(*pool.Allocate(64 * kMiB, kDomain));
  // Large (above the 1 MiB size-class limit), 24 MiB per round of 8.
  const std::uint64_t sizes[] = {3 * kMiB / 2, 5 * kMiB / 2, 2 * kMiB + 4096,
                                 7 * kMiB / 2};
  std::vector<double> allocate, free;
  std::vector<memd::pool::Allocation> held(8);
  for (auto _ : state) {
    Clock::time_point start = Clock::now();
    for (std::size_t i = 0; i < held.size(); ++i) {
      held[i] = *pool.Allocate(sizes[i % 4], kDomain);
    }
    allocate.push_back(NanosSince(start) / held.size());
    start = Clock::now();
    // Every other block first, then the rest: each of those merges both ways.
    for (std::size_t i = 0; i < held.size(); i += 2) pool.Free(std::move(held[i]));
    for (std::size_t i = 1; i < held.size(); i += 2) pool.Free(std::move(held[i]));
    free.push_back(NanosSince(start) / held.size());
    state.SetIterationTime(allocate.back() * held.size() / 1e9);
  }
  memd::pool::PoolStats stats = pool.Stats();
  state.counters["segments"] = static_cast<double>(stats.segments);
  state.counters["fragmentation_after"] = stats.fragmentation();
  Report(state, "allocate_", allocate, "ns");
  Report(state, "free_", free, "ns");
}

// Writes one byte into every page.
void TouchPages(std::byte* bytes, std::uint64_t size) {
  const long page = ::sysconf(_SC_PAGESIZE);
  for (std::uint64_t offset = 0; offset < size; offset += page) bytes[offset] = std::byte{1};
  benchmark::ClobberMemory();
}

void BM_Acquire64MiB(benchmark::State& state) {
  constexpr std::uint64_t kSize = 64 * kMiB;
  auto daemon = memd::test::DaemonProcess::Start({"--metrics-address", ""});
  if (!daemon.ok()) {
    state.SkipWithError(daemon.status().ToString().c_str());
    return;
  }
  auto client = memd::Client::Connect({.socket_dir = (*daemon)->socket_dir()});
  if (!client.ok()) {
    state.SkipWithError(client.status().ToString().c_str());
    return;
  }
  const bool populate = state.range(0) != 0;
  // Through memd: create (from the pool after the first time), touch, release.
  auto through_memd = [&]() -> absl::Status {
    auto buffer = (*client)->Create(
        "bench/64mib", kSize,
        {.persistence = memd::Persistence::kEphemeral, .populate = populate});
    if (!buffer.ok()) return buffer.status();
    TouchPages(buffer->mutable_data().data(), kSize);
    return buffer->Release();
  };
  // What a process does without memd: a fresh shared-memory object.
  auto fresh = [populate]() -> absl::Status {
    int fd = ::memfd_create("bench-fresh", MFD_CLOEXEC);
    if (fd < 0 || ::ftruncate(fd, kSize) != 0) return absl::InternalError("memfd");
    void* map = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE,
                       MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
    if (map == MAP_FAILED) return absl::InternalError("mmap");
    TouchPages(static_cast<std::byte*>(map), kSize);
    ::munmap(map, kSize);
    ::close(fd);
    return absl::OkStatus();
  };
  for (int i = 0; i < 3; ++i) {  // Warm: the pool holds the segment now.
    if (absl::Status warm = through_memd(); !warm.ok()) {
      state.SkipWithError(warm.ToString().c_str());
      return;
    }
  }
  std::vector<double> memd_us, fresh_us;
  for (auto _ : state) {
    // Alternate, so that both see the same machine.
    Clock::time_point start = Clock::now();
    absl::Status status = through_memd();
    memd_us.push_back(NanosSince(start) / 1000);
    start = Clock::now();
    if (status.ok()) status = fresh();
    fresh_us.push_back(NanosSince(start) / 1000);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      return;
    }
    state.SetIterationTime(memd_us.back() / 1e6);
  }
  Report(state, "memd_", memd_us, "us");
  Report(state, "fresh_shm_", fresh_us, "us");
  const double ratio = Percentile(fresh_us, 50) / Percentile(memd_us, 50);
  state.counters["fresh_over_memd_p50"] = ratio;
  state.SetLabel(ratio >= 3 ? "target met (memd >= 3x faster)"
                            : "target MISSED (memd < 3x faster)");
  (*daemon)->Stop(SIGTERM);
}

void BM_Crc32c(benchmark::State& state, bool by_cpu) {
  std::vector<unsigned char> frame(static_cast<std::size_t>(state.range(0)));
  for (std::size_t i = 0; i < frame.size(); ++i) frame[i] = static_cast<unsigned char>(i * 131);
  if (by_cpu && !memd::durable::internal::Crc32cUsesTheCpu()) {
    state.SkipWithError("this CPU has no SSE4.2: Crc32c uses the table");
    return;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(by_cpu ? memd::durable::Crc32c(frame.data(), frame.size())
                                    : memd::durable::internal::Crc32cByTable(
                                          frame.data(), frame.size()));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * frame.size()));
}

BENCHMARK(BM_SizeClassHit)->UseManualTime()->Iterations(20000);
BENCHMARK(BM_Coalescing)->UseManualTime()->Iterations(20000);
BENCHMARK_CAPTURE(BM_Crc32c, cpu, true)->Arg(64)->Arg(256)->Arg(4096);
BENCHMARK_CAPTURE(BM_Crc32c, table, false)->Arg(64)->Arg(256)->Arg(4096);
// Arg 0: pages faulted in as touched; arg 1: both sides map with
// MAP_POPULATE (CreateOptions::populate for memd).
BENCHMARK(BM_Acquire64MiB)
    ->ArgName("populate")
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Iterations(200)
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  // As memd does (daemon/main.cc): Debian's Abseil checks for deadlocks on
  // every lock otherwise.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
