// The CUDA copy side (CudaCopyDevice, CudaCopyStream) over the project's fake
// CUDA driver: real asynchronous copies on the fake's copy engines, the
// fake's fault injection for every failure path, and where each segment's
// bytes are for the daemon (Segment::Memory).

#include "daemon/backend/cuda/copy_device.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/numa.h"
#include "common/cuda/driver.h"
#include "daemon/backend/cuda/cuda_backend.h"
#include "daemon/backend/host/memfd_segment.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/backend/copy_checks.h"
#include "tests/support/temp_dir.h"

namespace memd::backend {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;

const std::byte* Bytes(DeviceAddress address) {  // The fake's device memory is host memory.
  return reinterpret_cast<const std::byte*>(static_cast<std::uintptr_t>(address));
}

// A fresh fake with `environment` (read at its cuInit), its backend, and the
// copy devices. Destroyed streams first, then devices, segments, backend,
// driver (members are destroyed in reverse order).
class CudaCopyDeviceTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::pair<const char*, const char*>> environment = {},
             CudaCopyDevice::Options options = {}) {
    for (const char* name :
         {"MEMD_FAKE_CUDA_DEVICES", "MEMD_FAKE_CUDA_MEMORY", "MEMD_FAKE_CUDA_VMM",
          "MEMD_FAKE_CUDA_INIT_ERROR", "CUDA_VISIBLE_DEVICES", "MEMD_FAKE_CUDA_LINK_GBPS",
          "MEMD_FAKE_CUDA_COPY_LATENCY_US", "MEMD_FAKE_CUDA_POISON", "MEMD_FAKE_CUDA_FAULTS"}) {
      ::unsetenv(name);
    }
    for (auto [name, value] : environment) ::setenv(name, value, 1);
    auto driver = cuda::Driver::Load(MEMD_FAKE_CUDA_PATH);
    ASSERT_TRUE(driver.ok()) << driver.status();
    driver_ = *std::move(driver);
    auto backend = CudaBackend::Create(driver_, CudaHandles::kAuto);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
    for (const DeviceInfo& info : backend_->devices()) {
      const CUcontext context = Context(info.ordinal);
      devices_.push_back(std::make_unique<CudaCopyDevice>(driver_, info.ordinal, context, options));
    }
  }

  // The backend's primary context of `ordinal` (retained again: the fake
  // counts, and the backend keeps its own retain).
  CUcontext Context(int ordinal) {
    CUcontext context = nullptr;
    EXPECT_EQ(driver_->api().DevicePrimaryCtxRetain(&context, ordinal), CUDA_SUCCESS);
    retained_.push_back(ordinal);
    return context;
  }

  void TearDown() override {
    streams_.clear();
    devices_.clear();
    segments_.clear();
    for (int ordinal : retained_) driver_->api().DevicePrimaryCtxRelease(ordinal);
    backend_.reset();
    driver_.reset();
  }

  SegmentMemory Reserve(const Location& location, std::uint64_t bytes) {
    return ReserveInto(*backend_, location, bytes, segments_);
  }

  CopyStream& NewStream(int device = 0) {
    auto stream = devices_[device]->NewStream();
    EXPECT_TRUE(stream.ok()) << stream.status();
    streams_.push_back(*std::move(stream));
    return *streams_.back();
  }

  std::span<std::byte> Staging(std::uint64_t bytes, int device = 0) {
    auto staging = devices_[device]->AllocateStaging(bytes);
    EXPECT_TRUE(staging.ok()) << staging.status();
    return staging.ok() ? *staging : std::span<std::byte>();
  }

  std::shared_ptr<const cuda::Driver> driver_;
  std::unique_ptr<CudaBackend> backend_;
  std::vector<int> retained_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::vector<std::unique_ptr<CudaCopyDevice>> devices_;
  std::vector<std::unique_ptr<CopyStream>> streams_;
};

// ---- Copies, markers, wakes ----

TEST_F(CudaCopyDeviceTest, CopiesEachDirectionAndTheBytesLandBehindTheMarker) {
  // Poisoned destinations and a modelled second per copy: a marker that
  // said "reached" early, or bytes read before it, would show.
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_POISON", "1"},
                                 {"MEMD_FAKE_CUDA_COPY_LATENCY_US", "300000"}}));
  const std::size_t size = 3 * kMiB;
  const std::vector<std::byte> data = Pattern(size, 1);
  std::span<std::byte> staging = Staging(size);
  std::memcpy(staging.data(), data.data(), size);
  const SegmentMemory device = Reserve(Location::Device(0), 4 * kMiB);
  const SegmentMemory copy = Reserve(Location::Device(0), 4 * kMiB);
  const SegmentMemory pinned = Reserve(Location::Pinned(), 4 * kMiB);
  CopyStream& stream = NewStream();

  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), size).ok());
  auto uploaded = stream.Mark();
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  EXPECT_TRUE(Is(stream.Reached(*uploaded), false));
  ASSERT_TRUE(stream.DeviceToDevice(copy.device_address, device.device_address, size).ok());
  ASSERT_TRUE(stream.DeviceToHost(pinned.host, copy.device_address, size).ok());
  auto downloaded = stream.Mark();
  ASSERT_TRUE(downloaded.ok());
  EXPECT_TRUE(Is(Await(stream, *uploaded), true));
  EXPECT_TRUE(Same(Bytes(device.device_address), data.data(), size));
  EXPECT_TRUE(Is(Await(stream, *downloaded), true));
  EXPECT_TRUE(Same(Bytes(copy.device_address), data.data(), size));
  EXPECT_TRUE(Same(pinned.host, data.data(), size));
  EXPECT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(devices_[0]->health().ok());
}

TEST_F(CudaCopyDeviceTest, WakeWhenDoneRunsOnceTheEarlierCopiesLanded) {
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_COPY_LATENCY_US", "200000"}}));
  const std::vector<std::byte> data = Pattern(kMiB, 2);
  std::span<std::byte> staging = Staging(kMiB);
  std::memcpy(staging.data(), data.data(), kMiB);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), kMiB).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  absl::Notification woken;
  bool landed = false;
  ASSERT_TRUE(stream.WakeWhenDone([&] {
    landed = Same(Bytes(device.device_address), data.data(), kMiB);
    woken.Notify();
  }).ok());
  ASSERT_TRUE(woken.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(landed);
  EXPECT_TRUE(Is(stream.Reached(*marker), true));
}

TEST_F(CudaCopyDeviceTest, StagingIsPinnedTouchedAndRefusedAtZero) {
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_COPY_LATENCY_US", "1000000"}}));
  std::span<std::byte> staging = Staging(3 * kMiB + 100);
  ASSERT_EQ(staging.size(), 3 * kMiB + 100);
  EXPECT_EQ(::mincore(staging.data(), staging.size(), std::vector<unsigned char>(800).data()), 0);
  std::memset(staging.data(), 7, staging.size());
  // Pinned: the fake copies it asynchronously (a pageable source would make
  // the call wait the modelled second, and the marker be reached at once).
  const SegmentMemory device = Reserve(Location::Device(0), 4 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), staging.size()).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  EXPECT_TRUE(Is(stream.Reached(*marker), false));
  EXPECT_EQ(devices_[0]->AllocateStaging(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CudaCopyDeviceTest, OutOfPinnedMemoryForStagingIsResourceExhausted) {
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_FAULTS", "cuMemHostAlloc@1=2"}}));
  auto staging = devices_[0]->AllocateStaging(kMiB);
  EXPECT_EQ(staging.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(staging.status().message(), HasSubstr("cuMemHostAlloc"));
  EXPECT_TRUE(devices_[0]->AllocateStaging(kMiB).ok());  // The next one works.
}

// A sysfs tree with two NUMA nodes in which the fake's GPU 0 (PCI
// 0000:00:00.0: domain 0, bus = its index, device 0) hangs off `node`.
class TwoNodeSysfs {
 public:
  explicit TwoNodeSysfs(const std::string& node) {
    const std::filesystem::path root = dir_.path();
    for (const char* name : {"node0", "node1"}) {
      std::filesystem::create_directories(root / "devices/system/node" / name);
    }
    std::filesystem::create_directories(root / "bus/pci/devices/0000:00:00.0");
    std::ofstream(root / "bus/pci/devices/0000:00:00.0/numa_node") << node << "\n";
  }
  const std::string& root() const { return dir_.path(); }

 private:
  test::TempDir dir_;
};

// On a machine with several nodes the staging memory sits on the GPU's
// (node 0 here, the one this machine has), registered with the driver:
// copies from it are asynchronous, as from cuMemHostAlloc's.
TEST_F(CudaCopyDeviceTest, StagingSitsOnTheGpusNumaNodeWhereThereAreSeveral) {
  if (numa::NodeCount() == 0) GTEST_SKIP() << "this kernel lists no NUMA nodes";
  TwoNodeSysfs sysfs("0");
  CudaCopyDevice::Options options;
  options.sysfs_root = sysfs.root();
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_COPY_LATENCY_US", "1000000"},
                                 {"MEMD_FAKE_CUDA_FAULTS", "cuMemHostAlloc@1=2"}},
                                options));
  EXPECT_EQ(devices_[0]->StagingNode(), 0);
  // cuMemHostAlloc would fail: the memory comes another way.
  std::span<std::byte> staging = Staging(2 * kMiB);
  ASSERT_EQ(staging.size(), 2 * kMiB);
  for (std::uint64_t at = 0; at < staging.size(); at += 4096) {
    ASSERT_EQ(numa::NodeOfPage(staging.data() + at), 0) << "page at " << at;
  }
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), staging.size()).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  EXPECT_TRUE(Is(stream.Reached(*marker), false))
      << "the copy waited for its modelled second: the fake saw pageable memory";
}

// One node, or a GPU the kernel places nowhere: cuMemHostAlloc as before.
TEST_F(CudaCopyDeviceTest, StagingIsNotPlacedWithoutASecondNodeOrAKnownOne) {
  TwoNodeSysfs unknown("-1");
  CudaCopyDevice::Options options;
  options.sysfs_root = unknown.root();
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_FAULTS", "cuMemHostAlloc@1=2"}}, options));
  EXPECT_EQ(devices_[0]->StagingNode(), std::nullopt);
  EXPECT_THAT(devices_[0]->AllocateStaging(kMiB).status().message(), HasSubstr("cuMemHostAlloc"));
  test::TempDir empty;
  options.sysfs_root = empty.path();
  CudaCopyDevice one_node(driver_, 0, Context(0), options);
  EXPECT_EQ(one_node.StagingNode(), std::nullopt);
}

TEST_F(CudaCopyDeviceTest, OneCopyDevicePerGpuFromTheBackend) {
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_DEVICES", "2"}}));
  auto copy_devices = backend_->CopyDevices();
  ASSERT_TRUE(copy_devices.ok()) << copy_devices.status();
  ASSERT_EQ(copy_devices->size(), 2u);
  for (int ordinal = 0; ordinal < 2; ++ordinal) {
    CopyDevice& device = *(*copy_devices)[ordinal];
    EXPECT_EQ(device.ordinal(), ordinal);
    EXPECT_TRUE(device.health().ok());
    auto stream = device.NewStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    auto marker = (*stream)->Mark();
    ASSERT_TRUE(marker.ok());
    EXPECT_TRUE(Is(Await(**stream, *marker), true));
  }
}

// ---- Failures, by the fake's fault injection ----

TEST_F(CudaCopyDeviceTest, TransientErrorAtTheCallIsUnavailableNamingTheCall) {
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_FAULTS", "cuMemcpyHtoDAsync_v2@1=2"}}));
  std::span<std::byte> staging = Staging(kMiB);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  absl::Status status = stream.HostToDevice(device.device_address, staging.data(), kMiB);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("cuMemcpyHtoDAsync"));
  EXPECT_THAT(status.message(), HasSubstr("CUDA_ERROR_OUT_OF_MEMORY"));
  EXPECT_THAT(status.message(), HasSubstr("device 0"));
  EXPECT_TRUE(stream.HostToDevice(device.device_address, staging.data(), kMiB).ok());
  EXPECT_TRUE(devices_[0]->health().ok());
}

TEST_F(CudaCopyDeviceTest, BadAddressIsInvalidArgument) {
  ASSERT_NO_FATAL_FAILURE(Start());
  std::span<std::byte> staging = Staging(kMiB);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  EXPECT_EQ(stream.HostToDevice(device.device_address + kMiB, staging.data(), 2 * kMiB).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stream.DeviceToHost(staging.data(), 4096, kMiB).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(stream.DeviceToDevice(device.device_address, 4096, kMiB).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(devices_[0]->health().ok());
}

TEST_F(CudaCopyDeviceTest, OtherErrorAtTheCallIsInternal) {
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_FAULTS", "cuEventRecord@1=999"}}));
  CopyStream& stream = NewStream();
  auto marker = stream.Mark();
  EXPECT_EQ(marker.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(marker.status().message(), HasSubstr("cuEventRecord"));
  auto next = stream.Mark();  // The event went back to the pool.
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_TRUE(Is(Await(stream, *next), true));
}

TEST_F(CudaCopyDeviceTest, ErrorSurfacedByAMarkerIsUnavailableOnce) {
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_FAULTS", "event@1=999"}}));
  std::span<std::byte> staging = Staging(kMiB);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), kMiB).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  absl::StatusOr<bool> reached = Await(stream, *marker);
  EXPECT_EQ(reached.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(reached.status().message(), HasSubstr("CUDA_ERROR_UNKNOWN"));
  EXPECT_TRUE(devices_[0]->health().ok());  // Not sticky: the retry may go ahead.
  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), kMiB).ok());
  auto retry = stream.Mark();
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(Is(Await(stream, *retry), true));
}

TEST_F(CudaCopyDeviceTest, ErrorSurfacedBySynchronizeIsUnavailable) {
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_FAULTS", "event@1=2"}}));
  std::span<std::byte> staging = Staging(kMiB);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), kMiB).ok());
  EXPECT_EQ(stream.Synchronize().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(stream.Synchronize().ok());
}

TEST_F(CudaCopyDeviceTest, StickyErrorBreaksTheDeviceForGood) {
  // The copy lands (and breaks the context) 200 ms after it is queued:
  // Mark, right behind it, runs on a context that still works.
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_FAULTS", "sticky@1=700"},
                                 {"MEMD_FAKE_CUDA_COPY_LATENCY_US", "200000"}}));
  std::span<std::byte> staging = Staging(kMiB);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), kMiB).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  absl::StatusOr<bool> reached = Await(stream, *marker);
  EXPECT_EQ(reached.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(reached.status().message(), HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  const absl::Status health = devices_[0]->health();
  EXPECT_EQ(health.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(health.message(), HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  EXPECT_THAT(health.message(), HasSubstr("restarts"));
  // Every later call says so, the device's other streams' included.
  EXPECT_EQ(stream.HostToDevice(device.device_address, staging.data(), kMiB), health);
  EXPECT_EQ(stream.Mark().status(), health);
  EXPECT_EQ(stream.Synchronize(), health);
  EXPECT_EQ(stream.WakeWhenDone([] {}), health);
  EXPECT_EQ(devices_[0]->NewStream().status(), health);
  EXPECT_EQ(devices_[0]->AllocateStaging(kMiB).status(), health);
}

TEST_F(CudaCopyDeviceTest, DestroyingAStreamWithAHungCopyGivesUpAfterTheDrainTimeout) {
  CudaCopyDevice::Options options;
  options.drain_timeout = absl::Milliseconds(100);
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_FAULTS", "hang@1"}}, options));
  std::span<std::byte> staging = Staging(kMiB);
  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  CopyStream& stream = NewStream();
  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), kMiB).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  EXPECT_TRUE(Is(stream.Reached(*marker), false));
  streams_.clear();  // Returns: the drain gives up.
  EXPECT_TRUE(devices_[0]->health().ok());  // A hang is no driver error.
}

// ---- Segment::Memory ----

TEST_F(CudaCopyDeviceTest, EverySegmentSaysWhereItsBytesAre) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto host = backend_->Reserve(Location::Host(), kMiB);
  ASSERT_TRUE(host.ok());
  auto host_memory = (*host)->Memory();
  ASSERT_TRUE(host_memory.ok());
  EXPECT_NE(host_memory->host, nullptr);
  EXPECT_EQ(host_memory->device, -1);
  EXPECT_FALSE(host_memory->registered);
  EXPECT_FALSE(host_memory->on_device());
  // The daemon's mapping and a client's mapping of the export are the same pages.
  auto handle = (*host)->Export(Access::kRead);
  ASSERT_TRUE(handle.ok());
  void* client = ::mmap(nullptr, kMiB, PROT_READ, MAP_SHARED, handle->fd, 0);
  ASSERT_NE(client, MAP_FAILED);
  std::memcpy(host_memory->host + 4096, "memd", 4);
  EXPECT_TRUE(Same(static_cast<char*>(client) + 4096, "memd", 4));
  ::munmap(client, kMiB);
  EXPECT_EQ(host_memory->At(10).host, host_memory->host + 10);

  const SegmentMemory pinned = Reserve(Location::Pinned(), kMiB);
  EXPECT_NE(pinned.host, nullptr);
  EXPECT_TRUE(pinned.registered);
  EXPECT_EQ(pinned.device, -1);

  const SegmentMemory device = Reserve(Location::Device(0), 2 * kMiB);
  EXPECT_NE(device.device_address, 0u);
  EXPECT_EQ(device.device, 0);
  EXPECT_EQ(device.host, nullptr);
  EXPECT_EQ(device.At(10).device_address, device.device_address + 10);
}

TEST_F(CudaCopyDeviceTest, LegacyIpcSegmentIsItsAllocationOnItsDevice) {
  ASSERT_NO_FATAL_FAILURE(Start({{"MEMD_FAKE_CUDA_VMM", "0"}, {"MEMD_FAKE_CUDA_DEVICES", "2"}}));
  const SegmentMemory device = Reserve(Location::Device(1), 2 * kMiB);
  EXPECT_NE(device.device_address, 0u);
  EXPECT_EQ(device.device, 1);
  // The engine can copy into it on its device's stream.
  std::span<std::byte> staging = Staging(kMiB, 1);
  std::memset(staging.data(), 9, kMiB);
  CopyStream& stream = NewStream(1);
  ASSERT_TRUE(stream.HostToDevice(device.device_address, staging.data(), kMiB).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_TRUE(Same(Bytes(device.device_address), staging.data(), kMiB));
}

TEST(MemfdSegmentTest, PinnedAndPlainSegmentsAreMappedOnceByTheDaemon) {
  for (bool pin : {false, true}) {
    auto segment = MemfdSegment::Create(kMiB, pin);
    if (pin && !segment.ok() &&
        segment.status().code() == absl::StatusCode::kResourceExhausted) {
      continue;  // RLIMIT_MEMLOCK on this machine: covered by host_backend_test.
    }
    ASSERT_TRUE(segment.ok()) << segment.status();
    auto first = (*segment)->Memory();
    auto second = (*segment)->Memory();
    ASSERT_TRUE(first.ok() && second.ok());
    EXPECT_EQ(first->host, second->host);
    EXPECT_EQ(first->host, (*segment)->mapping());
    EXPECT_FALSE(first->registered);  // Locked is not registered with a GPU driver.
    first->host[kMiB - 1] = std::byte{1};
    ASSERT_TRUE((*segment)->Scrub().ok());
    EXPECT_EQ(first->host[kMiB - 1], std::byte{0});
  }
}

}  // namespace
}  // namespace memd::backend
