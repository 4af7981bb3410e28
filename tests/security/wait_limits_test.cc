// Finding 11 (issue 9): a wait_timeout_ms of 2^63 or more wrapped into a
// negative duration and slipped past the 24-hour maximum.

#include <cstdint>

#include "daemon/daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/raw_session.h"
#include "tests/security/open_daemon.h"

namespace memd {
namespace {

using ::testing::HasSubstr;

class WaitLimitsTest : public test::OpenDaemonTest {
 protected:
  void SetUp() override { StartDaemon(); }
};

TEST_F(WaitLimitsTest, WaitsBeyondTheMaximumAreInvalidWhateverTheirSize) {
  test::RawSession raw = test::RawSession::Open(config_.socket_dir);
  for (std::uint64_t wait : {std::uint64_t{24} * 3600 * 1000 + 1,
                             std::uint64_t{1} << 63, ~std::uint64_t{0}}) {
    v1::OpenRequest request;
    request.set_name("never/made");
    request.set_wait_timeout_ms(wait);
    v1::Lease lease;
    grpc::Status status = raw.Call(&v1::Memd::Stub::Open, request, &lease);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << wait;
    EXPECT_THAT(status.error_message(), HasSubstr("exceeds the maximum")) << wait;

    v1::OpenOrCreateRequest both;
    both.mutable_create()->set_name("never/made");
    both.mutable_create()->set_size_bytes(4096);
    both.set_wait_timeout_ms(wait);
    status = raw.Call(&v1::Memd::Stub::OpenOrCreate, both, &lease);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << wait;
  }
}

}  // namespace
}  // namespace memd
