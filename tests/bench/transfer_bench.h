#pragma once

// What memd-transfer-bench's benchmark files share (transfer_bench.cc,
// transfer_bench_load.cc): the flags, the samples the summary reads, the GPU
// and the engine every device benchmark copies with
// (transfer_bench_support.cc).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "common/cuda/driver.h"
#include "daemon/backend/cuda/cuda_backend.h"
#include "daemon/transfer/engine.h"

namespace memd::transfer_bench {

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

// What the flags set (ParseOwnFlags).
extern std::string g_file;
extern std::string g_put_flags;  // --put_flags: more flags for memctl put.
// --copy_threads, --chunks_in_flight, --chunk_bytes; else the daemon's
// defaults.
extern transfer::EngineOptions g_options;
extern std::uint64_t g_file_bytes;

// Takes this program's own flags (--cpu, --copy_threads, ...) out of argv.
bool ParseOwnFlags(int& argc, char** argv);

double SecondsSince(Clock::time_point start);
double Percentile(std::vector<double> samples, double p);
// Per benchmark name, the seconds of each iteration: the summary's input.
std::map<std::string, std::vector<double>>& Samples();
// `key` names the benchmark and its arguments in the summary.
void Record(benchmark::State& state, const std::string& key, double seconds,
            std::uint64_t bytes);
double P50(const std::string& name);

// Host memory touched once, so that page faults are not timed.
struct HostMemory {
  explicit HostMemory(std::uint64_t bytes);
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
Gpu& TheGpu();

// An engine over the GPU's copy devices with the ring depth asked for.
std::unique_ptr<transfer::Engine> StartEngine(int depth, std::string* error);
transfer::Endpoint EndpointOf(SegmentMemory memory, std::uint64_t bytes, std::uint64_t id);
// Submits and waits; the seconds from Submit to the end, or -1 on error.
double CopyAndWait(transfer::Engine& engine, transfer::TransferSpec spec, std::string* error,
                   transfer::TransferProgress* final = nullptr);

}  // namespace memd::transfer_bench
