// memd-device-open-bench: what opening a device buffer costs a process
// (issue 28, target 3), against the host re-open and the CUDA driver's own
// floor for importing that much memory, all in one run:
//
//   BM_HostReopen        open + release of a sealed host buffer this client
//                        mapped before (the mapping is reused)
//   BM_DeviceReopen      the same for a device buffer: the import libmemd
//                        kept is reused, memd sends no descriptor
//   BM_DeviceFirstOpen   a client that keeps no imports
//                        (device_cache_bytes = 0): every open receives the
//                        descriptor and imports, as a process's first does
//   BM_ImportFloor       the driver alone on that descriptor:
//                        cuMemImportFromShareableHandle + cuMemAddressReserve
//                        + cuMemMap + cuMemSetAccess (then undone, untimed)
//
// The summary says whether a re-open costs at most a host re-open plus the
// floor, and a first open at most 2 ms. On a GPU machine (the bundle runs
// it): libcuda.so.1. Here: the fake, whose import is an mmap —
//
//   MEMD_CUDA_DRIVER=build/lib/libmemd_fake_cuda.so MEMD_FAKE_CUDA_MEMORY=4294967296
//     build/bin/memd-device-open-bench [--bytes=N] [--iterations=N] [--cpu=N]
//   (one line)

#include <cuda.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "common/cuda/driver.h"
#include "memd/client.h"
#include "memd/v1/memd.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/raw_session.h"

namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t g_bytes = std::uint64_t{1} << 30;
int g_iterations = 200;
int g_cpu = -1;  // --cpu=N: this process and memd on that CPU alone.

double Micros(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::micro>(end - start).count();
}

double Percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const std::size_t at = static_cast<std::size_t>(p / 100.0 * (samples.size() - 1) + 0.5);
  return samples[std::min(at, samples.size() - 1)];
}

// What every benchmark shares, made once: memd on the CUDA backend with a
// sealed device buffer and a sealed host buffer of g_bytes each, and the
// driver loaded in this process with device 0's primary context current.
struct Setup {
  std::unique_ptr<memd::test::DaemonProcess> daemon;
  std::shared_ptr<const memd::cuda::Driver> driver;
  CUcontext context = nullptr;
  std::unique_ptr<memd::Client> client;    // Keeps imports and mappings.
  std::unique_ptr<memd::Client> uncached;  // Keeps no device imports.
  std::string error;
  std::map<std::string, double> p50;  // The summary's input, by benchmark.
};

Setup& TheSetup() {
  static Setup* setup = [] {
    auto* made = new Setup;
    const char* path = std::getenv("MEMD_CUDA_DRIVER");
    std::vector<std::string> args = {"--backend", "cuda"};
    if (path != nullptr && *path != '\0') args.insert(args.end(), {"--cuda-driver", path});
    auto daemon = memd::test::DaemonProcess::Start(args, absl::Seconds(20), g_cpu);
    if (!daemon.ok()) {
      made->error = daemon.status().ToString();
      return made;
    }
    made->daemon = std::move(*daemon);
    auto driver = memd::cuda::Driver::Load(path == nullptr ? "" : path);
    if (!driver.ok()) {
      made->error = driver.status().ToString();
      return made;
    }
    made->driver = std::move(*driver);
    const memd::cuda::DriverApi& api = made->driver->api();
    if (api.DevicePrimaryCtxRetain(&made->context, 0) != CUDA_SUCCESS ||
        api.CtxSetCurrent(made->context) != CUDA_SUCCESS) {
      made->error = "cannot make device 0's primary context current";
      return made;
    }
    const std::string dir = made->daemon->socket_dir();
    auto client = memd::Client::Connect({.socket_dir = dir, .mapping_cache_bytes = g_bytes * 2,
                                         .device_cache_bytes = g_bytes * 2});
    auto uncached = memd::Client::Connect({.socket_dir = dir, .device_cache_bytes = 0});
    if (!client.ok() || !uncached.ok()) {
      made->error = (client.ok() ? uncached.status() : client.status()).ToString();
      return made;
    }
    made->client = std::move(*client);
    made->uncached = std::move(*uncached);
    for (const char* location : {"device:0", "host"}) {
      const std::string name = location == std::string("host") ? "host" : "device";
      auto buffer = made->uncached->Create(name, g_bytes, {.location = location});
      absl::Status sealed = buffer.ok() ? buffer->Seal() : buffer.status();
      if (!sealed.ok()) {
        made->error = absl::StrCat("making the ", location, " buffer: ", sealed.ToString());
        return made;
      }
    }
    return made;
  }();
  return *setup;
}

void Report(benchmark::State& state, const std::string& key, const std::vector<double>& us) {
  state.counters["p50_us"] = Percentile(us, 50);
  state.counters["p99_us"] = Percentile(us, 99);
  TheSetup().p50[key] = Percentile(us, 50);
}

// Open + release of `name` through `client`; the open is timed.
void OpenLoop(benchmark::State& state, memd::Client& client, const std::string& name,
              const std::string& key) {
  std::vector<double> open;
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    auto buffer = client.Open(name);
    const Clock::time_point end = Clock::now();
    if (!buffer.ok()) {
      state.SkipWithError(buffer.status().ToString().c_str());
      return;
    }
    open.push_back(Micros(start, end));
    state.SetIterationTime(open.back() / 1e6);
  }
  Report(state, key, open);
}

void BM_HostReopen(benchmark::State& state) {
  Setup& setup = TheSetup();
  if (!setup.error.empty()) return state.SkipWithError(setup.error.c_str());
  OpenLoop(state, *setup.client, "host", "host_reopen");
}

void BM_DeviceReopen(benchmark::State& state) {
  Setup& setup = TheSetup();
  if (!setup.error.empty()) return state.SkipWithError(setup.error.c_str());
  OpenLoop(state, *setup.client, "device", "device_reopen");
}

void BM_DeviceFirstOpen(benchmark::State& state) {
  Setup& setup = TheSetup();
  if (!setup.error.empty()) return state.SkipWithError(setup.error.c_str());
  OpenLoop(state, *setup.uncached, "device", "device_first_open");
}

void BM_ImportFloor(benchmark::State& state) {
  Setup& setup = TheSetup();
  if (!setup.error.empty()) return state.SkipWithError(setup.error.c_str());
  auto raw = memd::test::RawSession::Connect(setup.daemon->socket_dir());
  if (!raw.ok()) return state.SkipWithError(raw.status().ToString().c_str());
  memd::v1::OpenRequest request;
  request.set_name("device");
  request.set_access(memd::v1::READ);
  memd::v1::Lease lease;
  grpc::Status opened = raw->Call(&memd::v1::Memd::Stub::Open, request, &lease);
  if (!opened.ok()) return state.SkipWithError(opened.error_message().c_str());
  auto fd = raw->TakeFd(lease.handle().fd_seq());
  if (!fd.ok()) return state.SkipWithError(fd.status().ToString().c_str());
  const memd::cuda::DriverApi& api = setup.driver->api();
  const std::uint64_t bytes = lease.handle().segment_bytes();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  size_t granularity = 0;
  api.MemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  std::vector<double> floor;
  for (auto _ : state) {
    CUmemGenericAllocationHandle handle = 0;
    CUdeviceptr base = 0;
    const Clock::time_point start = Clock::now();
    bool ok = api.MemImportFromShareableHandle(
                  &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd->get())),
                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == CUDA_SUCCESS &&
              api.MemAddressReserve(&base, bytes, granularity, 0, 0) == CUDA_SUCCESS &&
              api.MemMap(base, bytes, 0, handle, 0) == CUDA_SUCCESS &&
              api.MemSetAccess(base, bytes, &access, 1) == CUDA_SUCCESS;
    const Clock::time_point end = Clock::now();
    if (base != 0) {
      api.MemUnmap(base, bytes);
      api.MemAddressFree(base, bytes);
    }
    if (handle != 0) api.MemRelease(handle);
    if (!ok) return state.SkipWithError("the driver refused the import");
    floor.push_back(Micros(start, end));
    state.SetIterationTime(floor.back() / 1e6);
  }
  Report(state, "import_floor", floor);
}

void Summary() {
  const std::map<std::string, double>& p50 = TheSetup().p50;
  auto at = [&](const char* key) {
    auto found = p50.find(key);
    return found == p50.end() ? -1.0 : found->second;
  };
  const double host = at("host_reopen"), reopen = at("device_reopen");
  const double first = at("device_first_open"), floor = at("import_floor");
  if (host < 0 || reopen < 0 || first < 0 || floor < 0) return;
  std::printf("\n%llu bytes, p50: device re-open %.1f us, host re-open %.1f us, import floor "
              "%.1f us, first open %.1f us\n",
              static_cast<unsigned long long>(g_bytes), reopen, host, floor, first);
  std::printf("re-open <= host re-open + floor (%.1f us): %s (ratio %.2f)\n", host + floor,
              reopen <= host + floor ? "met" : "MISSED", reopen / (host + floor));
  std::printf("first open <= 2 ms: %s\n", first <= 2000 ? "met" : "MISSED");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::uint64_t value = 0;
    if (arg.rfind("--bytes=", 0) == 0 && absl::SimpleAtoi(arg.substr(8), &value) && value > 0) {
      g_bytes = value;
    } else if (arg.rfind("--iterations=", 0) == 0 &&
               absl::SimpleAtoi(arg.substr(13), &value) && value > 0 && value < 1000000) {
      g_iterations = static_cast<int>(value);
    } else if (arg.rfind("--cpu=", 0) == 0 && absl::SimpleAtoi(arg.substr(6), &value) &&
               value < CPU_SETSIZE) {
      g_cpu = static_cast<int>(value);
    } else {
      std::fprintf(stderr, "unknown argument: %s\nusage: %s [--bytes=N] [--iterations=N] "
                   "[--cpu=N] [--benchmark_* flags]\n", argv[i], argv[0]);
      return 2;
    }
  }
  if (g_cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(g_cpu, &one);
    if (::sched_setaffinity(0, sizeof(one), &one) != 0) {
      std::perror("sched_setaffinity");
      return 2;
    }
  }
  for (auto [name, function] :
       {std::pair{"BM_HostReopen", &BM_HostReopen}, {"BM_DeviceReopen", &BM_DeviceReopen},
        {"BM_DeviceFirstOpen", &BM_DeviceFirstOpen}, {"BM_ImportFloor", &BM_ImportFloor}}) {
    benchmark::RegisterBenchmark(name, function)
        ->UseManualTime()
        ->Iterations(g_iterations)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::AddCustomContext("bytes", std::to_string(g_bytes));
  benchmark::AddCustomContext("cpu", g_cpu < 0 ? "unpinned" : std::to_string(g_cpu));
  benchmark::RunSpecifiedBenchmarks();
  Summary();
  benchmark::Shutdown();
  return 0;
}
