// Issue 25, location auto: a hostile client speaking gRPC itself (not
// libmemd) sends hints and mappable lists libmemd never would. Each bad one
// is INVALID_ARGUMENT naming what is wrong, in a bounded message; the daemon
// keeps serving; and auto never chooses a GPU the caller did not list, even
// where that GPU would win (two fake CUDA GPUs with equal free memory: the
// tie goes to device:0).

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/daemon_process.h"
#include "tests/support/raw_session.h"

namespace memd {
namespace {

using ::memd::test::DaemonProcess;
using ::memd::test::RawSession;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class PlacementAttackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The daemon's fake driver serves two GPUs to every process it starts.
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    ::setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
    auto daemon = DaemonProcess::Start({"--backend", "cuda", "--cuda-driver",
                                        MEMD_FAKE_CUDA_PATH});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    raw_ = RawSession::Open(daemon_->socket_dir());
  }

  v1::CreateRequest Auto(const std::string& name, std::uint64_t size,
                         std::vector<std::string> mappable, std::string hint = "") {
    v1::CreateRequest create;
    create.set_name(name);
    create.set_size_bytes(size);
    create.set_location("auto");
    create.set_access_hint(hint);
    for (const std::string& location : mappable) create.add_mappable_locations(location);
    return create;
  }

  grpc::Status Create(const v1::CreateRequest& create, v1::Lease* lease) {
    grpc::Status status = raw_.Call(&v1::Memd::Stub::Create, create, lease);
    raw_.Drain();
    return status;
  }

  std::unique_ptr<DaemonProcess> daemon_;
  RawSession raw_;
};

TEST_F(PlacementAttackTest, EveryLocationAndABogusOneIsInvalidArgumentNamingIt) {
  v1::Lease lease;
  grpc::Status status = Create(
      Auto("a", 4096, {"host", "pinned", "device:0", "device:1", "device:nope"}), &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("mappable location 'device:nope'"));

  std::vector<std::string> flood;
  for (int i = 0; i < 100000; ++i) flood.push_back(absl::StrCat("device:", i));
  status = Create(Auto("a", 4096, flood), &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("100000 mappable locations given; the limit is 64"));

  // A megabyte of hint is refused in a short message.
  status = Create(Auto("a", 4096, {"host"}, std::string(1 << 20, 'h')), &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), StartsWith("an access hint of 1048576 bytes"));
  EXPECT_LT(status.error_message().size(), 400u);

  v1::PingRequest ping;
  v1::PingReply pong;
  EXPECT_TRUE(raw_.Call(&v1::Memd::Stub::Ping, ping, &pong).ok()) << "the daemon still serves";
}

TEST_F(PlacementAttackTest, AHintWithoutAutoIsInvalidArgument) {
  v1::CreateRequest create = Auto("a", 4096, {}, "read_mostly");
  create.set_location("device:0");
  v1::Lease lease;
  grpc::Status status = Create(create, &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("go with location auto"));
}

TEST_F(PlacementAttackTest, AutoNeverChoosesADeviceTheCallerDidNotList) {
  v1::Lease lease;
  // Equal free memory: the tie would go to device:0.
  ASSERT_TRUE(Create(Auto("one", 8 << 20, {"host", "device:1"}), &lease).ok());
  EXPECT_EQ(lease.buffer().location(), "device:1");
  EXPECT_THAT(lease.buffer().placement(), HasSubstr("device:1 has the most free"));
  ASSERT_TRUE(Create(Auto("two", 4096, {"pinned", "device:1"}, "device_frequent"), &lease).ok());
  EXPECT_EQ(lease.buffer().location(), "device:1");
  // No list: host and pinned only, however much a GPU is wanted.
  ASSERT_TRUE(Create(Auto("three", 8 << 20, {}, "device_frequent"), &lease).ok());
  EXPECT_THAT(lease.buffer().location(), AnyOf("pinned", "host"));
  EXPECT_THAT(lease.buffer().placement(), HasSubstr("no device this process can map"));
  // Only GPUs the node lacks: nothing to place in.
  grpc::Status status = Create(Auto("four", 4096, {"device:9"}), &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("no candidate location this process can map"));
}

}  // namespace
}  // namespace memd
