// memd-transfer-bench, part two: a critical copy's latency under a
// saturating background copy, and a file into a device buffer through a real
// memd against `cat` (what each measures: transfer_bench.cc's header).

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cpus.h"
#include "common/file_reader.h"
#include "tests/bench/transfer_bench.h"
#include "tests/support/daemon_process.h"
#include "tests/support/run_program.h"

namespace memd::transfer_bench {
namespace {

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
  std::vector<double> waits;
  for (auto _ : state) {
    transfer::TransferProgress progress;
    const double seconds = CopyAndWait(*engine, spec, &error, &progress);
    if (seconds < 0) {
      state.SkipWithError(error.c_str());
      return;
    }
    micros.push_back(seconds * 1e6);
    Record(state, absl::StrCat("critical/", state.range(0)), seconds, kCriticalBytes);
    // Submitted to its first chunk taken: what the lane made it wait for
    // (another class's fill or drain), apart from the DMA and the wakes.
    const double waited = absl::ToDoubleSeconds(progress.started - progress.submitted);
    waits.push_back(waited * 1e6);
    Samples()[absl::StrCat("critical_wait/", state.range(0))].push_back(waited);
    // Spread the probes over the background copies' chunks.
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  state.counters["p50_us"] = Percentile(micros, 50);
  state.counters["p99_us"] = Percentile(micros, 99);
  state.counters["wait_p50_us"] = Percentile(waits, 50);
  state.counters["wait_p99_us"] = Percentile(waits, 99);
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

// What issue 28 compares a file's way into a buffer with: the same file
// read by one thread per usable CPU, each its own range in 16 MiB reads,
// into memory touched beforehand (no page faults), as fast as the page
// cache gives it (direct:0), or with O_DIRECT from the storage under it
// (direct:1: the file is read from the device even though it is cached).
void BM_ParallelRead(benchmark::State& state) {
  std::string error;
  if (!PrepareFile(&error)) {
    state.SkipWithError(error.c_str());
    return;
  }
  const bool direct = state.range(0) == 1;
  const int fd = ::open(g_file.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0) {
    state.SkipWithError(absl::StrCat("cannot open ", g_file, direct ? " with O_DIRECT" : "")
                            .c_str());
    return;
  }
  constexpr std::uint64_t kRead = std::uint64_t{16} << 20;
  // Page aligned, as O_DIRECT needs, and touched.
  void* aligned = nullptr;
  if (::posix_memalign(&aligned, 4096, g_file_bytes) != 0) {
    ::close(fd);
    state.SkipWithError("no memory for the file");
    return;
  }
  std::unique_ptr<std::byte, decltype(&std::free)> memory(static_cast<std::byte*>(aligned),
                                                          &std::free);
  std::memset(memory.get(), 1, g_file_bytes);
  const int threads = UsableCpus();
  // Whole reads per thread, so that every offset but the file's end is
  // aligned for O_DIRECT.
  const std::uint64_t share = (g_file_bytes / kRead + threads - 1) / threads * kRead;
  for (auto _ : state) {
    std::atomic<bool> failed{false};
    const Clock::time_point start = Clock::now();
    std::vector<std::thread> readers;
    for (int i = 0; i < threads; ++i) {
      readers.emplace_back([&, i] {
        const std::uint64_t end = std::min(g_file_bytes, (i + 1) * share);
        for (std::uint64_t at = i * share; at < end;) {
          const ssize_t got = ::pread(fd, memory.get() + at, std::min(kRead, end - at),
                                      static_cast<off_t>(at));
          if (got <= 0) {
            failed = true;
            return;
          }
          at += static_cast<std::uint64_t>(got);
        }
      });
    }
    for (std::thread& reader : readers) reader.join();
    if (failed) {
      state.SkipWithError(absl::StrCat("reading ", g_file, " failed").c_str());
      break;
    }
    Record(state, direct ? "read/parallel-direct" : "read/parallel", SecondsSince(start),
           g_file_bytes);
  }
  ::close(fd);
}
BENCHMARK(BM_ParallelRead)->ArgName("direct")->Arg(0)->Arg(1)->UseManualTime()->Iterations(3)
    ->Unit(benchmark::kMillisecond);

// The read stage of a file's way to a device alone: common/file_reader.h
// reading the file into a ring of 8 slices of 32 MiB (touched host memory,
// as memctl's staging is), a slice read again as soon as its bytes are in,
// on 1 thread or the default count (threads:0), through the page cache.
void BM_StagedRead(benchmark::State& state) {
  std::string error;
  if (!PrepareFile(&error)) {
    state.SkipWithError(error.c_str());
    return;
  }
  const int fd = ::open(g_file.c_str(), O_RDONLY | O_CLOEXEC);
  absl::StatusOr<std::unique_ptr<ParallelFileReader>> reader =
      ParallelFileReader::Create(fd, {.threads = static_cast<int>(state.range(0))});
  if (!reader.ok()) {
    state.SkipWithError(reader.status().ToString().c_str());
    if (fd >= 0) ::close(fd);
    return;
  }
  constexpr std::uint64_t kSlice = 32 * kMiB;
  constexpr std::uint64_t kSlices = 8;
  HostMemory ring(kSlice * kSlices);
  for (auto _ : state) {
    const Clock::time_point start = Clock::now();
    std::deque<ParallelFileReader::Ticket> reads;
    absl::Status status;
    for (std::uint64_t at = 0, slice = 0; at < g_file_bytes && status.ok();
         at += kSlice, ++slice) {
      if (reads.size() == kSlices) {
        status = (*reader)->Wait(reads.front());
        reads.pop_front();
      }
      const std::uint64_t length = std::min(kSlice, g_file_bytes - at);
      reads.push_back((*reader)->Submit(
          at, {ring.bytes.get() + (slice % kSlices) * kSlice, static_cast<std::size_t>(length)}));
    }
    for (; !reads.empty(); reads.pop_front()) {
      absl::Status last = (*reader)->Wait(reads.front());
      if (status.ok()) status = last;
    }
    if (!status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
    Record(state, absl::StrCat("read/staged/", state.range(0)), SecondsSince(start),
           g_file_bytes);
  }
  reader->reset();
  ::close(fd);
}
BENCHMARK(BM_StagedRead)->ArgName("threads")->Arg(1)->Arg(0)->UseManualTime()->Iterations(3)
    ->Unit(benchmark::kMillisecond);

// `memctl put` of the file into an ephemeral buffer, freed when memctl
// exits, so that from the second round on the pool gives the segment back.
// range(0): 0 host, 1 pinned, 2 device:0, 3 device:0 with --direct-io (from
// the storage, although the file is cached).
constexpr const char* kLocations[] = {"host", "pinned", "device:0", "device:0 --direct-io"};
constexpr const char* kKeys[] = {"host", "pinned", "device", "device-direct"};

void BM_FileTo(benchmark::State& state) {
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
        "MEMD_SOCKET_DIR=", (*daemon)->socket_dir(), " ", memctl, " put --location ",
        kLocations[state.range(0)], " --ephemeral ", g_put_flags, " ", name, " ", g_file,
        " > /dev/null"));
    if (seconds < 0) {
      state.SkipWithError(absl::StrCat("memctl put failed; memd said: ", (*daemon)->Log())
                              .c_str());
      return;
    }
    Record(state, absl::StrCat("file/", kKeys[state.range(0)]), seconds, g_file_bytes);
  }
}
BENCHMARK(BM_FileTo)->ArgName("location")->Arg(0)->Arg(1)->Arg(2)->Arg(3)->UseManualTime()
    ->Iterations(3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memd::transfer_bench
