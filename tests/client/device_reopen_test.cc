// Device re-opens from libmemd's cache (issue 28, target 3), on the fake
// CUDA driver: a read-only device lease's import stays after the Buffer
// goes, so that opening the buffer again makes no import call and receives
// no descriptor; memd tells the process when it frees the buffer, and the
// import goes then. This process imports through libmemd and counts its own
// driver calls (memdFakeCudaCallCount); memd runs its own fake.

#include <dlfcn.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/cuda/driver.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "memd/v1/memd.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/poll_until.h"
#include "tests/support/raw_session.h"

namespace memd {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kBytes = 4 * kMiB;

using CallCount = std::uint64_t (*)(const char*);

class DeviceReopenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    // libmemd in this process loads the fake too: the same library, so the
    // same counters as driver_.
    ::setenv("MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH, 1);
    auto daemon = test::DaemonProcess::StartWithEnvironment(
        {"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH},
        {{"MEMD_FAKE_CUDA_MEMORY", std::to_string(256 * kMiB)}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto driver = cuda::Driver::Load(MEMD_FAKE_CUDA_PATH);
    ASSERT_TRUE(driver.ok()) << driver.status();
    driver_ = std::move(*driver);
    void* library = ::dlopen(MEMD_FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(library, nullptr);
    calls_ = reinterpret_cast<CallCount>(::dlsym(library, "memdFakeCudaCallCount"));
    ::dlclose(library);  // The Driver keeps it loaded.
    ASSERT_NE(calls_, nullptr);
    client_ = Connect();
  }

  std::unique_ptr<Client> Connect(std::uint64_t device_cache_bytes = std::uint64_t{1} << 30) {
    auto client = Client::Connect(
        {.socket_dir = daemon_->socket_dir(), .device_cache_bytes = device_cache_bytes});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::uint64_t Imports() const { return calls_("cuMemImportFromShareableHandle"); }

  // A sealed device buffer `name` of kBytes, every byte `fill`, made by
  // another client (memd's engine copies the bytes in).
  void Publish(const std::string& name, char fill) {
    std::unique_ptr<Client> producer = Connect(0);
    ASSERT_NE(producer, nullptr);
    auto source = producer->Create(absl::StrCat(name, ".src"), kBytes,
                                   {.location = "host", .persistence = Persistence::kEphemeral});
    ASSERT_TRUE(source.ok()) << source.status();
    std::memset(source->mutable_data().data(), fill, kBytes);
    auto device = producer->Create(name, kBytes, {.location = "device:0"});
    ASSERT_TRUE(device.ok()) << device.status();
    auto copy = producer->Copy({.buffer = &*source}, {.buffer = &*device});
    ASSERT_TRUE(copy.ok()) << copy.status();
    ASSERT_TRUE(copy->Wait().ok());
    ASSERT_TRUE(device->Seal().ok());
  }

  // The buffer's first and last bytes, read through this process's import
  // of it (in the device's primary context, as libmemd imports).
  std::string Ends(const Buffer& buffer) {
    const cuda::DriverApi& api = driver_->api();
    CUdevice device = 0;
    CUcontext context = nullptr;
    EXPECT_EQ(api.DeviceGet(&device, 0), CUDA_SUCCESS);
    EXPECT_EQ(api.DevicePrimaryCtxRetain(&context, device), CUDA_SUCCESS);
    EXPECT_EQ(api.CtxSetCurrent(context), CUDA_SUCCESS);
    char first = 0, last = 0;
    EXPECT_EQ(api.MemcpyDtoH(&first, buffer.device_pointer(), 1), CUDA_SUCCESS);
    EXPECT_EQ(api.MemcpyDtoH(&last, buffer.device_pointer() + kBytes - 1, 1), CUDA_SUCCESS);
    EXPECT_EQ(api.CtxSetCurrent(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(api.DevicePrimaryCtxRelease(device), CUDA_SUCCESS);
    return {first, last};
  }

  std::unique_ptr<test::DaemonProcess> daemon_;
  std::shared_ptr<const cuda::Driver> driver_;
  CallCount calls_ = nullptr;
  std::unique_ptr<Client> client_;
};

TEST_F(DeviceReopenTest, AReadOnlyReopenMakesNoImportCall) {
  ASSERT_NO_FATAL_FAILURE(Publish("weights", 'w'));
  const std::uint64_t before = Imports();
  CUdeviceptr first_pointer = 0;
  {
    auto opened = client_->Open("weights");
    ASSERT_TRUE(opened.ok()) << opened.status();
    EXPECT_EQ(Imports(), before + 1);
    EXPECT_EQ(Ends(*opened), "ww");
    first_pointer = opened->device_pointer();
  }  // Released: the import stays.
  for (int round = 0; round < 3; ++round) {
    auto again = client_->Open("weights");
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->device_pointer(), first_pointer);
    EXPECT_EQ(Ends(*again), "ww");
  }
  EXPECT_EQ(Imports(), before + 1) << "a kept import is opened without an import call";
}

TEST_F(DeviceReopenTest, WithoutADeviceCacheEveryReopenImports) {
  ASSERT_NO_FATAL_FAILURE(Publish("weights", 'w'));
  std::unique_ptr<Client> uncached = Connect(0);
  ASSERT_NE(uncached, nullptr);
  const std::uint64_t before = Imports();
  for (int round = 0; round < 2; ++round) {
    auto opened = uncached->Open("weights");
    ASSERT_TRUE(opened.ok()) << opened.status();
    EXPECT_EQ(Ends(*opened), "ww");
  }
  EXPECT_EQ(Imports(), before + 2);
}

// The case that would keep device memory held for nothing: memd frees the
// buffer (unlinked, its last lease gone) and gives its segment back. The
// client was told and let go, so the driver frees all of it.
TEST_F(DeviceReopenTest, WhenMemdFreesTheBufferTheKeptImportGoes) {
  ASSERT_NO_FATAL_FAILURE(Publish("weights", 'w'));
  {
    auto opened = client_->Open("weights");
    ASSERT_TRUE(opened.ok()) << opened.status();
  }
  const std::uint64_t unmapped = calls_("cuMemUnmap");
  ASSERT_TRUE(client_->Unlink("weights").ok());
  // Told on the session socket; libmemd's watcher lets go.
  ASSERT_TRUE(test::PollUntil([&] { return calls_("cuMemUnmap") > unmapped; }));
  auto trimmed = client_->Trim("device:0");
  ASSERT_TRUE(trimmed.ok()) << trimmed.status();
  ASSERT_EQ(trimmed->size(), 1u);
  EXPECT_GE(trimmed->front().released_bytes, kBytes);
  ASSERT_TRUE(trimmed->front().driver_freed_bytes.has_value());
  EXPECT_EQ(*trimmed->front().driver_freed_bytes, trimmed->front().released_bytes)
      << "no import of this process holds what memd gave back";
}

TEST_F(DeviceReopenTest, ANameThatMeansAnotherBufferNowIsReadAfresh) {
  ASSERT_NO_FATAL_FAILURE(Publish("weights", 'a'));
  {
    auto opened = client_->Open("weights");
    ASSERT_TRUE(opened.ok()) << opened.status();
    EXPECT_EQ(Ends(*opened), "aa");
  }
  ASSERT_TRUE(client_->Unlink("weights").ok());
  ASSERT_NO_FATAL_FAILURE(Publish("weights", 'b'));
  auto reopened = client_->Open("weights");
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(Ends(*reopened), "bb");
}

// The daemon's half, seen from a raw session: an open that names the buffer
// the client keeps gets its lease without a descriptor; one that names
// another id gets the descriptor as always.
TEST_F(DeviceReopenTest, AnOpenNamingTheKeptBufferGetsNoDescriptor) {
  ASSERT_NO_FATAL_FAILURE(Publish("weights", 'w'));
  test::RawSession raw = test::RawSession::Open(daemon_->socket_dir());
  v1::OpenRequest open;
  open.set_name("weights");
  open.set_access(v1::READ);
  open.set_notify_freed(true);
  v1::Lease first;
  ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Open, open, &first).ok());
  EXPECT_NE(first.handle().fd_seq(), 0u);
  open.set_mapped_buffer_id(first.buffer().id());
  v1::Lease kept;
  ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Open, open, &kept).ok());
  EXPECT_EQ(kept.handle().fd_seq(), 0u);
  EXPECT_EQ(kept.handle().segment_id(), first.handle().segment_id());
  open.set_mapped_buffer_id(first.buffer().id() + 1000);
  v1::Lease other;
  ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Open, open, &other).ok());
  EXPECT_NE(other.handle().fd_seq(), 0u);
}

}  // namespace
}  // namespace memd
