// Honest device accounting on the fake CUDA driver (issue 26): for each GPU,
// Stats, memctl and trim put what memd's pool holds beside what the driver
// counts used, so that memory memd gave back while a client's import still
// holds it shows as such, and "freed" never claims what the driver did not
// free. The fake counts released memory used while any import holds it, as
// the real driver does (tests/fake_cuda/README.md, "Accounting").

#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/cuda/driver.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "memd/v1/memd.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/raw_session.h"
#include "tests/support/run_program.h"

namespace memd {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

class DeviceAccountingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    auto daemon = test::DaemonProcess::StartWithEnvironment(
        {"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH},
        {{"MEMD_FAKE_CUDA_MEMORY", std::to_string(256 * kMiB)}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto client = Client::Connect({.socket_dir = daemon_->socket_dir()});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    // This process imports as a client that is not libmemd would.
    auto driver = cuda::Driver::Load(MEMD_FAKE_CUDA_PATH);
    ASSERT_TRUE(driver.ok()) << driver.status();
    driver_ = std::move(*driver);
  }

  DeviceInfo Gpu() {
    auto stats = client_->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    if (!stats.ok() || stats->devices.empty()) return {};
    return stats->devices[0];
  }

  // Creates `name` on device:0 from a raw session and returns its lease and
  // the descriptor memd sent.
  std::pair<v1::Lease, UniqueFd> CreateRaw(const test::RawSession& raw, const std::string& name,
                                           std::uint64_t bytes) {
    v1::CreateRequest create;
    create.set_name(name);
    create.set_size_bytes(bytes);
    create.set_location("device:0");
    v1::Lease lease;
    grpc::Status created = raw.Call(&v1::Memd::Stub::Create, create, &lease);
    EXPECT_TRUE(created.ok()) << created.error_message();
    auto fd = raw.TakeFd(lease.handle().fd_seq());
    EXPECT_TRUE(fd.ok()) << fd.status();
    return {lease, fd.ok() ? std::move(*fd) : UniqueFd()};
  }

  void UnlinkAndRelease(const test::RawSession& raw, const std::string& name,
                        const v1::Lease& lease) {
    v1::UnlinkRequest unlink;
    unlink.set_name(name);
    v1::UnlinkReply unlinked;
    EXPECT_TRUE(raw.Call(&v1::Memd::Stub::Unlink, unlink, &unlinked).ok());
    v1::ReleaseRequest release;
    release.set_lease_id(lease.lease_id());
    v1::ReleaseReply released;
    EXPECT_TRUE(raw.Call(&v1::Memd::Stub::Release, release, &released).ok());
  }

  TrimmedPool TrimDevice() {
    auto trimmed = client_->Trim("device:0");
    EXPECT_TRUE(trimmed.ok()) << trimmed.status();
    if (!trimmed.ok() || trimmed->size() != 1) return {};
    return trimmed->front();
  }

  test::ProgramResult Memctl(const std::vector<std::string>& args) {
    return test::RunProgram(test::BinDir() + "/memctl", args, "",
                            {{"MEMD_SOCKET_DIR", daemon_->socket_dir()}});
  }

  std::unique_ptr<test::DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::shared_ptr<const cuda::Driver> driver_;
};

TEST_F(DeviceAccountingTest, MemdsPoolAndWhatIsOutsideItAreShownBesideTheDriversFigures) {
  const DeviceInfo before = Gpu();
  ASSERT_TRUE(before.has_free);
  EXPECT_EQ(before.total_bytes, 256 * kMiB);
  EXPECT_EQ(before.memd_bytes, 0u);
  EXPECT_EQ(before.total_bytes - before.free_bytes, before.memd_bytes + before.outside_memd_bytes);
  test::RawSession raw = test::RawSession::Open(daemon_->socket_dir());
  auto [lease, fd] = CreateRaw(raw, "acct/a", 8 * kMiB);
  const DeviceInfo holding = Gpu();
  EXPECT_GE(holding.memd_bytes, 8 * kMiB);
  EXPECT_EQ(holding.outside_memd_bytes, before.outside_memd_bytes) << "memd's own is not outside";
  EXPECT_EQ(holding.free_bytes, before.free_bytes - holding.memd_bytes);

  test::ProgramResult devices = Memctl({"devices"});
  ASSERT_EQ(devices.exit_code, 0) << test::Describe(devices);
  EXPECT_THAT(devices.out, HasSubstr("MEMD"));
  EXPECT_THAT(devices.out, HasSubstr("OUTSIDE MEMD"));
  test::ProgramResult stats = Memctl({"stats"});
  ASSERT_EQ(stats.exit_code, 0) << test::Describe(stats);
  EXPECT_THAT(stats.out, HasSubstr(absl::StrCat("memd holds ", holding.memd_bytes / kMiB,
                                                " MiB, outside memd")));
}

// The case vLLM users keep meeting ("sleep freed 0.00 GiB"): memd gives a
// segment back while a client's import holds it. The pool no longer counts
// it, the driver still does; the trim says so and the device shows it
// outside memd until the import goes.
TEST_F(DeviceAccountingTest, MemoryMemdGaveBackThatAnImportHoldsIsNotCalledFreed) {
  const DeviceInfo before = Gpu();
  test::RawSession raw = test::RawSession::Open(daemon_->socket_dir());
  auto [lease, fd] = CreateRaw(raw, "acct/held", 8 * kMiB);
  const cuda::DriverApi& api = driver_->api();
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_EQ(api.MemImportFromShareableHandle(
                &imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd.get())),
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_SUCCESS);
  fd.reset();
  UnlinkAndRelease(raw, "acct/held", lease);

  const TrimmedPool trimmed = TrimDevice();
  EXPECT_GE(trimmed.released_bytes, 8 * kMiB);
  ASSERT_TRUE(trimmed.driver_freed_bytes.has_value());
  EXPECT_EQ(*trimmed.driver_freed_bytes, 0u) << "the import holds all of it";
  const DeviceInfo after = Gpu();
  EXPECT_EQ(after.memd_bytes, 0u);
  EXPECT_EQ(after.outside_memd_bytes, before.outside_memd_bytes + trimmed.released_bytes);

  ASSERT_EQ(api.MemRelease(imported), CUDA_SUCCESS);  // The client lets go at last.
  EXPECT_EQ(Gpu().outside_memd_bytes, before.outside_memd_bytes);
}

TEST_F(DeviceAccountingTest, ATrimOfMemoryNobodyImportsFreesItAsTheDriverSees) {
  test::RawSession raw = test::RawSession::Open(daemon_->socket_dir());
  auto [lease, fd] = CreateRaw(raw, "acct/free", 8 * kMiB);
  fd.reset();
  UnlinkAndRelease(raw, "acct/free", lease);
  const TrimmedPool trimmed = TrimDevice();
  EXPECT_GE(trimmed.released_bytes, 8 * kMiB);
  ASSERT_TRUE(trimmed.driver_freed_bytes.has_value());
  EXPECT_EQ(*trimmed.driver_freed_bytes, trimmed.released_bytes);

  // memctl says what the driver saw; a host pool has no driver to ask.
  auto [again, again_fd] = CreateRaw(raw, "acct/free2", 8 * kMiB);
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_EQ(driver_->api().MemImportFromShareableHandle(
                &imported, reinterpret_cast<void*>(static_cast<std::uintptr_t>(again_fd.get())),
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_SUCCESS);
  UnlinkAndRelease(raw, "acct/free2", again);
  test::ProgramResult trim = Memctl({"trim"});
  ASSERT_EQ(trim.exit_code, 0) << test::Describe(trim);
  EXPECT_THAT(trim.out, HasSubstr("device:0: gave back 8 MiB; the driver's free memory rose by "
                                  "0 B (the rest is still counted used: clients' imports hold "
                                  "it, or another process allocated meanwhile)"));
  EXPECT_THAT(trim.out, HasSubstr("host: gave back"));
  EXPECT_THAT(trim.out, Not(ContainsRegex("host: [^\n]*driver")));
  test::ProgramResult json = Memctl({"trim", "--json"});
  ASSERT_EQ(json.exit_code, 0) << test::Describe(json);
  EXPECT_THAT(json.out, HasSubstr("\"driver_freed_bytes\": null"));
  EXPECT_EQ(driver_->api().MemRelease(imported), CUDA_SUCCESS);
}

}  // namespace
}  // namespace memd
