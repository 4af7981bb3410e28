// Issue 26 item 5: NUMA placement against a client that speaks gRPC itself.
// Whatever it sends as CreateRequest.numa — a sign, words, a node past any
// machine's, a megabyte — is INVALID_ARGUMENT in a short message before
// anything is allocated; a node this machine lacks is refused with the
// number of nodes.

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/security/open_daemon.h"
#include "tests/support/raw_session.h"

namespace memd {
namespace {

using ::testing::HasSubstr;

class NumaAttackTest : public test::OpenDaemonTest {};

TEST_F(NumaAttackTest, AbsurdNodesAreRefusedShortlyBeforeAnythingIsAllocated) {
  StartDaemon();
  test::RawSession raw = test::RawSession::Open(config_.socket_dir);
  const std::vector<std::string> absurd = {"99999", "-1", "abc", "1\n", "\x01",
                                           std::string(1 << 20, '9'),
                                           std::string(1 << 20, 'a')};
  for (const std::string& numa : absurd) {
    for (const char* location : {"host", "pinned"}) {
      v1::CreateRequest create;
      create.set_name("mallory/numa");
      create.set_size_bytes(1 << 20);
      create.set_location(location);
      create.set_numa(numa);
      v1::Lease lease;
      grpc::Status status = raw.Call(&v1::Memd::Stub::Create, create, &lease);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << numa.substr(0, 16);
      EXPECT_LT(status.error_message().size(), 200u);
      EXPECT_THAT(status.error_message(), HasSubstr("auto, off or a node number"));
      v1::OpenOrCreateRequest either;
      *either.mutable_create() = create;
      status = raw.Call(&v1::Memd::Stub::OpenOrCreate, either, &lease);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << numa.substr(0, 16);
      EXPECT_LT(status.error_message().size(), 200u);
    }
  }
  // A well-formed node this machine does not have: the count says why.
  v1::CreateRequest create;
  create.set_name("mallory/numa");
  create.set_size_bytes(1 << 20);
  create.set_numa("1023");
  v1::Lease lease;
  grpc::Status status = raw.Call(&v1::Memd::Stub::Create, create, &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("NUMA node 1023 does not exist: this machine "
                                                "has "));

  auto root = Client::Connect({.socket_dir = config_.socket_dir});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_TRUE(absl::IsNotFound((*root)->Stat("mallory/numa").status()));
  auto stats = (*root)->Stats();
  ASSERT_TRUE(stats.ok());
  for (const PoolStats& pool : stats->pools) {
    EXPECT_EQ(pool.reserved_bytes, 0u) << pool.location << ": nothing was allocated";
  }
}

}  // namespace
}  // namespace memd
