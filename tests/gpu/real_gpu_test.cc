// On a node with a real NVIDIA GPU and driver (tools/gpu-check runs these):
// memd on the real CUDA driver, a device buffer written in one process and
// read in another. Everywhere else each test skips and says why, unless
// MEMD_REQUIRE_GPU is set. The suite also runs on the project's fake driver
// standing in for libcuda.so.1 (real_gpu_test_on_the_fake_driver), so that
// it keeps working between GPU runs.

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/cuda/driver.h"
#include "daemon/backend/cuda/cuda_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/unique_fd.h"
#include "common/unix_socket.h"
#include "memd/client.h"
#include "tests/client/reclaim_steps.h"
#include "tests/support/daemon_process.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using test::BinDir;
using test::DaemonProcess;
using test::ProgramResult;
using test::RunProgram;

// Why this machine cannot run the GPU tests, or empty when it can.
std::string WhyNoGpu() {
  auto driver = cuda::Driver::Load("libcuda.so.1");
  if (!driver.ok()) return std::string(driver.status().message());
  int count = 0;
  if ((*driver)->api().DeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    return "the CUDA driver sees no device";
  }
  return "";
}

// What a client process of `daemon` runs with: the real driver.
std::map<std::string, std::string> ClientEnvironment(const DaemonProcess& daemon) {
  return {{"MEMD_SOCKET_DIR", daemon.socket_dir()}, {"MEMD_CUDA_DRIVER", "libcuda.so.1"}};
}

class RealGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = WhyNoGpu(); !why.empty()) {
      // Where a GPU is promised (gpu-check on a GPU node, the run on the
      // fake driver), a skip would hide the failure.
      if (std::getenv("MEMD_REQUIRE_GPU") != nullptr) FAIL() << "no GPU: " << why;
      GTEST_SKIP() << "no GPU here (" << why << "); tools/gpu-check runs this on a GPU node";
    }
  }
};

TEST_F(RealGpuTest, DeviceBufferCrossesProcessesOnTheRealDriver) {
  auto daemon = DaemonProcess::Start({"--backend", "cuda", "--cuda-driver", "libcuda.so.1"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto env = ClientEnvironment(**daemon);
  ProgramResult produced = RunProgram(BinDir() + "/memd-test-client",
                                      {"device-produce", "gpu/w", "8000000", "9", "0"}, "", env);
  ASSERT_EQ(produced.exit_code, 0) << produced.out << produced.err;
  ProgramResult consumed = RunProgram(BinDir() + "/memd-test-client",
                                      {"device-consume", "gpu/w", "8000000", "9"}, "", env);
  EXPECT_EQ(consumed.exit_code, 0) << consumed.out << consumed.err;
}

// A fresh process, as a Python one before PyTorch touched CUDA, opens a
// device buffer with no CUDA context of its own: libmemd imports it into the
// GPU's primary context (the one PyTorch and CuPy use), retains that context
// while the Buffer lives and not after, and leaves the thread with no
// context current; the bytes read right in the primary context
// (memd-test-client device-open-fresh checks each).
TEST_F(RealGpuTest, AFreshProcessOpensADeviceBufferWithoutMakingAContext) {
  for (const char* handles : {"vmm_fd", "ipc"}) {
    SCOPED_TRACE(handles);
    auto daemon = DaemonProcess::Start(
        {"--backend", "cuda", "--cuda-driver", "libcuda.so.1", "--cuda-handles", handles});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    auto env = ClientEnvironment(**daemon);
    ProgramResult produced =
        RunProgram(BinDir() + "/memd-test-client",
                   {"device-produce", "gpu/fresh", "8000000", "13", "0"}, "", env);
    ASSERT_EQ(produced.exit_code, 0) << produced.out << produced.err;
    ProgramResult fresh =
        RunProgram(BinDir() + "/memd-test-client",
                   {"device-open-fresh", "gpu/fresh", "8000000", "13"}, "", env);
    EXPECT_EQ(fresh.out, "OK\n") << fresh.err;
  }
}

// Replicas on the real driver (issue 25): a sealed host buffer opened at
// device:0 by three processes at once is copied there once, through the
// transfer engine, and every opener reads the host's bytes from the GPU;
// sizes of a page plus one byte and of several staging chunks plus one.
TEST_F(RealGpuTest, AHostBufferOpenedAtTheGpuIsCopiedThereOnceForEveryOpener) {
  auto daemon = DaemonProcess::Start({"--backend", "cuda", "--cuda-driver", "libcuda.so.1"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = Client::Connect({.socket_dir = (*daemon)->socket_dir()});
  ASSERT_TRUE(client.ok()) << client.status();
  auto env = ClientEnvironment(**daemon);
  for (std::uint64_t size : {std::uint64_t{4097}, (std::uint64_t{1} << 20) + 1,
                             (std::uint64_t{64} << 20) + 1}) {
    SCOPED_TRACE(size);
    const std::string name = absl::StrCat("gpu/replica-", size);
    ProgramResult produced = RunProgram(BinDir() + "/memd-test-client",
                                        {"produce", name, absl::StrCat(size), "21"}, "", env);
    ASSERT_EQ(produced.exit_code, 0) << produced.out << produced.err;
    std::vector<pid_t> openers;
    std::vector<ProgramResult> results(3);
    std::vector<std::thread> threads;
    for (ProgramResult& result : results) {
      threads.emplace_back([&, name, size] {
        result = RunProgram(BinDir() + "/memd-test-client",
                            {"device-consume-at", name, absl::StrCat(size), "21", "device:0"},
                            "", env);
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (const ProgramResult& result : results) {
      EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
    }
    auto info = (*client)->Stat(name);
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_EQ(info->replicas.size(), 2u);
    EXPECT_EQ(info->replicas[1].location, "device:0");
    EXPECT_EQ(info->replicas[1].state, "current");
    EXPECT_EQ(info->sync_state, "synchronized");
    EXPECT_EQ(info->usage.lazy_copies, 1u);
    EXPECT_EQ(info->usage.opens_by_location.at("device:0"), 3u);
  }
}

// The C API's device case (tests/client/c_api_test.c): a device:0 buffer
// from C, its CUdeviceptr and its kDLCUDA DLPack tensor.
TEST_F(RealGpuTest, CApiExportsDeviceBuffersOnTheRealDriver) {
  auto daemon = DaemonProcess::Start({"--backend", "cuda", "--cuda-driver", "libcuda.so.1"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ProgramResult ran = RunProgram(BinDir() + "/memd-c-api-test", {"device"}, "",
                                 ClientEnvironment(**daemon));
  EXPECT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  EXPECT_NE(ran.out.find("ok - device buffers"), std::string::npos) << ran.out << ran.err;
}

TEST_F(RealGpuTest, LegacyIpcHandlesOnTheRealDriver) {
  auto daemon = DaemonProcess::Start(
      {"--backend", "cuda", "--cuda-driver", "libcuda.so.1", "--cuda-handles", "ipc"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto env = ClientEnvironment(**daemon);
  ASSERT_EQ(RunProgram(BinDir() + "/memd-test-client",
                       {"device-produce", "gpu/i", "3000000", "4", "0"}, "", env)
                .exit_code,
            0);
  ProgramResult consumed = RunProgram(BinDir() + "/memd-test-client",
                                      {"device-consume", "gpu/i", "3000000", "4"}, "", env);
  EXPECT_EQ(consumed.exit_code, 0) << consumed.out << consumed.err;
}

// The real driver's CUDA_VISIBLE_DEVICES: a client that sees memd's last GPU
// as its only one (by UUID, as containers and schedulers set it) still
// opens buffers there, and one that sees another GPU is told it cannot.
TEST_F(RealGpuTest, ClientsNumberingGpusOtherwiseFindThemByUuid) {
  auto daemon = DaemonProcess::Start({"--backend", "cuda", "--cuda-driver", "libcuda.so.1"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = Client::Connect({.socket_dir = (*daemon)->socket_dir()});
  ASSERT_TRUE(client.ok());
  auto stats = (*client)->Stats();
  ASSERT_TRUE(stats.ok());
  ASSERT_FALSE(stats->devices.empty());
  const DeviceInfo& last = stats->devices.back();
  auto env = ClientEnvironment(**daemon);
  env["CUDA_VISIBLE_DEVICES"] = last.uuid;
  ProgramResult produced = RunProgram(
      BinDir() + "/memd-test-client",
      {"device-produce", "gpu/u", "4000000", "6", std::to_string(last.ordinal)}, "", env);
  ASSERT_EQ(produced.exit_code, 0) << produced.out << produced.err;
  ProgramResult numbering =
      RunProgram(BinDir() + "/memd-test-client", {"device-numbering", "-"}, "", env);
  EXPECT_THAT(numbering.out,
              ::testing::HasSubstr("device:" + std::to_string(last.ordinal) + " cuda 0\n"));
  ProgramResult consumed = RunProgram(BinDir() + "/memd-test-client",
                                      {"device-consume", "gpu/u", "4000000", "6"}, "", env);
  EXPECT_EQ(consumed.exit_code, 0) << consumed.out << consumed.err;
  if (stats->devices.size() < 2) return;  // No other GPU to hide it behind.
  env["CUDA_VISIBLE_DEVICES"] = stats->devices.front().uuid;
  ProgramResult blind = RunProgram(BinDir() + "/memd-test-client",
                                   {"device-open-without-context", "gpu/u"}, "", env);
  EXPECT_EQ(blind.out, "FAILED_PRECONDITION\n") << blind.err;
}

// The transfer engine's copy side on the real driver: on every GPU, bytes
// go host -> device through pinned staging, device -> device, and back to a
// pinned segment and to staging, ordered by markers and a host-function
// wake; a pageable source works too (the driver copies it synchronously).
TEST_F(RealGpuTest, CopyDeviceRoundTripsThroughStagingOnTheRealDriver) {
  auto driver = cuda::Driver::Load("libcuda.so.1");
  ASSERT_TRUE(driver.ok()) << driver.status();
  auto backend = backend::CudaBackend::Create(*driver, backend::CudaHandles::kAuto);
  ASSERT_TRUE(backend.ok()) << backend.status();
  auto copy_devices = (*backend)->CopyDevices();
  ASSERT_TRUE(copy_devices.ok()) << copy_devices.status();
  ASSERT_EQ(copy_devices->size(), (*backend)->devices().size());
  constexpr std::uint64_t kBytes = (8 << 20) + 4096;
  for (auto& copy_device : *copy_devices) {
    const int ordinal = copy_device->ordinal();
    SCOPED_TRACE("device " + std::to_string(ordinal));
    const std::uint64_t granularity = (*backend)->alignment(Location::Device(ordinal));
    const std::uint64_t segment_bytes = (kBytes + granularity - 1) / granularity * granularity;
    auto first = (*backend)->Reserve(Location::Device(ordinal), segment_bytes);
    auto second = (*backend)->Reserve(Location::Device(ordinal), segment_bytes);
    auto pinned = (*backend)->Reserve(Location::Pinned(), segment_bytes);
    ASSERT_TRUE(first.ok() && second.ok() && pinned.ok());
    auto a = (*first)->Memory();
    auto b = (*second)->Memory();
    auto host = (*pinned)->Memory();
    ASSERT_TRUE(a.ok() && b.ok() && host.ok());
    ASSERT_TRUE(host->registered);
    auto staging = copy_device->AllocateStaging(kBytes);
    ASSERT_TRUE(staging.ok()) << staging.status();
    std::vector<std::byte> data(kBytes);
    for (std::size_t i = 0; i < kBytes; ++i) data[i] = std::byte((i * 7 + ordinal) & 0xff);
    std::memcpy(staging->data(), data.data(), kBytes);
    {
      auto stream = copy_device->NewStream();
      ASSERT_TRUE(stream.ok()) << stream.status();
      backend::CopyStream& s = **stream;
      ASSERT_TRUE(s.HostToDevice(a->device_address, staging->data(), kBytes).ok());
      ASSERT_TRUE(s.DeviceToDevice(b->device_address, a->device_address, kBytes).ok());
      ASSERT_TRUE(s.DeviceToHost(host->host, b->device_address, kBytes).ok());
      auto marker = s.Mark();
      ASSERT_TRUE(marker.ok()) << marker.status();
      absl::Notification woken;
      ASSERT_TRUE(s.WakeWhenDone([&woken] { woken.Notify(); }).ok());
      ASSERT_TRUE(woken.WaitForNotificationWithTimeout(absl::Seconds(60)));
      auto reached = s.Reached(*marker);
      ASSERT_TRUE(reached.ok()) << reached.status();
      EXPECT_TRUE(*reached);
      EXPECT_EQ(std::memcmp(host->host, data.data(), kBytes), 0);
      // Back into staging, and a pageable upload over the first segment.
      std::memset(staging->data(), 0, kBytes);
      ASSERT_TRUE(s.DeviceToHost(staging->data(), a->device_address, kBytes).ok());
      std::vector<std::byte> pageable(data.rbegin(), data.rend());
      ASSERT_TRUE(s.HostToDevice(a->device_address, pageable.data(), kBytes).ok());
      ASSERT_TRUE(s.DeviceToHost(host->host, a->device_address, kBytes).ok());
      ASSERT_TRUE(s.Synchronize().ok());
      EXPECT_EQ(std::memcmp(staging->data(), data.data(), kBytes), 0);
      EXPECT_EQ(std::memcmp(host->host, pageable.data(), kBytes), 0);
    }
    EXPECT_TRUE(copy_device->health().ok()) << copy_device->health();
  }
}

// Runs memd-segment-probe with `args`, `fd` (if >= 0) as its fd 3 and the
// driver the test uses; returns its exit status word (waitpid's) and stdout.
std::pair<int, std::string> RunProbe(const std::vector<std::string>& args, int fd) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {-1, "pipe failed"};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (fd >= 0) posix_spawn_file_actions_adddup2(&actions, fd, 3);
  const std::string program = BinDir() + "/memd-segment-probe";
  std::vector<char*> argv{const_cast<char*>(program.c_str())};
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned =
      ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  std::string text;
  char chunk[256];
  for (ssize_t n; spawned == 0 && (n = ::read(out[0], chunk, sizeof(chunk))) > 0;) {
    text.append(chunk, n);
  }
  ::close(out[0]);
  int status = -1;
  if (spawned == 0) ::waitpid(pid, &status, 0);
  return {status, text};
}

// What cuMemGetInfo says is free on device 0, seen from a fresh process.
std::uint64_t FreeDeviceBytes() {
  auto [status, out] = RunProbe({"free"}, -1);
  unsigned long bytes = 0;
  if (status == 0) std::sscanf(out.c_str(), "free %lu", &bytes);
  return bytes;
}

// What memd's buffers surviving memd rests on (docs/design.md, "Durability"):
// a process makes a VMM segment, writes it, hands its descriptor to another
// (as memd hands it to systemd's descriptor store) and is killed. The holder
// never touched the segment; its descriptor stays open and polls clean (the
// store drops one that reports POLLHUP or POLLERR), a third process maps the
// creator's bytes from it, and closing the last descriptor frees the memory.
TEST_F(RealGpuTest, ASegmentOutlivesItsKilledCreatorWhileADescriptorHoldsIt) {
  constexpr std::uint64_t kBytes = 64 << 20;
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd ours(pair[0]);
  const std::uint64_t free_before = FreeDeviceBytes();
  auto [created, created_out] = RunProbe({"create", std::to_string(kBytes), "11"}, pair[1]);
  ::close(pair[1]);
  ASSERT_TRUE(WIFSIGNALED(created) && WTERMSIG(created) == SIGKILL)
      << "status " << created << ": " << created_out;
  auto packet = ReceivePacket(ours.get(), 16);
  ASSERT_TRUE(packet.ok()) << packet.status();
  ASSERT_TRUE(packet->has_value() && (*packet)->fd.valid()) << "no descriptor came";
  UniqueFd segment = std::move((*packet)->fd);

  pollfd polled{segment.get(), POLLIN | POLLOUT | POLLPRI, 0};
  ASSERT_GE(::poll(&polled, 1, 0), 0);
  char link[256] = {};
  (void)::readlink(("/proc/self/fd/" + std::to_string(segment.get())).c_str(), link,
                   sizeof(link) - 1);
  std::cout << "segment descriptor: " << link << ", poll revents 0x" << std::hex
            << polled.revents << std::dec << "\n";
  EXPECT_EQ(polled.revents & (POLLHUP | POLLERR | POLLNVAL), 0)
      << "systemd's descriptor store would drop this descriptor";

  const std::uint64_t free_held = FreeDeviceBytes();
  auto [read, read_out] = RunProbe({"read", std::to_string(kBytes), "11"}, segment.get());
  std::cout << read_out;
  EXPECT_TRUE(WIFEXITED(read) && WEXITSTATUS(read) == 0) << "status " << read << ": " << read_out;
  EXPECT_THAT(read_out, ::testing::HasSubstr("pattern ok"));
  segment.reset();
  const std::uint64_t free_after = FreeDeviceBytes();
  std::cout << "device free bytes: before " << free_before << ", held " << free_held
            << ", after closing " << free_after << "\n";
  // The fake driver counts memory per process; the real one per device.
  if (std::getenv("MEMD_FAKE_CUDA_DEVICES") == nullptr) {
    EXPECT_GE(free_before, free_held + kBytes) << "the segment was not kept";
    EXPECT_GE(free_after, free_held + kBytes) << "closing the last descriptor did not free it";
  }
}

// Issue 23 on the real driver: memd runs under a stand-in for systemd's
// descriptor store (tests/support/service_manager.h), a client writes a
// device buffer and seals it, memd is killed with SIGKILL and started again;
// the new memd takes the VMM allocation back from the store, and a new
// process opens the buffer by name and reads the first one's bytes.
TEST_F(RealGpuTest, ADeviceBufferSurvivesAKillOfMemdAndARestart) {
  auto manager = test::ServiceManager::Create({.fd_store_max = 64});
  ASSERT_TRUE(manager.ok()) << manager.status();
  test::TempDir dir;
  const std::vector<std::string> args = {"--socket-dir",  dir.path(),     "--backend",
                                         "cuda",          "--cuda-driver", "libcuda.so.1",
                                         "--metrics-address", ""};
  ASSERT_TRUE((*manager)->Start(BinDir() + "/memd", args).ok());
  ASSERT_TRUE((*manager)->WaitReady().ok()) << (*manager)->WaitReady();
  const std::map<std::string, std::string> env = {{"MEMD_SOCKET_DIR", dir.path()},
                                                  {"MEMD_CUDA_DRIVER", "libcuda.so.1"}};
  ProgramResult produced = RunProgram(BinDir() + "/memd-test-client",
                                      {"device-produce", "gpu/durable", "9000000", "21", "0"},
                                      "", env);
  ASSERT_EQ(produced.exit_code, 0) << produced.out << produced.err;

  ASSERT_TRUE((*manager)->Kill(SIGKILL).ok());
  auto killed = (*manager)->Wait();
  ASSERT_TRUE(killed.ok()) << killed.status();
  EXPECT_EQ(*killed, 128 + SIGKILL);
  ASSERT_TRUE((*manager)->Start(BinDir() + "/memd", args).ok());
  ASSERT_TRUE((*manager)->WaitReady().ok()) << (*manager)->WaitReady();

  ProgramResult consumed = RunProgram(BinDir() + "/memd-test-client",
                                      {"device-consume", "gpu/durable", "9000000", "21"}, "", env);
  EXPECT_EQ(consumed.exit_code, 0) << consumed.out << consumed.err;
  // And the adopted memory is memd's again: a new buffer beside it works.
  ProgramResult more = RunProgram(BinDir() + "/memd-test-client",
                                  {"device-produce", "gpu/after", "3000000", "22", "0"}, "", env);
  EXPECT_EQ(more.exit_code, 0) << more.out << more.err;
  ProgramResult old = RunProgram(BinDir() + "/memd-test-client",
                                 {"device-consume", "gpu/durable", "9000000", "21"}, "", env);
  EXPECT_EQ(old.exit_code, 0) << old.out << old.err;
}

// The writer of a device buffer, a Client in this process, is still
// writing it when memd is killed: the new memd adopts the VMM allocation,
// the Client connects again by itself and re-claims its lease, seals
// through the same Buffer, and another session reads its bytes.
TEST_F(RealGpuTest, ADeviceBufferWriterReclaimsItsLeaseAfterAKillOfMemd) {
  ::setenv("MEMD_CUDA_DRIVER", "libcuda.so.1", 1);
  auto driver = cuda::Driver::Load("libcuda.so.1");
  ASSERT_TRUE(driver.ok()) << driver.status();
  test::WriterReclaimsAndSeals("device:0",
                               {"--backend", "cuda", "--cuda-driver", "libcuda.so.1"},
                               driver->get());
}

TEST_F(RealGpuTest, DevicesAreListed) {
  auto daemon = DaemonProcess::Start({"--backend", "cuda", "--cuda-driver", "libcuda.so.1"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = Client::Connect({.socket_dir = (*daemon)->socket_dir()});
  ASSERT_TRUE(client.ok());
  auto stats = (*client)->Stats();
  ASSERT_TRUE(stats.ok());
  ASSERT_FALSE(stats->devices.empty());
  EXPECT_GT(stats->devices[0].total_bytes, 0u);
  EXPECT_THAT(stats->devices[0].uuid, ::testing::StartsWith("GPU-"));
}

}  // namespace
}  // namespace memd
