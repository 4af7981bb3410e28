#include "client/src/convert.h"

#include <string>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/public_fields.h"
#include "tests/support/proto_fields.h"
#include "tests/support/struct_fields.h"


namespace memd::internal {
namespace {

using ::testing::IsEmpty;

// Every field of the public struct is read from a message whose every field
// has a value of its own, and every field of the message changes the struct.
template <typename Proto>
void ExpectEveryFieldArrives() {
  Proto received;
  int next = 0;
  test::FillMessageDistinct(received, next);
  const auto converted = FromProto(received);
  EXPECT_THAT(test::FieldsLeftDefault(converted), IsEmpty())
      << "fields (by position) of the struct FromProto(" << Proto::descriptor()->name()
      << ") leaves at their default";
  const google::protobuf::Descriptor& descriptor = *Proto::descriptor();
  for (int i = 0; i < descriptor.field_count(); ++i) {
    Proto changed = received;
    test::PerturbMessage(changed, descriptor.field(i));
    EXPECT_FALSE(test::Equal(FromProto(changed), converted))
        << descriptor.name() << "." << descriptor.field(i)->name() << " is not read";
  }
}

TEST(ConvertTest, EverySizeClassFieldArrives) { ExpectEveryFieldArrives<v1::SizeClassStats>(); }
TEST(ConvertTest, EveryPoolStatisticArrives) { ExpectEveryFieldArrives<v1::PoolStats>(); }
TEST(ConvertTest, EveryDeviceFieldArrives) { ExpectEveryFieldArrives<v1::DeviceInfo>(); }
TEST(ConvertTest, EveryDaemonStatisticArrives) { ExpectEveryFieldArrives<v1::StatsReply>(); }
TEST(ConvertTest, EveryBufferFieldArrives) { ExpectEveryFieldArrives<v1::BufferInfo>(); }
TEST(ConvertTest, EveryBufferUsageFieldArrives) { ExpectEveryFieldArrives<v1::BufferUsage>(); }
TEST(ConvertTest, EveryRecommendationFieldArrives) {
  ExpectEveryFieldArrives<v1::Recommendation>();
}
TEST(ConvertTest, EveryLeakFieldArrives) {
  ExpectEveryFieldArrives<v1::Leak>();
  ExpectEveryFieldArrives<v1::LeaksReply>();
}
TEST(ConvertTest, EverySessionFieldArrives) { ExpectEveryFieldArrives<v1::SessionInfo>(); }
TEST(ConvertTest, EveryUsageFieldArrives) { ExpectEveryFieldArrives<v1::UidUsage>(); }
TEST(ConvertTest, EveryTransferStatisticArrives) {
  ExpectEveryFieldArrives<v1::TransferStats>();
}
TEST(ConvertTest, EveryDurabilityFieldArrives) {
  ExpectEveryFieldArrives<v1::DurabilityStats>();
}
TEST(ConvertTest, EveryTransferProgressFieldArrives) {
  ExpectEveryFieldArrives<v1::TransferProgress>();
}

TEST(ConvertTest, EveryListedTransferFieldArrives) {
  ExpectEveryFieldArrives<v1::TransferInfo>();
  ExpectEveryFieldArrives<v1::ListTransfersReply>();
}

TEST(ConvertTest, ListedTransfersNameTheirPriority) {
  v1::TransferInfo transfer;
  transfer.set_priority(v1::PRIORITY_BACKGROUND);
  EXPECT_EQ(FromProto(transfer).priority, Priority::kBackground);
  transfer.set_priority(v1::PRIORITY_CRITICAL);
  EXPECT_EQ(FromProto(transfer).priority, Priority::kCritical);
  transfer.set_priority(v1::PRIORITY_UNSPECIFIED);
  EXPECT_EQ(FromProto(transfer).priority, Priority::kNormal) << "as the daemon treats it";
}

TEST(ConvertTest, ADeviceWithoutAnErrorIsHealthy) {
  v1::DeviceInfo device;
  EXPECT_TRUE(FromProto(device).healthy);
  device.set_health_error("CUDA_ERROR_ILLEGAL_ADDRESS (700) in cuMemcpyHtoDAsync_v2");
  EXPECT_FALSE(FromProto(device).healthy);
  EXPECT_EQ(FromProto(device).health_error, device.health_error());
}

TEST(ConvertTest, TransfersNameTheirDirectionAndPath) {
  v1::TransferProgress progress;
  progress.set_direction(v1::HOST_TO_DEVICE);
  progress.set_path(v1::PATH_STAGED);
  EXPECT_EQ(FromProto(progress).direction, "h2d");
  EXPECT_EQ(FromProto(progress).path, "staged");
  progress.set_direction(v1::DEVICE_TO_DEVICE);
  progress.set_path(v1::DATA_PATH_UNSPECIFIED);
  EXPECT_EQ(FromProto(progress).direction, "d2d");
  EXPECT_EQ(FromProto(progress).path, "") << "no path before the first chunk";
}

TEST(ConvertTest, ATransferEndedByAnUnknownCodeReadsAsUnknown) {
  v1::TransferProgress progress;
  progress.set_state(v1::TRANSFER_FAILED);
  progress.set_error_code(99);
  progress.set_error_message("from a newer daemon");
  const TransferProgress read = FromProto(progress);
  EXPECT_EQ(read.status.code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(read.status.message(), "from a newer daemon");
  EXPECT_TRUE(read.finished());
}

TEST(ConvertTest, ABufferNotSealedHasNoSealTime) {
  v1::BufferInfo info;
  info.set_state(v1::CREATING);
  EXPECT_FALSE(FromProto(info).sealed.has_value());
}

TEST(ConvertTest, ABufferNeverUsedHasNoLastUse) {
  v1::BufferInfo info;
  info.mutable_usage()->set_lazy_copies(2);
  EXPECT_FALSE(FromProto(info).usage.last_used.has_value());
  info.mutable_usage()->set_last_used_unix_ns(1'000'000'000);
  EXPECT_EQ(FromProto(info).usage.last_used, absl::FromUnixSeconds(1));
}

TEST(ConvertTest, DevicesNameTheirHandleType) {
  v1::DeviceInfo device;
  device.set_handle_type(v1::CUDA_IPC);
  EXPECT_EQ(FromProto(device).handle_type, "ipc");
  device.set_handle_type(v1::CUDA_VMM_FD);
  EXPECT_EQ(FromProto(device).handle_type, "vmm_fd");
}

}  // namespace
}  // namespace memd::internal
