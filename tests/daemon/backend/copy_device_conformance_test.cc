// One contract for every copy device (backend::CopyDevice, CopyStream), run
// over each: CUDA's on the project's fake CUDA driver, Level Zero's on the
// fake Level Zero driver under the real loader, and the transfer engine
// tests' FakeCopyDevice (as RMM runs one suite over every memory resource).
// What the engine relies on: copies land in order behind their markers,
// markers are pooled, a wake runs once the earlier work landed and never
// holds back later copies, staging has the size asked and is refused at 0,
// Synchronize waits for everything. Each device's failure paths stay in its
// own tests (cuda_copy_device_test, ze_copy_device_test, transfer_engine_test).
// ctest runs the Level Zero cases again in the loader's intercept mode.
//
// Every copy takes a modelled 200 ms on each device, so that a marker or a
// wake that comes early shows; device memory is read back through a stream
// (Level Zero's is not mapped in the host, as on a discrete GPU).

#include <cstdlib>
#include <cstring>
#include <functional>
#include <ostream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/cuda/driver.h"
#include "common/ze/driver.h"
#include "daemon/backend/cuda/copy_device.h"
#include "daemon/backend/cuda/cuda_backend.h"
#include "daemon/backend/level_zero/ze_backend.h"
#include "daemon/backend/level_zero/ze_copy_device.h"
#include "gtest/gtest.h"
#include "tests/daemon/backend/copy_checks.h"
#include "tests/daemon/transfer/fake_copy_device.h"

namespace memd::backend {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;
constexpr int kCopyLatencyUs = 200000;

/// One copy device under test, and device memory on its GPU. Destroys its
/// streams before the device, the device before the memory's backend.
class CopyRig {
 public:
  virtual ~CopyRig() = default;
  virtual CopyDevice& device() = 0;
  // `bytes` of memory on the device's GPU, valid as long as the rig.
  virtual DeviceAddress DeviceMemory(std::uint64_t bytes) = 0;
};

// The engine tests' fake: device memory is host memory.
class FakeRig final : public CopyRig {
 public:
  FakeRig()
      : state_(std::make_shared<test::FakeDeviceState>(
            test::FakeLink{.gbps = 8, .latency = absl::Microseconds(kCopyLatencyUs)})),
        device_(0, state_) {}
  CopyDevice& device() override { return device_; }
  DeviceAddress DeviceMemory(std::uint64_t bytes) override {
    memory_.push_back(std::make_unique<std::byte[]>(bytes));
    return test::FakeDeviceMemory(0, memory_.back().get()).device_address;
  }

 private:
  std::vector<std::unique_ptr<std::byte[]>> memory_;
  std::shared_ptr<test::FakeDeviceState> state_;
  test::FakeCopyDevice device_;
};

// CudaCopyDevice on the fake CUDA driver, device 0's primary context.
class CudaRig final : public CopyRig {
 public:
  static std::unique_ptr<CopyRig> Make() {
    for (const char* name : {"MEMD_FAKE_CUDA_DEVICES", "MEMD_FAKE_CUDA_MEMORY",
                             "MEMD_FAKE_CUDA_VMM", "MEMD_FAKE_CUDA_INIT_ERROR",
                             "CUDA_VISIBLE_DEVICES", "MEMD_FAKE_CUDA_LINK_GBPS",
                             "MEMD_FAKE_CUDA_FAULTS"}) {
      ::unsetenv(name);
    }
    ::setenv("MEMD_FAKE_CUDA_POISON", "1", 1);
    ::setenv("MEMD_FAKE_CUDA_COPY_LATENCY_US", std::to_string(kCopyLatencyUs).c_str(), 1);
    auto rig = std::unique_ptr<CudaRig>(new CudaRig());
    auto driver = cuda::Driver::Load(MEMD_FAKE_CUDA_PATH);
    EXPECT_TRUE(driver.ok()) << driver.status();
    if (!driver.ok()) return nullptr;
    rig->driver_ = *std::move(driver);
    auto backend = CudaBackend::Create(rig->driver_, CudaHandles::kAuto);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return nullptr;
    rig->backend_ = *std::move(backend);
    CUcontext context = nullptr;
    EXPECT_EQ(rig->driver_->api().DevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
    rig->retained_ = true;
    rig->device_ = std::make_unique<CudaCopyDevice>(rig->driver_, 0, context);
    return rig;
  }
  ~CudaRig() override {
    device_.reset();
    segments_.clear();
    if (retained_) driver_->api().DevicePrimaryCtxRelease(0);
  }
  CopyDevice& device() override { return *device_; }
  DeviceAddress DeviceMemory(std::uint64_t bytes) override {
    return ReserveInto(*backend_, Location::Device(0), bytes, segments_).device_address;
  }

 private:
  CudaRig() = default;
  std::shared_ptr<const cuda::Driver> driver_;
  std::unique_ptr<CudaBackend> backend_;
  bool retained_ = false;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::unique_ptr<CudaCopyDevice> device_;
};

// ZeCopyDevice on the fake Level Zero driver under the real loader. The
// loader and the fake read their environment at the process's first zeInit,
// so every Level Zero rig of this process shares one loader, made with the
// suite's environment.
class ZeRig final : public CopyRig {
 public:
  static std::unique_ptr<CopyRig> Make() {
    static const absl::StatusOr<std::shared_ptr<const ze::Loader>> loader = [] {
      for (const char* name :
           {"MEMD_FAKE_ZE_DEVICES", "MEMD_FAKE_ZE_MEMORY", "MEMD_FAKE_ZE_IPC_CACHE",
            "MEMD_FAKE_ZE_POOL_OFFSET", "MEMD_FAKE_ZE_INIT_ERROR", "MEMD_FAKE_ZE_FAULTS"}) {
        ::unsetenv(name);
      }
      ::setenv("ZE_ENABLE_ALT_DRIVERS", MEMD_FAKE_ZE_PATH, 1);
      ::setenv("MEMD_FAKE_ZE_POISON", "1", 1);
      ::setenv("MEMD_FAKE_ZE_COPY_LATENCY_US", std::to_string(kCopyLatencyUs).c_str(), 1);
      return ze::Loader::Load();
    }();
    EXPECT_TRUE(loader.ok()) << loader.status();
    if (!loader.ok()) return nullptr;
    auto rig = std::unique_ptr<ZeRig>(new ZeRig());
    rig->loader_ = *loader;
    auto backend = ZeBackend::Create(rig->loader_);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return nullptr;
    rig->backend_ = *std::move(backend);
    auto device = ZeCopyDevice::Create(rig->loader_, rig->loader_->gpus()[0], 0, {});
    EXPECT_TRUE(device.ok()) << device.status();
    if (!device.ok()) return nullptr;
    rig->device_ = *std::move(device);
    return rig;
  }
  ~ZeRig() override {
    device_.reset();
    segments_.clear();
  }
  CopyDevice& device() override { return *device_; }
  DeviceAddress DeviceMemory(std::uint64_t bytes) override {
    return ReserveInto(*backend_, Location::Device(0), bytes, segments_).device_address;
  }

 private:
  ZeRig() = default;
  std::shared_ptr<const ze::Loader> loader_;
  std::unique_ptr<ZeBackend> backend_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::unique_ptr<ZeCopyDevice> device_;
};

// A wake still running never holds back the copies queued after it: it
// runs beside the stream (CUDA: a host function on a second stream, since
// one queued on the copy stream would hold every later chunk; Level Zero:
// the waiter thread). Copies `bytes` from `source` to `device` while a wake
// blocks; `landed` says whether they are there, read the backend's way.
void ExpectAPendingWakeNeverHoldsBackLaterCopies(CopyStream& stream, DeviceAddress device,
                                                       const std::byte* source,
                                                       std::uint64_t bytes,
                                                       const std::function<bool()>& landed) {
  // Shared with the wake, which may still be returning from its wait when
  // the test ends.
  struct Gates {
    absl::Notification waking, release;
  };
  auto gates = std::make_shared<Gates>();
  ASSERT_TRUE(stream.WakeWhenDone([gates] {
    gates->waking.Notify();
    gates->release.WaitForNotification();
  }).ok());
  ASSERT_TRUE(gates->waking.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(stream.HostToDevice(device, source, bytes).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  EXPECT_TRUE(Is(Await(stream, *marker), true));
  EXPECT_TRUE(landed());
  gates->release.Notify();
}

struct Device {
  const char* name;
  std::function<std::unique_ptr<CopyRig>()> make;
};
void PrintTo(const Device& device, std::ostream* out) { *out << device.name; }

class CopyDeviceConformanceTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    rig_ = GetParam().make();
    ASSERT_NE(rig_, nullptr);
  }
  void TearDown() override {
    streams_.clear();  // Before the device and its staging.
    rig_.reset();
  }

  CopyStream& NewStream() {
    auto stream = rig_->device().NewStream();
    EXPECT_TRUE(stream.ok()) << stream.status();
    streams_.push_back(*std::move(stream));
    return *streams_.back();
  }

  std::span<std::byte> Staging(std::uint64_t bytes) {
    auto staging = rig_->device().AllocateStaging(bytes);
    EXPECT_TRUE(staging.ok()) << staging.status();
    return staging.ok() ? *staging : std::span<std::byte>();
  }

  // Staging that holds Pattern(bytes, seed).
  std::span<std::byte> Filled(std::uint64_t bytes, unsigned seed) {
    std::span<std::byte> staging = Staging(bytes);
    const std::vector<std::byte> data = Pattern(bytes, seed);
    if (staging.size() == bytes) std::memcpy(staging.data(), data.data(), bytes);
    return staging;
  }

  // The device bytes at `address`, read back through a stream of their own.
  std::vector<std::byte> ReadBack(DeviceAddress address, std::uint64_t bytes) {
    std::span<std::byte> landing = Staging(bytes);
    CopyStream& stream = NewStream();
    EXPECT_TRUE(stream.DeviceToHost(landing.data(), address, bytes).ok());
    EXPECT_TRUE(stream.Synchronize().ok());
    return std::vector<std::byte>(landing.begin(), landing.end());
  }

  std::unique_ptr<CopyRig> rig_;
  std::vector<std::unique_ptr<CopyStream>> streams_;
};

TEST_P(CopyDeviceConformanceTest, CopiesEachDirectionInOrderAndTheBytesLandBehindTheMarker) {
  const std::uint64_t size = 3 * kMiB + 4096;
  std::span<std::byte> source = Filled(size, 1);
  std::span<std::byte> landing = Staging(size);
  std::memset(landing.data(), 0, size);
  const DeviceAddress first = rig_->DeviceMemory(4 * kMiB);
  const DeviceAddress second = rig_->DeviceMemory(4 * kMiB);
  CopyStream& stream = NewStream();

  const absl::Time enqueued = absl::Now();
  ASSERT_TRUE(stream.HostToDevice(first, source.data(), size).ok());
  auto uploaded = stream.Mark();
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  const absl::StatusOr<bool> early = stream.Reached(*uploaded);
  ASSERT_TRUE(early.ok()) << early.status();
  // A modelled 200 ms per copy: not there yet, when this thread looked well
  // within them (a loaded machine may not let it).
  if (absl::Now() - enqueued < absl::Microseconds(kCopyLatencyUs / 2)) {
    EXPECT_FALSE(*early) << "a marker was reached before its copy could have landed";
  }
  // Each copy reads what the one before wrote: in order, or the bytes differ.
  ASSERT_TRUE(stream.DeviceToDevice(second, first, size).ok());
  ASSERT_TRUE(stream.DeviceToHost(landing.data(), second, size).ok());
  auto downloaded = stream.Mark();
  ASSERT_TRUE(downloaded.ok());
  EXPECT_TRUE(Is(Await(stream, *uploaded), true));
  EXPECT_TRUE(Is(Await(stream, *downloaded), true));
  EXPECT_TRUE(Same(landing.data(), source.data(), size));
  EXPECT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(rig_->device().health().ok());
}

TEST_P(CopyDeviceConformanceTest, MarkersArePooledAndAForgottenOneIsInvalid) {
  CopyStream& stream = NewStream();
  auto first = stream.Mark();
  auto second = stream.Mark();
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(*first, *second);
  // Reached and forgotten: its event is free for the next Mark (one forgotten
  // before it was seen reached may wait to be reclaimed: Level Zero's does).
  EXPECT_TRUE(Is(Await(stream, *first), true));
  stream.Forget(*first);
  EXPECT_EQ(stream.Reached(*first).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stream.Reached(1000).status().code(), absl::StatusCode::kInvalidArgument);
  stream.Forget(*first);  // Twice: nothing happens.
  auto reused = stream.Mark();
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ(*reused, *first);
  EXPECT_TRUE(Is(Await(stream, *reused), true));
  EXPECT_TRUE(Is(Await(stream, *second), true));
}

TEST_P(CopyDeviceConformanceTest, AWakeRunsOnceAfterTheEarlierCopiesLanded) {
  std::span<std::byte> source = Filled(kMiB, 2);
  std::span<std::byte> landing = Staging(kMiB);
  std::memset(landing.data(), 0, kMiB);
  const DeviceAddress device = rig_->DeviceMemory(2 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device, source.data(), kMiB).ok());
  ASSERT_TRUE(stream.DeviceToHost(landing.data(), device, kMiB).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  // Shared with the wake, which may still be returning when the test ends.
  struct Seen {
    absl::Notification woken;
    std::atomic<int> wakes{0};
    std::atomic<bool> landed{false};
  };
  auto seen = std::make_shared<Seen>();
  ASSERT_TRUE(stream.WakeWhenDone([seen, landing, source] {
    seen->landed = Same(landing.data(), source.data(), kMiB);
    if (seen->wakes.fetch_add(1) == 0) seen->woken.Notify();
  }).ok());
  ASSERT_TRUE(seen->woken.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(seen->landed);
  EXPECT_TRUE(Is(stream.Reached(*marker), true));
  EXPECT_TRUE(stream.Synchronize().ok());
  EXPECT_EQ(seen->wakes.load(), 1);
}

TEST_P(CopyDeviceConformanceTest, APendingWakeNeverHoldsBackLaterCopies) {
  std::span<std::byte> source = Filled(kMiB, 3);
  const DeviceAddress device = rig_->DeviceMemory(2 * kMiB);
  CopyStream& stream = NewStream();
  const std::vector<std::byte> expected(source.begin(), source.end());
  ExpectAPendingWakeNeverHoldsBackLaterCopies(stream, device, source.data(), kMiB, [&] {
    return ReadBack(device, kMiB) == expected;
  });
  ASSERT_TRUE(stream.Synchronize().ok());
}

TEST_P(CopyDeviceConformanceTest, StagingHasTheSizeAskedAndIsRefusedAtZero) {
  std::span<std::byte> staging = Staging(3 * kMiB + 100);
  ASSERT_EQ(staging.size(), 3 * kMiB + 100);
  std::memset(staging.data(), 7, staging.size());  // Writable, every byte.
  std::span<std::byte> other = Staging(kMiB);
  ASSERT_EQ(other.size(), kMiB);
  EXPECT_TRUE(other.data() + other.size() <= staging.data() ||
              staging.data() + staging.size() <= other.data())
      << "two staging areas overlap";
  EXPECT_EQ(rig_->device().AllocateStaging(0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(CopyDeviceConformanceTest, SynchronizeWaitsForEveryCopyOfTheStream) {
  const std::uint64_t size = kMiB;
  std::span<std::byte> source = Filled(size, 4);
  std::span<std::byte> landing = Staging(size);
  std::memset(landing.data(), 0, size);
  const DeviceAddress device = rig_->DeviceMemory(2 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device, source.data(), size).ok());
  ASSERT_TRUE(stream.DeviceToHost(landing.data(), device, size).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(Same(landing.data(), source.data(), size));
}

INSTANTIATE_TEST_SUITE_P(
    Devices, CopyDeviceConformanceTest,
    ::testing::Values(Device{"FakeCopyDevice", [] { return std::unique_ptr<CopyRig>(new FakeRig()); }},
                      Device{"CudaOnTheFakeDriver", [] { return CudaRig::Make(); }},
                      Device{"LevelZeroOnTheFakeDriver", [] { return ZeRig::Make(); }}),
    [](const ::testing::TestParamInfo<Device>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace memd::backend
