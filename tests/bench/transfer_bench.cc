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
// BM_Memcpy, BM_Staging/threads:T  256 MiB in 4 MiB chunks into four rotating
//     pinned slots: plain memcpy, and the engine's CopyThreads with T threads.
// BM_Drain/streaming:S            256 MiB out of the slots into a large
//     destination on 2 threads: memcpy (S=0) or non-temporal stores (S=1).
// BM_Copy/<dir>/<source>/depth:D    A 1 GiB copy through the engine: h2d or
//     d2h, from/to pageable or pinned host memory, ring depth D (1 serialises
//     staging and DMA: the control).
// BM_PlainCuMemcpy/<dir>/<host>     cuMemcpyHtoD/DtoH of the same 1 GiB from
//     pinned (cuMemHostAlloc) or pageable memory: the driver's own figure.
// BM_ChunkCalls/bytes:B            The CopyStream calls the lane makes per
//     chunk (async copy of B bytes, Mark, WakeWhenDone, the wake, Reached),
//     each timed: p50 and p99 in microseconds.
// BM_Critical/load:L                Latency of a 64 KiB critical h2d copy,
//     alone (L=0) and while background 1 GiB copies saturate the link (L=1).
// BM_FileToDevice, BM_Cat           `memctl put --location device:0 FILE`
//     against a real memd, and `cat FILE > /dev/null`, the file in the page
//     cache.
//
// After the runs a summary prints the ratios the targets are about (issue
// 11, docs/benchmarks.md). On the fake driver every device figure is
// MODELLED: it checks the overlap logic, not PCIe.

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "benchmark/benchmark.h"
#include "common/cuda/driver.h"
#include "common/location.h"
#include "daemon/backend/cuda/cuda_backend.h"
#include "daemon/transfer/copy_threads.h"
#include "daemon/transfer/engine.h"
#include "tests/support/run_program.h"
#include "tests/support/daemon_process.h"

namespace {

using Clock = std::chrono::steady_clock;
using memd::Location;
using memd::backend::Segment;
using memd::backend::SegmentMemory;
namespace transfer = memd::transfer;

constexpr std::uint64_t kMiB = 1 << 20;
constexpr std::uint64_t kCopyBytes = std::uint64_t{1} << 30;
constexpr std::uint64_t kStagingBytes = 256 * kMiB;
constexpr std::uint64_t kChunk = 4 * kMiB;
constexpr std::uint64_t kCriticalBytes = 64 << 10;

// What the flags set (main, ParseOwnFlags).
std::string g_file = "/tmp/memd-transfer-bench.data";
std::string g_put_flags;  // --put_flags: more flags for memctl put.
// --copy_threads, --chunks_in_flight, --chunk_bytes; else the daemon's
// defaults.
transfer::EngineOptions g_options;
std::uint64_t g_file_bytes = std::uint64_t{2} << 30;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * samples.size()));
  return samples[std::clamp<std::size_t>(rank, 1, samples.size()) - 1];
}

// Per benchmark name, the seconds of each iteration: the summary's input.
std::map<std::string, std::vector<double>>& Samples() {
  static auto* samples = new std::map<std::string, std::vector<double>>;
  return *samples;
}

// `key` names the benchmark and its arguments in the summary.
void Record(benchmark::State& state, const std::string& key, double seconds,
            std::uint64_t bytes) {
  state.SetIterationTime(seconds);
  Samples()[key].push_back(seconds);
  state.counters["GBps"] = benchmark::Counter(
      static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
}

double P50(const std::string& name) { return Percentile(Samples()[name], 50); }

// Host memory touched once, so that page faults are not timed.
struct HostMemory {
  explicit HostMemory(std::uint64_t bytes) : bytes(new std::byte[bytes]), size(bytes) {
    for (std::uint64_t i = 0; i < size; i += 4096) this->bytes[i] = std::byte(i >> 12);
  }
  std::unique_ptr<std::byte[]> bytes;
  std::uint64_t size;
};

// The GPU side: a CUDA backend over whatever driver MEMD_CUDA_DRIVER names
// (the fake, or libcuda.so.1), with one device buffer and one pinned buffer
// of kCopyBytes, made once.
struct Gpu {
  std::shared_ptr<memd::cuda::Driver> driver;
  std::unique_ptr<memd::backend::CudaBackend> backend;
  std::unique_ptr<Segment> device;
  std::unique_ptr<Segment> pinned;
  std::unique_ptr<HostMemory> pageable;
  std::string error;
};

Gpu& TheGpu() {
  static Gpu* gpu = [] {
    auto* gpu = new Gpu;
    auto driver = memd::cuda::Driver::Load();
    if (!driver.ok()) {
      gpu->error = driver.status().ToString();
      return gpu;
    }
    gpu->driver = *driver;
    auto backend =
        memd::backend::CudaBackend::Create(gpu->driver, memd::backend::CudaHandles::kAuto);
    if (!backend.ok()) {
      gpu->error = backend.status().ToString();
      return gpu;
    }
    gpu->backend = std::move(*backend);
    auto device = gpu->backend->Reserve(Location::Device(0), kCopyBytes);
    auto pinned = gpu->backend->Reserve(Location::Pinned(), kCopyBytes);
    if (!device.ok() || !pinned.ok()) {
      gpu->error = (device.ok() ? pinned.status() : device.status()).ToString();
      return gpu;
    }
    gpu->device = std::move(*device);
    gpu->pinned = std::move(*pinned);
    gpu->pageable = std::make_unique<HostMemory>(kCopyBytes);
    return gpu;
  }();
  return *gpu;
}

// An engine over the GPU's copy devices with the ring depth asked for.
std::unique_ptr<transfer::Engine> StartEngine(int depth, std::string* error) {
  Gpu& gpu = TheGpu();
  if (!gpu.error.empty()) {
    *error = gpu.error;
    return nullptr;
  }
  auto devices = gpu.backend->CopyDevices();
  if (!devices.ok()) {
    *error = devices.status().ToString();
    return nullptr;
  }
  transfer::EngineOptions options = g_options;
  options.staging_slots = depth;
  auto engine = transfer::Engine::Start(std::move(*devices), options);
  if (!engine.ok()) {
    *error = engine.status().ToString();
    return nullptr;
  }
  return std::move(*engine);
}

transfer::Endpoint EndpointOf(SegmentMemory memory, std::uint64_t bytes, std::uint64_t id) {
  transfer::Endpoint endpoint;
  endpoint.memory = memory;
  endpoint.length = bytes;
  endpoint.buffer_id = id;
  return endpoint;
}

// Submits and waits; the seconds from Submit to the end, or -1 on error.
double CopyAndWait(transfer::Engine& engine, transfer::TransferSpec spec, std::string* error) {
  const Clock::time_point start = Clock::now();
  auto id = engine.Submit(spec);
  if (!id.ok()) {
    *error = id.status().ToString();
    return -1;
  }
  absl::Notification done;
  absl::Status outcome;
  auto watch = engine.Watch(spec.session, *id, [&](const transfer::TransferProgress& progress) {
    outcome = progress.status;
    done.Notify();
  });
  if (!watch.ok()) {
    *error = watch.status().ToString();
    return -1;
  }
  done.WaitForNotification();
  const double seconds = SecondsSince(start);
  if (!outcome.ok()) {
    *error = outcome.ToString();
    return -1;
  }
  return seconds;
}

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

void BM_Staging(benchmark::State& state) {
  transfer::CopyThreads threads(static_cast<int>(state.range(0)));
  const std::string key = absl::StrCat("staging/", state.range(0));
  for (auto _ : state) {
    Record(state, key, CopyIntoSlots([&](std::byte* to, const std::byte* from, std::uint64_t n) {
             threads.Copy(to, from, n);
           }),
           kStagingBytes);
  }
}
BENCHMARK(BM_Staging)->ArgName("threads")->Arg(1)->Arg(2)->UseManualTime()->Iterations(20)
    ->Unit(benchmark::kMillisecond);

// The d2h side of staging: 256 MiB out of the four rotating slots into a
// client-sized destination, on the engine's default 2 threads, with cached
// (memcpy) or non-temporal stores (what the engine drains the ring with).
void BM_Drain(benchmark::State& state) {
  transfer::CopyThreads threads(2);
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

// --- 3. Priority under load ---------------------------------------------------

// Background 1 GiB copies, one after the other, until destroyed.
class BackgroundLoad {
 public:
  explicit BackgroundLoad(transfer::Engine& engine) : engine_(engine) {
    thread_ = std::thread([this] { Run(); });
  }
  ~BackgroundLoad() {
    stop_ = true;
    thread_.join();
  }
  std::string error() const { return error_; }
  // Background copies finished so far.
  int copies() const { return copies_.load(); }

 private:
  void Run() {
    Gpu& gpu = TheGpu();
    transfer::TransferSpec spec;
    spec.session = 2;
    spec.priority = transfer::Priority::kBackground;
    spec.source = EndpointOf({.host = gpu.pageable->bytes.get()}, kCopyBytes, 1);
    spec.destination = EndpointOf(*gpu.device->Memory(), kCopyBytes, 2);
    while (!stop_) {
      if (CopyAndWait(engine_, spec, &error_) < 0) return;
      ++copies_;
    }
  }

  transfer::Engine& engine_;
  std::atomic<bool> stop_{false};
  std::atomic<int> copies_{0};
  std::string error_;
  std::thread thread_;
};

void BM_Critical(benchmark::State& state) {
  std::string error;
  std::unique_ptr<transfer::Engine> engine = StartEngine(4, &error);
  if (engine == nullptr) {
    state.SkipWithError(error.c_str());
    return;
  }
  Gpu& gpu = TheGpu();
  HostMemory source(kCriticalBytes);
  transfer::TransferSpec spec;
  spec.session = 1;
  spec.priority = transfer::Priority::kCritical;
  spec.source = EndpointOf({.host = source.bytes.get()}, kCriticalBytes, 3);
  // Its own part of the device buffer: no range order with the background.
  spec.destination = EndpointOf(gpu.device->Memory()->At(kCopyBytes - kCriticalBytes),
                                kCriticalBytes, 4);
  std::unique_ptr<BackgroundLoad> load;
  if (state.range(0) == 1) {
    load = std::make_unique<BackgroundLoad>(*engine);
    // Probes start in the steady state: after one whole background copy,
    // whose first pass may fault in the buffers' pages (run alone, with
    // --benchmark_filter, nothing before it has touched them).
    const auto give_up = Clock::now() + std::chrono::seconds(30);
    while (load->copies() == 0 && Clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::vector<double> micros;
  for (auto _ : state) {
    const double seconds = CopyAndWait(*engine, spec, &error);
    if (seconds < 0) {
      state.SkipWithError(error.c_str());
      return;
    }
    micros.push_back(seconds * 1e6);
    Record(state, absl::StrCat("critical/", state.range(0)), seconds, kCriticalBytes);
    // Spread the probes over the background copies' chunks.
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  state.counters["p50_us"] = Percentile(micros, 50);
  state.counters["p99_us"] = Percentile(micros, 99);
  if (load != nullptr && !load->error().empty()) state.SkipWithError(load->error().c_str());
}
BENCHMARK(BM_Critical)->ArgName("load")->Arg(0)->Arg(1)->UseManualTime()->Iterations(300)
    ->Unit(benchmark::kMicrosecond);

// --- 4. A file into a device buffer ------------------------------------------


// The file, made once and read once, so that both sides find it cached.
bool PrepareFile(std::string* error) {
  static bool ready = false;
  if (ready) return true;
  struct stat status{};
  if (::stat(g_file.c_str(), &status) != 0 ||
      static_cast<std::uint64_t>(status.st_size) != g_file_bytes) {
    const std::string command =
        absl::StrCat("head -c ", g_file_bytes, " /dev/urandom > ", g_file);
    if (std::system(command.c_str()) != 0) {
      *error = absl::StrCat("cannot write ", g_file);
      return false;
    }
  }
  if (std::system(absl::StrCat("cat ", g_file, " > /dev/null").c_str()) != 0) {
    *error = absl::StrCat("cannot read ", g_file);
    return false;
  }
  ready = true;
  return true;
}

// Runs `command` with sh; the seconds it took, or -1 when it failed.
double TimeCommand(const std::string& command) {
  const Clock::time_point start = Clock::now();
  const int status = std::system(command.c_str());
  const double seconds = SecondsSince(start);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? seconds : -1;
}

void BM_Cat(benchmark::State& state) {
  std::string error;
  if (!PrepareFile(&error)) {
    state.SkipWithError(error.c_str());
    return;
  }
  for (auto _ : state) {
    const double seconds = TimeCommand(absl::StrCat("cat ", g_file, " > /dev/null"));
    if (seconds < 0) {
      state.SkipWithError("cat failed");
      return;
    }
    Record(state, "cat", seconds, g_file_bytes);
  }
}
BENCHMARK(BM_Cat)->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_FileToDevice(benchmark::State& state) {
  std::string error;
  if (!PrepareFile(&error)) {
    state.SkipWithError(error.c_str());
    return;
  }
  auto daemon = memd::test::DaemonProcess::Start();
  if (!daemon.ok()) {
    state.SkipWithError(daemon.status().ToString().c_str());
    return;
  }
  const std::string memctl = absl::StrCat(memd::test::BinDir(), "/memctl");
  int round = 0;
  for (auto _ : state) {
    const std::string name = absl::StrCat("bench/file-", round++);
    const double seconds = TimeCommand(absl::StrCat(
        "MEMD_SOCKET_DIR=", (*daemon)->socket_dir(), " ", memctl,
        " put --location device:0 --ephemeral ", g_put_flags, " ", name, " ", g_file,
        " > /dev/null"));
    if (seconds < 0) {
      state.SkipWithError(absl::StrCat("memctl put failed; memd said: ", (*daemon)->Log())
                              .c_str());
      return;
    }
    Record(state, "file", seconds, g_file_bytes);
  }
}
BENCHMARK(BM_FileToDevice)->UseManualTime()->Iterations(3)->Unit(benchmark::kMillisecond);

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
  for (int threads : {1, 2}) {
    const double staging = P50(absl::StrCat("staging/", threads));
    const double memcpy = P50("memcpy");
    if (staging > 0) {
      Line(absl::StrCat("staging speed / memcpy speed, ", threads, " thread(s)").c_str(),
           memcpy / staging, "target >= 0.9");
    }
  }
  const double drain_cached = P50("drain/0");
  const double drain_streaming = P50("drain/1");
  if (drain_cached > 0 && drain_streaming > 0) {
    Line("drain speed, streaming / cached stores, 2 threads", drain_cached / drain_streaming, "");
  }
  for (const char* direction : {"0", "1"}) {
    // The CPU's part of 1 GiB at the engine's default copy threads (2):
    // filling slots (h2d) or draining them with streaming stores (d2h).
    const double staging_1g = P50(direction[0] == '0' ? "staging/2" : "drain/1") *
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
      Line(absl::StrCat(name, " staged pageable speed / plain pinned cuMemcpy").c_str(),
           plain / pipelined, "target >= 0.9 (real GPU)");
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
    const double staged_chunk_ms = P50("staging/2") * 1e3 * g_options.chunk_bytes / kStagingBytes;
    Line("  one staged background chunk, 2 threads (ms)", staged_chunk_ms, "");
  }
  const double cat = P50("cat");
  const double file = P50("file");
  if (cat > 0 && file > 0) {
    Line("file -> device GB/s", g_file_bytes / file / 1e9, "");
    Line("cat file > /dev/null GB/s", g_file_bytes / cat / 1e9, "");
  }
}

// Takes --cpu, --file and --file_bytes out of argv.
bool ParseOwnFlags(int& argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    int cpu = -1;
    if (arg.starts_with("--cpu=") && absl::SimpleAtoi(absl::string_view(arg.substr(6).data(), arg.size() - 6), &cpu)) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      if (::sched_setaffinity(0, sizeof(set), &set) != 0) return false;
    } else if (arg.starts_with("--copy_threads=")) {
      if (!absl::SimpleAtoi(absl::string_view(arg.data() + 15, arg.size() - 15),
                            &g_options.copy_threads)) {
        return false;
      }
    } else if (arg.starts_with("--chunks_in_flight=")) {
      if (!absl::SimpleAtoi(absl::string_view(arg.data() + 19, arg.size() - 19),
                            &g_options.chunks_in_flight)) {
        return false;
      }
    } else if (arg.starts_with("--chunk_bytes=")) {
      if (!absl::SimpleAtoi(absl::string_view(arg.data() + 14, arg.size() - 14),
                            &g_options.chunk_bytes)) {
        return false;
      }
    } else if (arg.starts_with("--put_flags=")) {
      g_put_flags = std::string(arg.substr(12));
    } else if (arg.starts_with("--file=")) {
      g_file = std::string(arg.substr(7));
    } else if (arg.starts_with("--file_bytes=")) {
      if (!absl::SimpleAtoi(absl::string_view(arg.substr(13).data(), arg.size() - 13), &g_file_bytes)) return false;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
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
