// Copies between host and device buffers through a memd process on the fake
// CUDA driver (tests/fake_cuda), whose modelled link makes a copy take as
// long as a test needs: waits that run out, a copy's own deadline, cancel,
// and a client killed mid-copy. And Buffer::WriteFromFile of a device
// buffer, which stages the file through copies of its own.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/cuda/driver.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/pattern.h"
#include "tests/support/daemon_process.h"
#include "tests/support/files.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using test::BinDir;
using test::DaemonProcess;
using test::PollUntil;

constexpr std::uint64_t kMiB = 1 << 20;

class CudaTransferTest : public ::testing::Test {
 protected:
  CudaTransferTest() {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    // This process imports device buffers through the fake too.
    ::setenv("MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH, 1);
  }

  // memd on the fake; `link_gbps` models the link of the daemon's fake
  // (MEMD_FAKE_CUDA_LINK_GBPS; empty: instant copies).
  // `faults`: the daemon's MEMD_FAKE_CUDA_FAULTS (this process's fake has none).
  void StartDaemon(const std::string& link_gbps = "",
                   std::vector<std::string> args = {}, const std::string& faults = "") {
    if (!link_gbps.empty()) ::setenv("MEMD_FAKE_CUDA_LINK_GBPS", link_gbps.c_str(), 1);
    if (!faults.empty()) ::setenv("MEMD_FAKE_CUDA_FAULTS", faults.c_str(), 1);
    args.insert(args.begin(), {"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH});
    auto daemon = DaemonProcess::Start(args);
    ::unsetenv("MEMD_FAKE_CUDA_LINK_GBPS");
    ::unsetenv("MEMD_FAKE_CUDA_FAULTS");
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    // Device buffers map into a context on their GPU.
    auto driver = cuda::Driver::Load();
    ASSERT_TRUE(driver.ok()) << driver.status();
    driver_ = *driver;
    CUcontext context;
    ASSERT_TRUE(driver_->Check(driver_->api().DevicePrimaryCtxRetain(&context, 0),
                               "cuDevicePrimaryCtxRetain")
                    .ok());
    ASSERT_TRUE(driver_->Check(driver_->api().CtxSetCurrent(context), "cuCtxSetCurrent").ok());
  }

  Buffer Make(const std::string& name, std::uint64_t size, const std::string& location,
              std::uint32_t seed = 0) {
    auto buffer = client_->Create(name, size, {.location = location});
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return Buffer();
    if (seed != 0) test::FillPattern(buffer->mutable_data(), seed);
    return std::move(*buffer);
  }

  DaemonStats Stats() {
    auto stats = client_->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : DaemonStats{};
  }

  // The device buffer's bytes, copied back through a host buffer.
  std::string ReadBack(const Buffer& device) {
    Buffer back = Make(device.name() + ".back", device.size(), "host");
    auto copy = client_->Copy({&device}, {&back});
    EXPECT_TRUE(copy.ok()) << copy.status();
    if (!copy.ok()) return "";
    EXPECT_TRUE(copy->Wait().ok());
    const std::span<const std::byte> bytes = back.data();
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }

  // A file of `size` bytes of the pattern of `seed`, open for reading.
  int PatternFile(const std::string& name, std::uint64_t size, std::uint32_t seed) {
    std::string bytes(size, '\0');
    test::FillPattern(std::as_writable_bytes(std::span<char>(bytes)), seed);
    const std::string path = files_.Join(name);
    test::WriteWholeFile(path, bytes);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << path;
    fds_.push_back(fd);
    return fd;
  }

  // The staging buffers libmemd made and left (none, once a call returned).
  std::vector<std::string> StagingLeft() {
    std::vector<std::string> names;
    auto listed = client_->List(".libmemd/");
    EXPECT_TRUE(listed.ok()) << listed.status();
    if (listed.ok()) {
      for (const BufferInfo& info : *listed) names.push_back(info.name);
    }
    return names;
  }

  ~CudaTransferTest() override {
    for (int fd : fds_) ::close(fd);
  }

  test::TempDir files_;
  std::vector<int> fds_;
  std::shared_ptr<const cuda::Driver> driver_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
};

TEST_F(CudaTransferTest, HostToDeviceAndBackMovesEveryByte) {
  StartDaemon();
  const std::uint64_t size = 9 * kMiB + 77;
  Buffer source = Make("src", size, "host", 9);
  Buffer device = Make("weights", size, "device:0");
  Buffer back = Make("back", size, "host");
  auto up = client_->Copy({&source}, {&device});
  ASSERT_TRUE(up.ok()) << up.status();
  ASSERT_TRUE(up->Wait().ok());
  auto progress = up->Progress();
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->direction, "h2d");
  EXPECT_EQ(progress->path, "staged");
  EXPECT_EQ(progress->device, 0);
  EXPECT_EQ(progress->bytes_done, size);

  auto down = client_->Copy({&device}, {&back});
  ASSERT_TRUE(down.ok()) << down.status();
  ASSERT_TRUE(down->Wait().ok());
  EXPECT_EQ(down->Progress()->direction, "d2h");
  EXPECT_TRUE(test::MatchesPattern(back.data(), 9));

  const DaemonStats stats = Stats();
  ASSERT_EQ(stats.devices.size(), 1u);
  EXPECT_TRUE(stats.devices[0].healthy);
  EXPECT_EQ(stats.devices[0].health_error, "");
  EXPECT_EQ(stats.transfers.completed, 2u);
  EXPECT_EQ(stats.transfers.bytes, 2 * size);
}

// Sizes of whole pages and a byte, up to and past the daemon's 4 MiB chunk,
// host to device and back through the daemon's staging: every byte, the last
// included (the copy threads' split once left it behind).
TEST_F(CudaTransferTest, SizesOfWholePagesAndAByteCopyEveryByteBothWays) {
  StartDaemon();
  for (std::uint64_t size : {kMiB + 1, 2 * kMiB + 4097, 4 * kMiB - 4095, 5 * kMiB + 1,
                             std::uint64_t{4097}, 3 * kMiB + 8191, std::uint64_t{5000001}}) {
    SCOPED_TRACE(testing::Message() << size << " bytes");
    const std::string tag = std::to_string(size);
    Buffer source = Make("src-" + tag, size, "host", 11);
    Buffer device = Make("dev-" + tag, size, "device:0");
    Buffer back = Make("back-" + tag, size, "host");
    // Every byte other than the source's (another seed's pattern shares
    // most of its bytes: the seed barely moves a byte's top bits).
    const std::span<std::byte> fill = back.mutable_data();
    for (std::uint64_t i = 0; i < size; ++i) fill[i] = ~test::PatternByte(i, 11);
    auto up = client_->Copy({&source}, {&device});
    ASSERT_TRUE(up.ok()) << up.status();
    ASSERT_TRUE(up->Wait().ok());
    auto down = client_->Copy({&device}, {&back});
    ASSERT_TRUE(down.ok()) << down.status();
    ASSERT_TRUE(down->Wait().ok());
    const std::span<const std::byte> bytes = back.data();
    ASSERT_EQ(bytes.size(), size);
    std::uint64_t wrong = 0;
    std::uint64_t first = size;
    for (std::uint64_t i = 0; i < size; ++i) {
      if (bytes[i] != test::PatternByte(i, 11)) {
        ++wrong;
        first = std::min(first, i);
      }
    }
    EXPECT_EQ(wrong, 0u) << "first wrong byte at " << first;
  }
}

// The daemon's driver fails the first async host-to-device copy with
// CUDA_ERROR_OUT_OF_MEMORY: a transient error, retried, and the copy
// completes with every byte.
TEST_F(CudaTransferTest, ATransientDriverErrorIsRetriedAndTheCopyCompletes) {
  StartDaemon("", {}, "cuMemcpyHtoDAsync_v2@1=2");
  const std::uint64_t size = 9 * kMiB + 5;
  Buffer source = Make("src", size, "host", 31);
  Buffer device = Make("dev", size, "device:0");
  Buffer back = Make("back", size, "host");
  auto up = client_->Copy({&source}, {&device});
  ASSERT_TRUE(up.ok()) << up.status();
  ASSERT_TRUE(up->Wait().ok());
  EXPECT_EQ(up->Progress()->retries, 1u);
  auto down = client_->Copy({&device}, {&back});
  ASSERT_TRUE(down.ok()) << down.status();
  ASSERT_TRUE(down->Wait().ok());
  EXPECT_TRUE(test::MatchesPattern(back.data(), 31));
  EXPECT_EQ(Stats().transfers.retries, 1u);
}

// A sticky error (700, the context is broken) on the second async copy:
// the copy fails naming it, the GPU shows as unhealthy with the error, and
// later copies to it are refused before anything moves.
TEST_F(CudaTransferTest, AStickyErrorMarksTheGpuUnhealthyAndFailsItsCopies) {
  StartDaemon("", {}, "sticky@2=700");
  const std::uint64_t size = 9 * kMiB;
  Buffer source = Make("src", size, "host", 5);
  Buffer device = Make("dev", size, "device:0");
  auto copy = client_->Copy({&source}, {&device});
  ASSERT_TRUE(copy.ok()) << copy.status();
  const absl::Status ended = copy->Wait();
  EXPECT_FALSE(ended.ok());
  EXPECT_THAT(ended.message(), ::testing::HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  const DaemonStats stats = Stats();
  ASSERT_EQ(stats.devices.size(), 1u);
  EXPECT_FALSE(stats.devices[0].healthy);
  EXPECT_THAT(stats.devices[0].health_error, ::testing::HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  EXPECT_GE(stats.transfers.failed, 1u);
  auto refused = client_->Copy({&source}, {&device});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
}

// The headline use: one process loads a device buffer through the engine
// and seals it; another imports it by name and reads it through its own
// CUDA context (memd-test-client device-consume: cuMemcpyDtoH from the
// imported pointer, checked against the pattern).
TEST_F(CudaTransferTest, AnotherProcessImportsAndReadsWhatACopyWrote) {
  StartDaemon();
  const std::uint64_t size = 6 * kMiB + 4099;
  Buffer source = Make("src", size, "host", 23);
  Buffer device = Make("model/w", size, "device:0");
  auto copy = client_->Copy({&source}, {&device});
  ASSERT_TRUE(copy.ok()) << copy.status();
  ASSERT_TRUE(copy->Wait().ok());
  ASSERT_TRUE(device.Seal().ok());
  const std::map<std::string, std::string> env = {
      {"MEMD_SOCKET_DIR", daemon_->socket_dir()}, {"MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH}};
  test::ProgramResult read =
      test::RunProgram(BinDir() + "/memd-test-client",
                       {"device-consume", "model/w", std::to_string(size), "23"}, "", env);
  EXPECT_EQ(read.exit_code, 0) << read.out << read.err;
  EXPECT_EQ(read.out, "OK\n");
  test::ProgramResult wrong =
      test::RunProgram(BinDir() + "/memd-test-client",
                       {"device-consume", "model/w", std::to_string(size), "24"}, "", env);
  EXPECT_EQ(wrong.out, "MISMATCH\n") << "the check must be able to fail";
}

// Buffer::WriteFromFile of a device buffer: the file read into libmemd's
// own staging (two slices of 32 MiB here, the second part full; from the
// disk, then from the page cache) and copied slice by slice; every byte
// lands where asked, those around stay, and the staging goes with the call.
TEST_F(CudaTransferTest, WriteFromFileFillsADeviceBufferThroughStagingThatGoesWithTheCall) {
  StartDaemon();
  const std::uint64_t size = 40 * kMiB + 4097;
  const int file = PatternFile("weights", size, 31);
  // Out of the page cache: read with O_DIRECT where the filesystem allows.
  ::fdatasync(file);
  ::posix_fadvise(file, 0, 0, POSIX_FADV_DONTNEED);
  Buffer device = Make("weights", size, "device:0");
  ASSERT_TRUE(device.WriteFromFile(file, 0, size).ok());
  std::string expected(size, '\0');
  test::FillPattern(std::as_writable_bytes(std::span<char>(expected)), 31);
  EXPECT_TRUE(ReadBack(device) == expected) << "the device buffer differs from the file";
  EXPECT_THAT(StagingLeft(), ::testing::IsEmpty());

  // From inside the file (not on a page: read through the page cache) to
  // inside the buffer, on one reader thread: the bytes around stay.
  const std::uint64_t whole = 36 * kMiB;
  Buffer around = Make("around", whole, "host", 5);
  Buffer target = Make("target", whole, "device:0");
  auto filled = client_->Copy({&around}, {&target});
  ASSERT_TRUE(filled.ok()) << filled.status();
  ASSERT_TRUE(filled->Wait().ok());
  const std::uint64_t file_offset = 12345;
  const std::uint64_t offset = kMiB + 7;
  const std::uint64_t length = 33 * kMiB + 3;
  ASSERT_TRUE(target.WriteFromFile(file, file_offset, length, offset, 1).ok());
  std::string want(whole, '\0');
  test::FillPattern(std::as_writable_bytes(std::span<char>(want)), 5);
  want.replace(offset, length, expected, file_offset, length);
  EXPECT_TRUE(ReadBack(target) == want) << "bytes landed elsewhere, or around ones changed";
  EXPECT_THAT(StagingLeft(), ::testing::IsEmpty());
  const DaemonStats stats = Stats();
  EXPECT_EQ(stats.transfers.active, 0u);
  EXPECT_EQ(stats.transfers.failed, 0u);
}

// Each documented error, and no staging left behind by any: also not by a
// file that ends while a copy of an earlier slice is still on a slow link
// (the call cancels it and waits for it before returning).
TEST_F(CudaTransferTest, WriteFromFileIntoADeviceBufferFailsAsDocumentedAndLeavesNoStaging) {
  StartDaemon("h2d=0.2");
  const int file = PatternFile("short", 33 * kMiB, 7);
  // 100 MiB ask for 4 slices, 2 of them queued as copies: the first is on
  // the link (32 MiB at 200 MB/s) when the second piece finds the end.
  Buffer device = Make("weights", 100 * kMiB, "device:0");
  absl::Status ended = device.WriteFromFile(file, 0, 100 * kMiB);
  EXPECT_TRUE(absl::IsOutOfRange(ended)) << ended;
  EXPECT_THAT(StagingLeft(), ::testing::IsEmpty());
  EXPECT_EQ(Stats().transfers.active, 0u) << "a copy of the failed call still runs";

  absl::Status past = device.WriteFromFile(file, 0, 2, 100 * kMiB - 1);
  EXPECT_TRUE(absl::IsInvalidArgument(past)) << past;
  EXPECT_THAT(std::string(past.message()),
              ::testing::AllOf(::testing::HasSubstr("2 bytes at offset 104857599"),
                               ::testing::HasSubstr("104857600 bytes")));
  int pipe_ends[2];
  ASSERT_EQ(::pipe2(pipe_ends, O_CLOEXEC), 0);
  fds_.insert(fds_.end(), {pipe_ends[0], pipe_ends[1]});
  EXPECT_TRUE(absl::IsInvalidArgument(device.WriteFromFile(pipe_ends[0], 0, 16)));

  Buffer sealed = Make("sealed", kMiB, "device:0");
  ASSERT_TRUE(sealed.Seal().ok());
  absl::Status after_seal = sealed.WriteFromFile(file, 0, 16);
  EXPECT_TRUE(absl::IsFailedPrecondition(after_seal)) << after_seal;
  EXPECT_THAT(std::string(after_seal.message()), ::testing::HasSubstr("is sealed"));
  auto reader = client_->Open("sealed");
  ASSERT_TRUE(reader.ok()) << reader.status();
  absl::Status read_lease = reader->WriteFromFile(file, 0, 16);
  EXPECT_TRUE(absl::IsFailedPrecondition(read_lease)) << read_lease;
  EXPECT_THAT(std::string(read_lease.message()), ::testing::HasSubstr("open for reading"));
  EXPECT_THAT(StagingLeft(), ::testing::IsEmpty());
}

// The staging is the caller's own memory, under the caller's quotas: host
// memory where this user may not have pinned memory enough, and
// RESOURCE_EXHAUSTED naming the staging where neither is left.
TEST_F(CudaTransferTest, WriteFromFileStagesUnderTheCallersQuotas) {
  StartDaemon("", {"--max-uid-bytes", "host=3MiB,pinned=1MiB"});
  const std::uint64_t size = 2 * kMiB;
  const int file = PatternFile("weights", size, 17);
  Buffer device = Make("weights", size, "device:0");
  ASSERT_TRUE(device.WriteFromFile(file, 0, size).ok());
  std::string expected(size, '\0');
  test::FillPattern(std::as_writable_bytes(std::span<char>(expected)), 17);
  EXPECT_TRUE(ReadBack(device) == expected);

  Buffer held = Make("held", size, "host");
  absl::Status refused = device.WriteFromFile(file, 0, size);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("a staging buffer of"));
  EXPECT_THAT(StagingLeft(), ::testing::IsEmpty());
}

// 20 MB/s: a 32 MiB copy takes well over a second on the modelled link.
constexpr char kSlowLink[] = "h2d=0.02,d2h=0.02";

TEST_F(CudaTransferTest, AWaitThatRunsOutLeavesTheCopyGoingUntilCancelled) {
  StartDaemon(kSlowLink);
  Buffer source = Make("src", 32 * kMiB, "host", 3);
  Buffer device = Make("weights", 32 * kMiB, "device:0");
  auto transfer = client_->Copy({&source}, {&device});
  ASSERT_TRUE(transfer.ok()) << transfer.status();

  absl::Status waited = transfer->Wait(absl::Now() + absl::Milliseconds(50));
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited)) << waited;
  EXPECT_THAT(std::string(waited.message()), ::testing::HasSubstr("goes on"));
  auto running = transfer->Progress();
  ASSERT_TRUE(running.ok());
  EXPECT_FALSE(running->finished()) << "the copy outlives the wait";
  EXPECT_EQ(running->bytes_total, 32 * kMiB);

  ASSERT_TRUE(transfer->Cancel().ok());
  absl::Status ended = transfer->Wait();
  EXPECT_TRUE(absl::IsCancelled(ended)) << ended;
  auto cancelled = transfer->Progress();
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state, TransferState::kCancelled);
  EXPECT_LT(cancelled->bytes_done, 32 * kMiB);
  EXPECT_EQ(Stats().transfers.active, 0u);
}

TEST_F(CudaTransferTest, ACopysOwnDeadlineFailsIt) {
  StartDaemon(kSlowLink);
  Buffer source = Make("src", 32 * kMiB, "host", 3);
  Buffer device = Make("weights", 32 * kMiB, "device:0");
  auto transfer = client_->Copy({&source}, {&device},
                                {.deadline = absl::Now() + absl::Milliseconds(100)});
  ASSERT_TRUE(transfer.ok()) << transfer.status();
  absl::Status ended = transfer->Wait();  // No deadline of the wait's own.
  EXPECT_TRUE(absl::IsDeadlineExceeded(ended)) << ended;
  auto progress = transfer->Progress();
  ASSERT_TRUE(progress.ok());
  EXPECT_EQ(progress->state, TransferState::kFailed);
  EXPECT_TRUE(absl::IsDeadlineExceeded(progress->status)) << progress->status;
  EXPECT_GE(Stats().transfers.failed, 1u);
}

// A client that frees a buffer while a copy reads it (releases its last
// lease of a buffer nobody sealed) loses the name at once, but the bytes
// stay allocated, and charged and counted as its buffer, until the copy has
// let go: handed to the pool earlier, the next device buffer of the same
// owner could get them while the copy still reads, and uncharged they
// would be memory outside every quota. (A buffer a copy writes is freed
// the same way, and that copy cancelled: ParkedMemoryTest in
// tests/security.)
TEST_F(CudaTransferTest, ABufferFreedMidCopyStaysAllocatedUntilTheCopyEnds) {
  StartDaemon(kSlowLink);
  Buffer device = Make("weights", 32 * kMiB, "device:0");
  Buffer back = Make("back", 32 * kMiB, "host");
  auto device_used = [&] {
    for (const PoolStats& pool : Stats().pools) {
      if (pool.location == "device:0") return pool.used_bytes;
    }
    return std::uint64_t{0};
  };
  const std::uint64_t used = device_used();
  ASSERT_GE(used, 32 * kMiB);
  auto transfer = client_->Copy({&device}, {&back});
  ASSERT_TRUE(transfer.ok()) << transfer.status();
  device = Buffer();  // The last lease: the unsealed buffer is freed.
  EXPECT_EQ(Stats().buffers, 2u) << "the freed buffer counts until its copy lets go";
  EXPECT_EQ(device_used(), used) << "the bytes went back with the copy still reading them";
  auto usage = client_->Usage();
  ASSERT_TRUE(usage.ok()) << usage.status();
  std::uint64_t charged = 0;
  for (const UidUsage& entry : *usage) {
    if (entry.location == "device:0") charged = entry.bytes;
  }
  EXPECT_EQ(charged, used) << "and its owner is charged for them";
  ASSERT_TRUE(transfer->Cancel().ok());
  EXPECT_TRUE(absl::IsCancelled(transfer->Wait()));
  EXPECT_TRUE(PollUntil([&] { return device_used() == 0; })) << device_used();
  EXPECT_EQ(Stats().buffers, 1u);
}

// A WaitTransfer call that waits holds memory in the daemon until its copy
// ends: it counts against max_waits_per_session like a waiting open, and
// the call beyond it is refused at once with the numbers.
TEST_F(CudaTransferTest, WaitsBeyondTheSessionsLimitAreRefusedAtOnce) {
  StartDaemon(kSlowLink, {"--max-waits-per-session", "2"});
  Buffer source = Make("src", 32 * kMiB, "host", 3);
  Buffer device = Make("weights", 32 * kMiB, "device:0");
  auto transfer = client_->Copy({&source}, {&device});
  ASSERT_TRUE(transfer.ok()) << transfer.status();
  std::vector<std::thread> waiters;
  std::vector<absl::Status> waited(2);
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&, i] { waited[i] = transfer->Wait(absl::Now() + absl::Seconds(30)); });
  }
  // Both waits are parked in the daemon by then; the copy takes 1.7 s.
  absl::SleepFor(absl::Milliseconds(300));
  absl::Status third = transfer->Wait(absl::Now() + absl::Seconds(30));
  EXPECT_TRUE(absl::IsResourceExhausted(third)) << third;
  EXPECT_THAT(std::string(third.message()), ::testing::HasSubstr("max_waits_per_session"));
  ASSERT_TRUE(transfer->Cancel().ok());
  for (std::thread& waiter : waiters) waiter.join();
  for (const absl::Status& status : waited) EXPECT_TRUE(absl::IsCancelled(status)) << status;
}

TEST_F(CudaTransferTest, AClientKilledMidCopyLeavesNothingBehind) {
  StartDaemon(kSlowLink);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t copier = ::fork();
  ASSERT_GE(copier, 0);
  if (copier == 0) {
    ::dup2(ready[1], 1);
    ::close(ready[0]);
    ::setenv("MEMD_SOCKET_DIR", daemon_->socket_dir().c_str(), 1);
    const std::string bin = BinDir() + "/memd-test-client";
    ::execl(bin.c_str(), bin.c_str(), "device-copy-hold", "weights", "33554432", nullptr);
    ::_exit(127);
  }
  ::close(ready[1]);
  // Within a minute, or the failure shows where the child hangs.
  absl::StatusOr<std::string> said = test::ReadFromChild(ready[0], copier);
  ::close(ready[0]);
  ASSERT_TRUE(said.ok()) << said.status();
  ASSERT_EQ(*said, "copying\n");
  DaemonStats during = Stats();
  EXPECT_EQ(during.transfers.active, 1u);
  EXPECT_EQ(during.leases, 2u);

  ASSERT_EQ(::kill(copier, SIGKILL), 0);
  ASSERT_EQ(::waitpid(copier, nullptr, 0), copier);
  // The session's transfer is cancelled and drained, then its leases go
  // (and with them both unsealed buffers).
  EXPECT_TRUE(PollUntil([&] {
    const DaemonStats after = Stats();
    return after.transfers.active == 0 && after.leases == 0 && after.buffers == 0;
  }));
  const DaemonStats after = Stats();
  EXPECT_EQ(after.transfers.active_bytes, 0u);
  EXPECT_EQ(after.sessions, 1u);
}

}  // namespace
}  // namespace memd
