// memd-transfer-bench: what the transfer engine achieves, all in one run.
//
//   (one command line; a backslash would end this comment's line in C++)
//   MEMD_CUDA_DRIVER=build/lib/libmemd_fake_cuda.so MEMD_FAKE_CUDA_LINK_GBPS=8
//     MEMD_FAKE_CUDA_MEMORY=8589934592 build/bin/memd-transfer-bench
//   build/bin/memd-transfer-bench            (a real GPU: libcuda.so.1)
//
// Flags besides --benchmark_*: --cpu=N pins the whole process (engine,
// copy threads, the fake's copy engines) to CPU N; --file=PATH and
// --file_bytes=N for the file benchmark (default: a 2 GiB file in /tmp).
//
// Flags: --copy_threads=N, --chunk_bytes=N, --chunks_in_flight=N for the
// engine (copy threads: memd's default for this machine unless given).
//
// BM_Memcpy, BM_Staging/threads:T  256 MiB in 4 MiB chunks into four rotating
//     pinned slots: plain memcpy, and the engine's CopyThreads with T threads
//     (T=0: the engine's copy threads).
// BM_Drain/streaming:S            256 MiB out of the slots into a large
//     destination on the engine's copy threads: memcpy (S=0) or
//     non-temporal stores (S=1).
// BM_Copy/<dir>/<source>/depth:D    A 1 GiB copy through the engine: h2d or
//     d2h, from/to pageable or pinned host memory, ring depth D (1 serialises
//     staging and DMA: the control).
// BM_PlainCuMemcpy/<dir>/<host>     cuMemcpyHtoD/DtoH of the same 1 GiB from
//     pinned (cuMemHostAlloc) or pageable memory: the driver's own figure.
// BM_ChunkCalls/bytes:B            The CopyStream calls the lane makes per
//     chunk (async copy of B bytes, Mark, WakeWhenDone, the wake, Reached),
//     each timed: p50 and p99 in microseconds.
// BM_Critical/load:L                Latency of a 64 KiB critical h2d copy,
//     alone (L=0) and while background 1 GiB copies saturate the link (L=1);
//     and its wait from Submit to its first chunk taken (critical_wait/L).
// BM_Cat, BM_ParallelRead/direct:D,  `cat FILE > /dev/null`; the file read by
// BM_StagedRead/threads:T,           one thread per usable CPU into touched
// BM_FileTo/location:L               memory, through the page cache (D=0) or
//     with O_DIRECT from the storage (D=1); the read stage of a file's way to
//     a GPU alone (common/file_reader.h into a ring of 8 x 32 MiB, T threads,
//     0: its default); and `memctl put --location host|pinned|device:0 FILE`
//     against a real memd (L = 0, 1, 2; 3: device:0 with --direct-io), the
//     file in the page cache.
//
// After the runs a summary prints the ratios the targets are about (issue
// 11, docs/benchmarks.md). On the fake driver every device figure is
// MODELLED: it checks the overlap logic, not PCIe.

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "common/cpus.h"
#include "common/file_reader.h"
#include "daemon/transfer/copy_threads.h"
#include "tests/bench/transfer_bench.h"

namespace memd::transfer_bench {
namespace {

// --- 1. Staging alone against memcpy ---------------------------------------

struct Slots {
  Slots() : source(kStagingBytes), ring(4 * kChunk) {}
  HostMemory source;
  HostMemory ring;  // Four chunk-sized slots, as the engine's ring.
};

Slots& TheSlots() {
  static auto* slots = new Slots;
  return *slots;
}

template <typename CopyChunk>
double CopyIntoSlots(CopyChunk copy) {
  Slots& slots = TheSlots();
  const Clock::time_point start = Clock::now();
  for (std::uint64_t offset = 0, slot = 0; offset < kStagingBytes; offset += kChunk) {
    copy(slots.ring.bytes.get() + (slot++ % 4) * kChunk, slots.source.bytes.get() + offset,
         kChunk);
  }
  return SecondsSince(start);
}

void BM_Memcpy(benchmark::State& state) {
  for (auto _ : state) {
    Record(state, "memcpy",
           CopyIntoSlots([](std::byte* to, const std::byte* from, std::uint64_t n) {
             std::memcpy(to, from, n);
           }),
           kStagingBytes);
  }
}
BENCHMARK(BM_Memcpy)->UseManualTime()->Iterations(20)->Unit(benchmark::kMillisecond);

// range(0): copy threads; 0 for the engine's (memd's default for this
// machine, or --copy_threads).
void BM_Staging(benchmark::State& state) {
  const int count = state.range(0) > 0 ? static_cast<int>(state.range(0)) : g_options.copy_threads;
  transfer::CopyThreads threads(count);
  const std::string key = absl::StrCat("staging/", count);
  for (auto _ : state) {
    Record(state, key, CopyIntoSlots([&](std::byte* to, const std::byte* from, std::uint64_t n) {
             threads.Copy(to, from, n);
           }),
           kStagingBytes);
  }
}
BENCHMARK(BM_Staging)->ArgName("threads")->Arg(1)->Arg(2)->Arg(0)->UseManualTime()->Iterations(20)
    ->Unit(benchmark::kMillisecond);

// The d2h side of staging: 256 MiB out of the four rotating slots into a
// client-sized destination, on the engine's copy threads, with cached
// (memcpy) or non-temporal stores (what the engine drains the ring with).
void BM_Drain(benchmark::State& state) {
  transfer::CopyThreads threads(g_options.copy_threads);
  Slots& slots = TheSlots();
  const auto stores = static_cast<transfer::Stores>(state.range(0));
  const std::string key = absl::StrCat("drain/", state.range(0));
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    for (std::uint64_t offset = 0, slot = 0; offset < kStagingBytes; offset += kChunk) {
      threads.Copy(slots.source.bytes.get() + offset,
                   slots.ring.bytes.get() + (slot++ % 4) * kChunk, kChunk, stores);
    }
    Record(state, key, SecondsSince(start), kStagingBytes);
  }
}
BENCHMARK(BM_Drain)->ArgName("streaming")->Arg(0)->Arg(1)->UseManualTime()->Iterations(20)
    ->Unit(benchmark::kMillisecond);

// --- 2. Pipelined copies through the engine --------------------------------

// range(0): 0 h2d, 1 d2h; range(1): 0 pageable, 1 pinned host memory;
// range(2): ring depth.
void BM_Copy(benchmark::State& state) {
  std::string error;
  std::unique_ptr<transfer::Engine> engine =
      StartEngine(static_cast<int>(state.range(2)), &error);
  if (engine == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  Gpu& gpu = TheGpu();
  const SegmentMemory host = state.range(1) == 1
                                 ? *gpu.pinned->Memory()
                                 : SegmentMemory{.host = gpu.pageable->bytes.get()};
  const SegmentMemory device = *gpu.device->Memory();
  transfer::TransferSpec spec;
  spec.session = 1;
  const bool h2d = state.range(0) == 0;
  spec.source = EndpointOf(h2d ? host : device, kCopyBytes, 1);
  spec.destination = EndpointOf(h2d ? device : host, kCopyBytes, 2);
  const std::string key =
      absl::StrCat("copy/", state.range(0), "/", state.range(1), "/", state.range(2));
  for (auto _ : state) {
    const double seconds = CopyAndWait(*engine, spec, &error);
    if (seconds < 0) {
      state.SkipWithError(error.c_str());
      return;
    }
    Record(state, key, seconds, kCopyBytes);
  }
  // Where the time went, per copy, as the engine counts it: its lane's CPU
  // staging (fill or drain) and the span while chunks were on the device.
  const transfer::EngineStats stats = engine->Stats();
  if (!stats.devices.empty()) {
    const double copies = static_cast<double>(state.iterations());
    state.counters["staging_ms"] = stats.devices[0].staging_seconds * 1e3 / copies;
    state.counters["dma_ms"] = stats.devices[0].dma_seconds * 1e3 / copies;
  }
}
BENCHMARK(BM_Copy)
    ->ArgNames({"d2h", "pinned", "depth"})
    ->Args({0, 0, 4})->Args({0, 0, 1})->Args({0, 1, 4})
    ->Args({1, 0, 4})->Args({1, 0, 1})->Args({1, 1, 4})
    ->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

// The driver's own synchronous copy of the same bytes: range(0) 0 h2d, 1
// d2h; range(1) 1 pinned (cuMemHostAlloc), 0 pageable.
void BM_PlainCuMemcpy(benchmark::State& state) {
  Gpu& gpu = TheGpu();
  if (!gpu.error.empty()) {
    state.SkipWithError(gpu.error.c_str());
    return;
  }
  const memd::cuda::DriverApi& api = gpu.driver->api();
  void* host = gpu.pageable->bytes.get();
  // Current before cuMemHostAlloc: the real driver refuses it on a thread
  // with no context (the first H100 run lost this row to that).
  CUcontext context = nullptr;
  if (CUresult result = api.DevicePrimaryCtxRetain(&context, 0); result != CUDA_SUCCESS) {
    state.SkipWithError(gpu.driver->Check(result, "cuDevicePrimaryCtxRetain").ToString().c_str());
    return;
  }
  api.CtxSetCurrent(context);
  void* pinned = nullptr;
  if (state.range(1) == 1) {
    if (CUresult result = api.MemHostAlloc(&pinned, kCopyBytes, CU_MEMHOSTALLOC_PORTABLE);
        result != CUDA_SUCCESS) {
      state.SkipWithError(gpu.driver->Check(result, "cuMemHostAlloc").ToString().c_str());
      api.DevicePrimaryCtxRelease(0);
      return;
    }
    std::memset(pinned, 1, kCopyBytes);
    host = pinned;
  }
  const CUdeviceptr device = gpu.device->Memory()->device_address;
  const std::string key = absl::StrCat("plain/", state.range(0), "/", state.range(1));
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    const CUresult result = state.range(0) == 0 ? api.MemcpyHtoD(device, host, kCopyBytes)
                                                : api.MemcpyDtoH(host, device, kCopyBytes);
    if (result != CUDA_SUCCESS) {
      state.SkipWithError(gpu.driver->Check(result, "cuMemcpy").ToString().c_str());
      break;
    }
    Record(state, key, SecondsSince(start), kCopyBytes);
  }
  if (pinned != nullptr) api.MemFreeHost(pinned);
  api.DevicePrimaryCtxRelease(0);
}
BENCHMARK(BM_PlainCuMemcpy)
    ->ArgNames({"d2h", "pinned"})
    ->Args({0, 1})->Args({0, 0})->Args({1, 1})->Args({1, 0})
    ->UseManualTime()->Iterations(5)->Unit(benchmark::kMillisecond);

// --- 2b. What one chunk costs the lane in driver calls ------------------------

// Per call of the CopyStream interface the lane makes for each chunk, on one
// stream of device 0: the async d2h copy of range(0) bytes into staging, its
// marker, arranging the wake, the wake's arrival after that, and the query
// of the marker. Each iteration is one chunk's worth, waited for.
void BM_ChunkCalls(benchmark::State& state) {
  Gpu& gpu = TheGpu();
  if (!gpu.error.empty()) {
    state.SkipWithError(gpu.error.c_str());
    return;
  }
  auto devices = gpu.backend->CopyDevices();
  if (!devices.ok() || devices->empty()) {
    state.SkipWithError("no copy device");
    return;
  }
  memd::backend::CopyDevice& device = *devices->front();
  const auto bytes = static_cast<std::uint64_t>(state.range(0));
  auto staging = device.AllocateStaging(bytes);
  auto stream = device.NewStream();
  if (!staging.ok() || !stream.ok()) {
    state.SkipWithError("no staging or stream");
    return;
  }
  const memd::backend::DeviceAddress source = gpu.device->Memory()->device_address;
  std::map<std::string, std::vector<double>> micros;
  auto lap = [&micros](const char* what, Clock::time_point& since) {
    const Clock::time_point now = Clock::now();
    micros[what].push_back(std::chrono::duration<double, std::micro>(now - since).count());
    since = now;
  };
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    Clock::time_point at = start;
    std::atomic<bool> woken{false};
    absl::Status status = (*stream)->DeviceToHost(staging->data(), source, bytes);
    lap("copy_us", at);
    auto marker = (*stream)->Mark();
    lap("mark_us", at);
    if (status.ok()) status = marker.status();
    if (status.ok()) status = (*stream)->WakeWhenDone([&woken] { woken.store(true); });
    lap("arrange_wake_us", at);
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      return;
    }
    while (!woken.load()) {
    }
    lap("until_woken_us", at);
    auto reached = (*stream)->Reached(*marker);
    lap("reached_us", at);
    (*stream)->Forget(*marker);
    if (!reached.ok() || !*reached) {
      state.SkipWithError("woken before the marker was reached");
      return;
    }
    state.SetIterationTime(SecondsSince(start));
  }
  for (const auto& [what, samples] : micros) {
    state.counters[what] = Percentile(samples, 50);
    state.counters[absl::StrCat(what.substr(0, what.size() - 3), "_p99_us")] =
        Percentile(samples, 99);
  }
}
BENCHMARK(BM_ChunkCalls)->ArgName("bytes")->Arg(4 << 10)->Arg(4 << 20)->UseManualTime()
    ->Iterations(500)->Unit(benchmark::kMicrosecond);

// --- The summary ----------------------------------------------------------------

void Line(const char* what, double value, const char* target) {
  std::printf("  %-58s %8.3f   %s\n", what, value, target);
}

void PrintSummary() {
  std::printf("\nPer benchmark: p50 and p99 of its iterations (the Time column above is\n"
              "their mean, which a cold first iteration can dominate)\n");
  for (const auto& [key, seconds] : Samples()) {
    std::printf("  %-24s p50 %10.3f ms   p99 %10.3f ms\n", key.c_str(),
                Percentile(seconds, 50) * 1e3, Percentile(seconds, 99) * 1e3);
  }
  std::printf("\nSummary (p50 of each benchmark's iterations; ratios of this run)\n");
  const int engine_threads = g_options.copy_threads;
  std::vector<int> counts = {1, 2};
  if (engine_threads > 2) counts.push_back(engine_threads);
  for (int threads : counts) {
    const double staging = P50(absl::StrCat("staging/", threads));
    const double memcpy = P50("memcpy");
    if (staging > 0 && memcpy > 0) {
      Line(absl::StrCat("staging speed / memcpy speed, ", threads, " thread(s)").c_str(),
           memcpy / staging, "target >= 0.9");
    }
  }
  const double drain_cached = P50("drain/0");
  const double drain_streaming = P50("drain/1");
  if (drain_cached > 0 && drain_streaming > 0) {
    Line(absl::StrCat("drain speed, streaming / cached stores, ", engine_threads, " threads")
             .c_str(),
         drain_cached / drain_streaming, "");
  }
  for (const char* direction : {"0", "1"}) {
    // The CPU's part of 1 GiB at the engine's copy threads: filling slots
    // (h2d) or draining them with streaming stores (d2h).
    const double staging_1g = P50(direction[0] == '0' ? absl::StrCat("staging/", engine_threads)
                                                      : std::string("drain/1")) *
                              (kCopyBytes / kStagingBytes);
    const std::string base = absl::StrCat("copy/", direction);
    const double pipelined = P50(base + "/0/4");
    const double serial = P50(base + "/0/1");
    const double dma = P50(base + "/1/4");
    if (pipelined <= 0 || dma <= 0) continue;
    const char* name = direction[0] == '0' ? "h2d" : "d2h";
    Line(absl::StrCat(name, " staged depth 4 / max(staging, dma)").c_str(),
         pipelined / std::max(staging_1g, dma), "target <= 1.10");
    Line(absl::StrCat(name, " staged depth 1 / (staging + dma)  [control]").c_str(),
         serial / (staging_1g + dma), "near 1");
    const double plain = P50(absl::StrCat("plain/", direction, "/1"));
    if (plain > 0) {
      // Issue 11's target 5 (>= 0.9 of the link) asked more than CPU
      // staging can give where the link outruns the copy threads; issue 28
      // restates it against what the threads can copy.
      Line(absl::StrCat(name, " staged pageable speed / plain pinned cuMemcpy").c_str(),
           plain / pipelined, "");
      const double memcpy = P50("memcpy");
      if (memcpy > 0) {
        const double link = kCopyBytes / plain;
        const double threads_copy = engine_threads * kStagingBytes / memcpy;
        Line(absl::StrCat(name, " staged pageable / min(link, ", engine_threads,
                          " threads x memcpy)")
                 .c_str(),
             kCopyBytes / pipelined / std::min(link, threads_copy), "target >= 0.8");
      }
      Line(absl::StrCat(name, " engine pinned speed / plain pinned cuMemcpy").c_str(),
           plain / dma, "");
    }
    const double plain_pageable = P50(absl::StrCat("plain/", direction, "/0"));
    if (plain_pageable > 0) {
      Line(absl::StrCat(name, " staged pageable speed / plain pageable cuMemcpy").c_str(),
           plain_pageable / pipelined, "");
    }
  }
  const auto& alone = Samples()["critical/0"];
  const auto& loaded = Samples()["critical/1"];
  const double dma = P50("copy/0/1/4");
  if (!alone.empty() && !loaded.empty() && dma > 0) {
    const double chunk_ms = dma * 1e3 * g_options.chunk_bytes / kCopyBytes;
    Line("critical 64 KiB p99 alone (ms)", Percentile(alone, 99) * 1e3, "");
    Line("critical 64 KiB p99 under background load (ms)", Percentile(loaded, 99) * 1e3, "");
    Line("  allowed: p99 alone + 2 chunk times (ms)",
         Percentile(alone, 99) * 1e3 + 2 * chunk_ms, "");
    // The background copies are pageable: a copy thread busy staging one of
    // their chunks is what a critical copy can wait for besides the DMA.
    const double staged_chunk_ms = P50(absl::StrCat("staging/", g_options.copy_threads)) * 1e3 *
                                   g_options.chunk_bytes / kStagingBytes;
    Line(absl::StrCat("  one staged background chunk, ", g_options.copy_threads, " threads (ms)")
             .c_str(),
         staged_chunk_ms, "");
    // The part of it the lane decides: submitted to first chunk taken.
    const auto& waited = Samples()["critical_wait/1"];
    if (!waited.empty()) {
      Line("  its wait for its first chunk under load, p50 (ms)", Percentile(waited, 50) * 1e3,
           "");
      Line("  its wait for its first chunk under load, p99 (ms)", Percentile(waited, 99) * 1e3,
           "");
    }
  }
  const double cat = P50("cat");
  if (cat > 0) Line("cat file > /dev/null GB/s", g_file_bytes / cat / 1e9, "");
  const double read = P50("read/parallel");
  if (read > 0) {
    Line(absl::StrCat("parallel read into touched memory GB/s, ", UsableCpus(), " threads").c_str(),
         g_file_bytes / read / 1e9, "");
  }
  const double read_direct = P50("read/parallel-direct");
  if (read_direct > 0) {
    Line(absl::StrCat("same with O_DIRECT (from storage) GB/s, ", UsableCpus(), " threads")
             .c_str(),
         g_file_bytes / read_direct / 1e9, "");
  }
  for (const char* threads : {"1", "0"}) {
    const double staged = P50(absl::StrCat("read/staged/", threads));
    if (staged <= 0) continue;
    Line(absl::StrCat("read stage alone (file_reader, ring of 8 x 32 MiB) GB/s, ",
                      threads[0] == '0' ? absl::StrCat(ParallelFileReader::DefaultReadThreads())
                                        : std::string(threads),
                      " thread(s)")
             .c_str(),
         g_file_bytes / staged / 1e9, "");
  }
  // The driver's own pinned h2d figure, from BM_PlainCuMemcpy in this run.
  const double plain_pinned = P50("plain/0/1");
  for (const char* location : {"host", "pinned", "device", "device-direct"}) {
    const double file = P50(absl::StrCat("file/", location));
    if (file <= 0) continue;
    Line(absl::StrCat("file -> ", location, " (memctl put) GB/s").c_str(),
         g_file_bytes / file / 1e9, "");
    const std::string_view where = location;
    if (read > 0 && !where.starts_with("device")) {
      Line(absl::StrCat("file -> ", location, " / parallel read").c_str(), read / file,
           "target >= 0.9 (issue 28)");
    }
    if (where == "device") {
      if (read > 0) Line("file -> device / parallel read", read / file, "");
      if (plain_pinned > 0) {
        Line("file -> device speed / pinned cuMemcpy speed",
             (g_file_bytes / file) / (kCopyBytes / plain_pinned),
             "target >= 0.8 (issue 28, real GPU)");
      }
    }
    if (where == "device-direct" && read_direct > 0) {
      Line("file -> device --direct-io / parallel O_DIRECT read", read_direct / file,
           "target >= 0.9 (issue 28)");
    }
  }
}

}  // namespace
}  // namespace memd::transfer_bench

int main(int argc, char** argv) {
  using namespace memd::transfer_bench;
  if (!ParseOwnFlags(argc, argv)) {
    std::fprintf(stderr, "bad --cpu, --file or --file_bytes\n");
    return 2;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  PrintSummary();
  benchmark::Shutdown();
  return 0;
}
