// memd-transfer-bench's shared pieces (transfer_bench.h): flags, samples,
// the GPU and the engine.

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/synchronization/notification.h"
#include "common/cpus.h"
#include "tests/bench/transfer_bench.h"

namespace memd::transfer_bench {

std::string g_file = "/tmp/memd-transfer-bench.data";
std::string g_put_flags;
// copy_threads 0 until ParseOwnFlags: then --copy_threads, or memd's default.
transfer::EngineOptions g_options = [] {
  transfer::EngineOptions options;
  options.copy_threads = 0;
  return options;
}();
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

std::map<std::string, std::vector<double>>& Samples() {
  static auto* samples = new std::map<std::string, std::vector<double>>;
  return *samples;
}

void Record(benchmark::State& state, const std::string& key, double seconds,
            std::uint64_t bytes) {
  state.SetIterationTime(seconds);
  Samples()[key].push_back(seconds);
  state.counters["GBps"] = benchmark::Counter(
      static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
}

double P50(const std::string& name) { return Percentile(Samples()[name], 50); }

HostMemory::HostMemory(std::uint64_t bytes) : bytes(new std::byte[bytes]), size(bytes) {
  for (std::uint64_t i = 0; i < size; i += 4096) this->bytes[i] = std::byte(i >> 12);
}

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

double CopyAndWait(transfer::Engine& engine, transfer::TransferSpec spec, std::string* error,
                   transfer::TransferProgress* final) {
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
    if (final != nullptr) *final = progress;
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
  // As memd sizes it, after --cpu: the CPUs this bench may run on.
  if (g_options.copy_threads == 0) {
    g_options.copy_threads = transfer::DefaultCopyThreads(UsableCpus());
  }
  return true;
}

}  // namespace memd::transfer_bench
