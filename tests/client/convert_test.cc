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
TEST(ConvertTest, EverySessionFieldArrives) { ExpectEveryFieldArrives<v1::SessionInfo>(); }
TEST(ConvertTest, EveryUsageFieldArrives) { ExpectEveryFieldArrives<v1::UidUsage>(); }

TEST(ConvertTest, ABufferNotSealedHasNoSealTime) {
  v1::BufferInfo info;
  info.set_state(v1::CREATING);
  EXPECT_FALSE(FromProto(info).sealed.has_value());
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
