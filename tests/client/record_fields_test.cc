// The records' field tables (client/src/record_fields.h) against the
// protocol, which makes each table the one place a new field is written:
// every field of a message is named by an entry of its record's table, and
// every plain entry carries the field's value from the message through the
// record into the JSON under the field's name. (That every member of a record
// has an entry, tests/client/public_fields.h checks as it compiles.)

#include "client/src/record_fields.h"

#include <cstddef>
#include <set>
#include <string>

#include "client/src/convert.h"
#include "gtest/gtest.h"
#include "tests/support/proto_fields.h"

namespace memd::internal {
namespace {

using google::protobuf::FieldDescriptor;

// A singular scalar field of `message`, as JSON.
Json FieldJson(const google::protobuf::Message& message, const FieldDescriptor& field) {
  const google::protobuf::Reflection& reflection = *message.GetReflection();
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return reflection.GetInt32(message, &field);
    case FieldDescriptor::CPPTYPE_INT64: return reflection.GetInt64(message, &field);
    case FieldDescriptor::CPPTYPE_UINT32: return reflection.GetUInt32(message, &field);
    case FieldDescriptor::CPPTYPE_UINT64: return reflection.GetUInt64(message, &field);
    case FieldDescriptor::CPPTYPE_DOUBLE: return reflection.GetDouble(message, &field);
    case FieldDescriptor::CPPTYPE_FLOAT: return reflection.GetFloat(message, &field);
    case FieldDescriptor::CPPTYPE_BOOL: return reflection.GetBool(message, &field);
    case FieldDescriptor::CPPTYPE_STRING: return reflection.GetString(message, &field);
    default: break;
  }
  ADD_FAILURE() << field.full_name() << " is no scalar: its entry must be ByHand";
  return nullptr;
}

template <typename Record>
std::string RecordName() {
  return "RecordTable<" + RecordTable<Record>::Message::descriptor()->name() + ">";
}

template <typename Record>
void ExpectEveryMessageFieldHasAnEntry() {
  std::set<std::string> names;
  std::apply([&](const auto&... field) { (names.insert(field.name), ...); },
             RecordTable<Record>::kFields);
  const google::protobuf::Descriptor& message = *RecordTable<Record>::Message::descriptor();
  for (int i = 0; i < message.field_count(); ++i) {
    EXPECT_TRUE(names.contains(message.field(i)->name()))
        << message.full_name() << "." << message.field(i)->name() << " is in no entry of "
        << RecordName<Record>() << " (client/src/record_fields.h): add a Plain or ByHand line";
  }
}

// Entries name distinct members (public_fields.h counts them against the
// record's fields; a member named twice would hide one named never).
template <typename Record>
void ExpectEveryEntryHasAMemberOfItsOwn() {
  const Record record{};
  std::set<std::ptrdiff_t> offsets;
  std::apply(
      [&](const auto&... field) {
        (offsets.insert(reinterpret_cast<const char*>(&(record.*field.member)) -
                        reinterpret_cast<const char*>(&record)),
         ...);
      },
      RecordTable<Record>::kFields);
  EXPECT_EQ(offsets.size(), std::tuple_size_v<decltype(RecordTable<Record>::kFields)>)
      << RecordName<Record>() << " names a member twice";
}

// From a message whose every field has a value of its own, through the
// client's reader (`from_proto`) and writer (`to_json`): each Plain entry
// names a field of the message, and its member and the JSON under its name
// hold that field's value.
template <typename Record, typename FromProtoFn, typename ToJsonFn>
void ExpectEveryPlainEntryRoundTrips(FromProtoFn from_proto, ToJsonFn to_json) {
  using Message = typename RecordTable<Record>::Message;
  Message message;
  int next = 0;
  test::FillMessageDistinct(message, next);
  const Record record = from_proto(message);
  const Json shown = to_json(record);
  auto check = [&](const auto& field) {
    if constexpr (std::decay_t<decltype(field)>::kPlain) {
      const FieldDescriptor* wire = Message::descriptor()->FindFieldByName(field.name);
      if (wire == nullptr) {
        ADD_FAILURE() << RecordName<Record>() << ": the Plain entry " << field.name
                      << " names no field of " << Message::descriptor()->full_name();
        return;
      }
      const Json sent = FieldJson(message, *wire);
      EXPECT_EQ(Json(record.*field.member), sent)
          << wire->full_name() << " does not arrive in its member";
      EXPECT_TRUE(shown.contains(field.name)) << field.name << " does not show";
      if (shown.contains(field.name)) {
        EXPECT_EQ(shown[field.name], sent) << field.name << " shows another value";
      }
    }
  };
  std::apply([&](const auto&... field) { (check(field), ...); }, RecordTable<Record>::kFields);
}

template <typename Record, typename FromProtoFn, typename ToJsonFn>
void ExpectTableIsWhole(FromProtoFn from_proto, ToJsonFn to_json) {
  ExpectEveryMessageFieldHasAnEntry<Record>();
  ExpectEveryEntryHasAMemberOfItsOwn<Record>();
  ExpectEveryPlainEntryRoundTrips<Record>(from_proto, to_json);
}

// StatsJson's entry of the one pool.
Json PoolJson(const PoolStats& pool) {
  DaemonStats stats;
  stats.pools.push_back(pool);
  return StatsJson(stats, "/run/memd")["pools"][0];
}

TEST(RecordFieldsTest, PoolStatsTableIsWhole) {
  ExpectTableIsWhole<PoolStats>(
      [](const v1::PoolStats& pool) { return FromProto(pool); },
      PoolJson);
}

TEST(RecordFieldsTest, SizeClassStatsTableIsWhole) {
  ExpectTableIsWhole<SizeClassStats>(
      [](const v1::SizeClassStats& size_class) { return FromProto(size_class); },
      [](const SizeClassStats& size_class) {
        PoolStats pool;
        pool.size_classes.push_back(size_class);
        return PoolJson(pool)["size_classes"][0];
      });
}

TEST(RecordFieldsTest, DeviceInfoTableIsWhole) {
  ExpectTableIsWhole<DeviceInfo>([](const v1::DeviceInfo& device) { return FromProto(device); },
                                 DeviceJson);
}

TEST(RecordFieldsTest, TransferStatsTableIsWhole) {
  ExpectTableIsWhole<TransferStats>(
      [](const v1::TransferStats& stats) { return FromProto(stats); }, TransferStatsJson);
}

TEST(RecordFieldsTest, DurabilityStatsTableIsWhole) {
  ExpectTableIsWhole<DurabilityStats>(
      [](const v1::DurabilityStats& durability) { return FromProto(durability); },
      DurabilityJson);
}

TEST(RecordFieldsTest, MemoryWaitsTableIsWhole) {
  ExpectTableIsWhole<MemoryWaits>(
      [](const v1::MemoryWaits& waits) {
        v1::StatsReply reply;
        *reply.add_memory_waits() = waits;
        return FromProto(reply).memory_waits.at(0);
      },
      [](const MemoryWaits& waits) {
        DaemonStats stats;
        stats.memory_waits.push_back(waits);
        return StatsJson(stats, "/run/memd")["memory_waits"][0];
      });
}

TEST(RecordFieldsTest, UidUsageTableIsWhole) {
  ExpectTableIsWhole<UidUsage>([](const v1::UidUsage& usage) { return FromProto(usage); },
                               UsageJson);
}

TEST(RecordFieldsTest, SessionInfoTableIsWhole) {
  ExpectTableIsWhole<SessionInfo>(
      [](const v1::SessionInfo& session) { return FromProto(session); }, SessionJson);
}

TEST(RecordFieldsTest, ReplicaInfoTableIsWhole) {
  ExpectTableIsWhole<ReplicaInfo>(
      [](const v1::Replica& replica) {
        v1::BufferInfo info;
        *info.add_replicas() = replica;
        return FromProto(info).replicas.at(0);
      },
      [](const ReplicaInfo& replica) {
        BufferInfo info;
        info.replicas.push_back(replica);
        return BufferJson(info)["replicas"][0];
      });
}

TEST(RecordFieldsTest, LeaseHolderTableIsWhole) {
  ExpectTableIsWhole<LeaseHolder>(
      [](const v1::LeaseHolder& holder) {
        v1::BufferInfo info;
        *info.mutable_holders()->add_listed() = holder;
        return FromProto(info).holders.listed.at(0);
      },
      [](const LeaseHolder& holder) {
        BufferInfo info;
        info.holders.listed.push_back(holder);
        return BufferJson(info)["holders"]["listed"][0];
      });
}

TEST(RecordFieldsTest, LeaseHoldersTableIsWhole) {
  ExpectTableIsWhole<LeaseHolders>(
      [](const v1::LeaseHolders& holders) {
        v1::BufferInfo info;
        *info.mutable_holders() = holders;
        return FromProto(info).holders;
      },
      [](const LeaseHolders& holders) {
        BufferInfo info;
        info.holders = holders;
        return BufferJson(info)["holders"];
      });
}

TEST(RecordFieldsTest, RecommendationTableIsWhole) {
  ExpectTableIsWhole<Recommendation>(
      [](const v1::Recommendation& recommendation) { return FromProto(recommendation); },
      RecommendationJson);
}

TEST(RecordFieldsTest, TransferInfoTableIsWhole) {
  ExpectTableIsWhole<TransferInfo>(
      [](const v1::TransferInfo& transfer) { return FromProto(transfer); }, TransferInfoJson);
}

TEST(RecordFieldsTest, TransferListTableIsWhole) {
  ExpectTableIsWhole<TransferList>(
      [](const v1::ListTransfersReply& reply) { return FromProto(reply); }, TransferListJson);
}

TEST(RecordFieldsTest, LeakTableIsWhole) {
  ExpectTableIsWhole<Leak>([](const v1::Leak& leak) { return FromProto(leak); }, LeakJson);
}

}  // namespace
}  // namespace memd::internal
