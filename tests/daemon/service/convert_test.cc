#include "daemon/service/convert.h"

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/support/proto_fields.h"
#include "tests/support/struct_fields.h"

// The daemon's structs, field by field. A line here stops compiling when its
// struct gains a field: send the field in daemon/service/convert.cc's
// ToProto (and add it to memd.proto), then name it here. A field that stays
// in the daemon goes into that test's `kept` list instead.
namespace memd::test {
template <>
struct Fields<pool::SizeClassStats> {
  static auto Of(auto& s) {
    auto& [bytes, allocations, cached] = s;
    return std::tie(bytes, allocations, cached);
  }
};
template <>
struct Fields<pool::PoolStats> {
  static auto Of(auto& s) {
    auto& [location, reserved_bytes, used_bytes, peak_reserved_bytes, peak_used_bytes,
           hit_count, miss_count, largest_free_bytes, segments, scrubbed_bytes,
           trimmed_bytes, limit_bytes, limit_rejections, size_classes] = s;
    return std::tie(location, reserved_bytes, used_bytes, peak_reserved_bytes,
                    peak_used_bytes, hit_count, miss_count, largest_free_bytes, segments,
                    scrubbed_bytes, trimmed_bytes, limit_bytes, limit_rejections,
                    size_classes);
  }
};
template <>
struct Fields<broker::BufferInfo> {
  static auto Of(auto& s) {
    auto& [name, id, size, location, owner_uid, owner_gid, mode, state, persistence,
           lease_count, unlinked, created, sealed, creator_pid] = s;
    return std::tie(name, id, size, location, owner_uid, owner_gid, mode, state,
                    persistence, lease_count, unlinked, created, sealed, creator_pid);
  }
};
template <>
struct Fields<broker::SessionInfo> {
  static auto Of(auto& s) {
    auto& [id, pid, uid, gid, command, lease_count, started, created_bytes] = s;
    return std::tie(id, pid, uid, gid, command, lease_count, started, created_bytes);
  }
};
template <>
struct Fields<broker::UidUsage> {
  static auto Of(auto& s) {
    auto& [uid, location, bytes, buffers, quota_bytes] = s;
    return std::tie(uid, location, bytes, buffers, quota_bytes);
  }
};
template <>
struct Fields<backend::DeviceInfo> {
  static auto Of(auto& s) {
    auto& [ordinal, uuid, name, total_bytes, free_bytes, vmm, posix_fd, handle_type] = s;
    return std::tie(ordinal, uuid, name, total_bytes, free_bytes, vmm, posix_fd,
                    handle_type);
  }
};
}  // namespace memd::test

namespace memd::service {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::IsEmpty;

// Every field of the message is set from a struct whose every field has a
// value of its own, and every field of the struct changes the message but
// those `kept` (in the daemon) says it keeps.
template <typename Proto, typename Struct>
void ExpectEveryFieldCrosses(
    std::function<bool(const Struct&, const void* field)> kept = nullptr) {
  Struct value;
  int next = 0;
  test::FillDistinct(value, next);
  Proto sent;
  ToProto(value, &sent);
  EXPECT_THAT(test::MessageFieldsLeftDefault(sent), IsEmpty())
      << Proto::descriptor()->name() << " fields ToProto leaves unset";
  test::ForEachPerturbed(value, [&](std::size_t index, const Struct& changed,
                                    const void* field) {
    Proto resent;
    ToProto(changed, &resent);
    const bool stays = kept != nullptr && kept(changed, field);
    EXPECT_EQ(MessageDifferencer::Equals(sent, resent), stays)
        << Proto::descriptor()->name() << ": field #" << index << " of the struct "
        << (stays ? "was meant to stay in the daemon" : "does not reach the message");
  });
}

TEST(ConvertTest, EverySizeClassFieldIsSent) {
  ExpectEveryFieldCrosses<v1::SizeClassStats, pool::SizeClassStats>();
}

TEST(ConvertTest, EveryPoolStatisticIsSent) {
  // limit_rejections: the metrics show it (memd_quota_rejections_total).
  ExpectEveryFieldCrosses<v1::PoolStats, pool::PoolStats>(
      [](const pool::PoolStats& stats, const void* field) {
        return field == &stats.limit_rejections;
      });
}

TEST(ConvertTest, EveryBufferFieldIsSent) {
  ExpectEveryFieldCrosses<v1::BufferInfo, broker::BufferInfo>();
}

TEST(ConvertTest, EverySessionFieldIsSent) {
  ExpectEveryFieldCrosses<v1::SessionInfo, broker::SessionInfo>();
}

TEST(ConvertTest, EveryUsageFieldIsSent) {
  ExpectEveryFieldCrosses<v1::UidUsage, broker::UidUsage>();
}

TEST(ConvertTest, EveryDeviceFieldIsSent) {
  ExpectEveryFieldCrosses<v1::DeviceInfo, backend::DeviceInfo>();
}

TEST(ConvertTest, PoolStatsSendTheFiguresDerivedFromThem) {
  pool::PoolStats stats;
  stats.reserved_bytes = 10;
  stats.used_bytes = 6;
  stats.largest_free_bytes = 1;
  v1::PoolStats sent;
  ToProto(stats, &sent);
  EXPECT_EQ(sent.free_bytes(), 4u);
  EXPECT_EQ(sent.fragmentation(), 0.75);
}

}  // namespace
}  // namespace memd::service
