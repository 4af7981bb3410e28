#include "daemon/service/convert.h"

#include <algorithm>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
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
struct Fields<broker::PressureCounts> {
  static auto Of(auto& s) {
    auto& [evictions, evicted_bytes, demotions, demoted_bytes] = s;
    return std::tie(evictions, evicted_bytes, demotions, demoted_bytes);
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
struct Fields<broker::ReplicaReport> {
  static auto Of(auto& s) {
    auto& [location, state, generation, readers, writers] = s;
    return std::tie(location, state, generation, readers, writers);
  }
};
template <>
struct Fields<broker::ReplicaInfo> {
  static auto Of(auto& s) {
    auto& [report, bytes, charged_uid] = s;
    return std::tie(report, bytes, charged_uid);
  }
};
template <>
struct Fields<broker::BufferInfo> {
  static auto Of(auto& s) {
    auto& [name, id, size, location, owner_uid, owner_gid, mode, state, persistence,
           lease_count, unlinked, created, sealed, creator_pid, attrs, retention, numa_node,
           replicas, sync_state, generation, fill_failure, usage, placement, holders] = s;
    return std::tie(name, id, size, location, owner_uid, owner_gid, mode, state,
                    persistence, lease_count, unlinked, created, sealed, creator_pid, attrs,
                    retention, numa_node, replicas, sync_state, generation, fill_failure,
                    usage, placement, holders);
  }
};
template <>
struct Fields<broker::LeaseHolder> {
  static auto Of(auto& s) {
    auto& [session, pid, uid, command, location, access, leases, since] = s;
    return std::tie(session, pid, uid, command, location, access, leases, since);
  }
};
template <>
struct Fields<broker::LeaseHolders> {
  static auto Of(auto& s) {
    auto& [listed, unlisted_leases, other_users_leases] = s;
    return std::tie(listed, unlisted_leases, other_users_leases);
  }
};
template <>
struct Fields<broker::BufferUsage> {
  static auto Of(auto& s) {
    auto& [opens_by_location, opens_by_uid, lazy_copies, bytes_copied, copies_avoided,
           last_used] = s;
    return std::tie(opens_by_location, opens_by_uid, lazy_copies, bytes_copied,
                    copies_avoided, last_used);
  }
};
template <>
struct Fields<broker::Recommendation> {
  static auto Of(auto& s) {
    auto& [subject, action, locations, evidence, bytes] = s;
    return std::tie(subject, action, locations, evidence, bytes);
  }
};
template <>
struct Fields<broker::Leak> {
  static auto Of(auto& s) {
    auto& [uid, kind, subject, bytes, age, pid, evidence] = s;
    return std::tie(uid, kind, subject, bytes, age, pid, evidence);
  }
};
template <>
struct Fields<broker::LeakReport> {
  static auto Of(auto& s) {
    auto& [leaks, omitted] = s;
    return std::tie(leaks, omitted);
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
    auto& [ordinal, uuid, name, total_bytes, free_bytes, has_free, vmm, posix_fd, handle_type,
           api, pci_address, ipc] = s;
    return std::tie(ordinal, uuid, name, total_bytes, free_bytes, has_free, vmm, posix_fd,
                    handle_type, api, pci_address, ipc);
  }
};
template <>
struct Fields<transfer::TransferProgress> {
  static auto Of(auto& s) {
    auto& [id, state, bytes_done, bytes_total, direction, path, device, priority, retries,
           status, submitted, started, finished] = s;
    return std::tie(id, state, bytes_done, bytes_total, direction, path, device, priority,
                    retries, status, submitted, started, finished);
  }
};
template <>
struct Fields<transfer::ListedTransfer> {
  static auto Of(auto& s) {
    auto& [progress, session, uid, source_name, source_location, source_offset,
           destination_name, destination_location, destination_offset, age] = s;
    return std::tie(progress, session, uid, source_name, source_location, source_offset,
                    destination_name, destination_location, destination_offset, age);
  }
};
template <>
struct Fields<durable::RecoveryReport> {
  static auto Of(auto& s) {
    auto& [generation, recovered, when, took, segments, buffers, bytes, lost_buffers,
           lost_segments, summary] = s;
    return std::tie(generation, recovered, when, took, segments, buffers, bytes,
                    lost_buffers, lost_segments, summary);
  }
};
template <>
struct Fields<broker::GraceCounts> {
  static auto Of(auto& s) {
    auto& [on, awaiting_holders, reclaimable_leases] = s;
    return std::tie(on, awaiting_holders, reclaimable_leases);
  }
};
template <>
struct Fields<durable::DurabilityStatus> {
  static auto Of(auto& s) {
    auto& [recording, not_recording, recovery] = s;
    return std::tie(recording, not_recording, recovery);
  }
};
}  // namespace memd::test

namespace memd::service {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Every field of the message is set from a struct whose every field has a
// value of its own, and every field of the struct changes the message but
// those `kept` (in the daemon) says it keeps.
// `convert` is ToProto unless the message needs more than the struct;
// `elsewhere` names message fields another conversion fills.
template <typename Proto, typename Struct>
void ExpectEveryFieldCrosses(
    std::function<bool(const Struct&, const void* field)> kept = nullptr,
    std::function<void(const Struct&, Proto*)> convert = nullptr,
    std::vector<std::string> elsewhere = {}) {
  if constexpr (requires(const Struct& value, Proto* out) { ToProto(value, out); }) {
    if (convert == nullptr) {
      convert = [](const Struct& value, Proto* out) { ToProto(value, out); };
    }
  }
  Struct value;
  int next = 0;
  test::FillDistinct(value, next);
  Proto sent;
  convert(value, &sent);
  std::vector<std::string> unset = test::MessageFieldsLeftDefault(sent);
  std::erase_if(unset, [&](const std::string& name) {
    return std::find(elsewhere.begin(), elsewhere.end(), name) != elsewhere.end();
  });
  EXPECT_THAT(unset, IsEmpty())
      << Proto::descriptor()->name() << " fields ToProto leaves unset";
  test::ForEachPerturbed(value, [&](std::size_t index, const Struct& changed,
                                    const void* field) {
    Proto resent;
    convert(changed, &resent);
    const bool stays = kept != nullptr && kept(changed, field);
    EXPECT_EQ(MessageDifferencer::Equals(sent, resent), stays)
        << Proto::descriptor()->name() << ": field #" << index << " of the struct "
        << (stays ? "was meant to stay in the daemon" : "does not reach the message");
  });
}

TEST(ConvertTest, EverySizeClassFieldIsSent) {
  ExpectEveryFieldCrosses<v1::SizeClassStats, pool::SizeClassStats>();
}

// The pool's figures the broker counts, which Stats adds to each pool.
const std::vector<std::string> kPressureFields = {"evictions", "evicted_bytes", "demotions",
                                                  "demoted_bytes"};

TEST(ConvertTest, EveryPoolStatisticIsSent) {
  // limit_rejections: the metrics show it (memd_quota_rejections_total).
  ExpectEveryFieldCrosses<v1::PoolStats, pool::PoolStats>(
      [](const pool::PoolStats& stats, const void* field) {
        return field == &stats.limit_rejections;
      },
      nullptr, kPressureFields);
}

TEST(ConvertTest, EveryPressureCountIsSentWithItsPool) {
  std::vector<std::string> pool_fields;
  const google::protobuf::Descriptor* pool = v1::PoolStats::descriptor();
  for (int i = 0; i < pool->field_count(); ++i) {
    const std::string& name = pool->field(i)->name();
    if (std::find(kPressureFields.begin(), kPressureFields.end(), name) == kPressureFields.end()) {
      pool_fields.push_back(name);
    }
  }
  ExpectEveryFieldCrosses<v1::PoolStats, broker::PressureCounts>(nullptr, nullptr, pool_fields);
}

// The grace period's figures are the broker's (GraceCounts), the rest the
// recovery's.
const std::vector<std::string> kGraceFields = {"in_grace", "awaiting_holders",
                                               "reclaimable_leases"};

TEST(ConvertTest, EveryDurabilityFieldIsSent) {
  ExpectEveryFieldCrosses<v1::DurabilityStats, durable::DurabilityStatus>(nullptr, nullptr,
                                                                          kGraceFields);
}

TEST(ConvertTest, EveryGraceFigureIsSent) {
  ExpectEveryFieldCrosses<v1::DurabilityStats, broker::GraceCounts>(
      nullptr, nullptr,
      {"recording", "not_recording", "generation", "recovered", "recovered_unix_ns",
       "recovery_ns", "adopted_segments", "adopted_buffers", "adopted_bytes", "lost_buffers",
       "lost_segments"});
}

TEST(ConvertTest, EveryRecoveryFigureIsSent) {
  // summary: the log's; it may name buffers, which not every caller may
  // read.
  ExpectEveryFieldCrosses<v1::DurabilityStats, durable::RecoveryReport>(
      [](const durable::RecoveryReport& report, const void* field) {
        return field == &report.summary;
      },
      [](const durable::RecoveryReport& report, v1::DurabilityStats* out) {
        durable::DurabilityStatus status;
        status.recovery = report;
        ToProto(status, out);
      },
      {"recording", "not_recording", "in_grace", "awaiting_holders", "reclaimable_leases"});
}

TEST(ConvertTest, EveryBufferFieldIsSent) {
  // Placement comes from another part of the daemon (not yet wired here).
  ExpectEveryFieldCrosses<v1::BufferInfo, broker::BufferInfo>(nullptr, nullptr,
                                                              {"placement"});
}

TEST(ConvertTest, EveryLeaseHolderFieldIsSent) {
  ExpectEveryFieldCrosses<v1::LeaseHolders, broker::LeaseHolders>();
  ExpectEveryFieldCrosses<v1::LeaseHolder, broker::LeaseHolder>(
      nullptr, [](const broker::LeaseHolder& holder, v1::LeaseHolder* out) {
        broker::LeaseHolders holders;
        holders.listed.push_back(holder);
        v1::LeaseHolders sent;
        ToProto(holders, &sent);
        *out = sent.listed(0);
      });
}

// Holders are Stat's: a List or a Lease, which carry none, leave the
// message unset rather than send an empty one per buffer.
TEST(ConvertTest, ABufferWithoutHoldersSendsNoHoldersMessage) {
  v1::BufferInfo sent;
  ToProto(broker::BufferInfo{}, &sent);
  EXPECT_FALSE(sent.has_holders());
}

TEST(ConvertTest, EveryRecommendationFieldCrosses) {
  ExpectEveryFieldCrosses<v1::Recommendation, broker::Recommendation>();
}

TEST(ConvertTest, EveryLeakFieldCrosses) {
  ExpectEveryFieldCrosses<v1::Leak, broker::Leak>();
  ExpectEveryFieldCrosses<v1::LeaksReply, broker::LeakReport>();
}

// Unset asks for the defaults; a client that sets 0 asks for everything.
TEST(ConvertTest, LeakRulesDefaultUnlessAsked) {
  v1::LeaksRequest request;
  broker::LeakRules rules = FromProto(request);
  EXPECT_EQ(rules.older_than, absl::Hours(1));
  EXPECT_EQ(rules.many_leases, 1024u);
  request.set_older_than_seconds(0);
  request.set_many_leases(3);
  rules = FromProto(request);
  EXPECT_EQ(rules.older_than, absl::ZeroDuration());
  EXPECT_EQ(rules.many_leases, 3u);
  request.set_older_than_seconds(~std::uint64_t{0});
  EXPECT_GT(FromProto(request).older_than, absl::Hours(24 * 3650));
}

// Attributes arrive as a list: a key given twice is refused, and so is a
// list longer than the limit before anything is built from it.
TEST(ConvertTest, CreateAttributesMustBeUniqueAndFew) {
  v1::CreateRequest request;
  request.set_name("a");
  request.set_size_bytes(4096);
  for (const char* key : {"dtype", "shape"}) {
    v1::Attr* attr = request.add_attrs();
    attr->set_key(key);
    attr->set_value(std::string(key) + "-value");
  }
  auto params = FromProto(request);
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_EQ(params->attrs, (BufferAttrs{{"dtype", "dtype-value"}, {"shape", "shape-value"}}));

  v1::CreateRequest twice = request;
  twice.add_attrs()->set_key("dtype");
  auto refused = FromProto(twice);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("'dtype' is given twice"));

  // A key of a megabyte comes back in 64 bytes of message, escaped.
  v1::CreateRequest huge = request;
  for (int i = 0; i < 2; ++i) huge.add_attrs()->set_key(std::string(1 << 20, '\n'));
  auto bounded = FromProto(huge);
  EXPECT_TRUE(absl::IsInvalidArgument(bounded.status()));
  EXPECT_LT(bounded.status().message().size(), 400u) << bounded.status().message().substr(0, 200);

  v1::CreateRequest flood = request;
  for (int i = 0; i < 100000; ++i) flood.add_attrs()->set_key("k" + std::to_string(i));
  auto flooded = FromProto(flood);
  EXPECT_TRUE(absl::IsInvalidArgument(flooded.status()));
  EXPECT_THAT(flooded.status().message(), HasSubstr("100002 attributes given; the limit is 16"));
}

v1::CreateRequest AutoRequest() {
  v1::CreateRequest request;
  request.set_name("a");
  request.set_size_bytes(4096);
  request.set_location("auto");
  return request;
}

TEST(ConvertTest, AutoCarriesTheHintAndTheMappableLocations) {
  v1::CreateRequest request = AutoRequest();
  request.set_access_hint("read_mostly");
  for (const char* where : {"host", "pinned", "device:1"}) request.add_mappable_locations(where);
  auto params = FromProto(request);
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_TRUE(params->auto_location);
  EXPECT_EQ(params->hint, broker::AccessHint::kReadMostly);
  EXPECT_EQ(params->mappable,
            (std::vector<Location>{Location::Host(), Location::Pinned(), Location::Device(1)}));

  // No hint is none; no list stays empty (the broker reads host and pinned).
  auto plain = FromProto(AutoRequest());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->hint, broker::AccessHint::kNone);
  EXPECT_THAT(plain->mappable, IsEmpty());

  // A named location is not auto.
  v1::CreateRequest named = AutoRequest();
  named.set_location("pinned");
  auto pinned = FromProto(named);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_FALSE(pinned->auto_location);
  EXPECT_EQ(pinned->location, Location::Pinned());
}

TEST(ConvertTest, AnUnknownHintIsInvalidArgumentNamingIt) {
  v1::CreateRequest request = AutoRequest();
  request.set_access_hint("gpu_please");
  auto refused = FromProto(request);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("'gpu_please'"));
  EXPECT_THAT(refused.status().message(), HasSubstr("read_mostly"));
}

TEST(ConvertTest, AMalformedMappableLocationIsInvalidArgumentNamingIt) {
  for (const char* bad : {"device:x", "gpu0", ""}) {
    v1::CreateRequest request = AutoRequest();
    request.add_mappable_locations("host");
    request.add_mappable_locations(bad);
    auto refused = FromProto(request);
    EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << bad << ": " << refused.status();
    EXPECT_THAT(refused.status().message(),
                HasSubstr(absl::StrCat("mappable location '", bad, "'")));
  }
}

TEST(ConvertTest, MoreThan64MappableLocationsAreRefusedWithTheNumbers) {
  v1::CreateRequest request = AutoRequest();
  for (int i = 0; i < 64; ++i) request.add_mappable_locations(absl::StrCat("device:", i));
  EXPECT_TRUE(FromProto(request).ok());
  request.add_mappable_locations("host");
  auto refused = FromProto(request);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("65 mappable locations given; the limit is 64"));
}

TEST(ConvertTest, AHintOrMappableListWithoutAutoIsInvalidArgument) {
  v1::CreateRequest hinted = AutoRequest();
  hinted.set_location("host");
  hinted.set_access_hint("streaming");
  auto refused = FromProto(hinted);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("go with location auto, not with 'host'"));

  v1::CreateRequest listed = AutoRequest();
  listed.set_location("device:0");
  listed.add_mappable_locations("device:0");
  EXPECT_TRUE(absl::IsInvalidArgument(FromProto(listed).status()));

  // And through OpenOrCreate's create part.
  v1::OpenOrCreateRequest open_or_create;
  *open_or_create.mutable_create() = hinted;
  EXPECT_TRUE(absl::IsInvalidArgument(FromProto(open_or_create).status()));
}

TEST(ConvertTest, EverySessionFieldIsSent) {
  ExpectEveryFieldCrosses<v1::SessionInfo, broker::SessionInfo>();
}

TEST(ConvertTest, EveryUsageFieldIsSent) {
  ExpectEveryFieldCrosses<v1::UidUsage, broker::UidUsage>();
}

TEST(ConvertTest, EveryDeviceFieldIsSent) {
  // health_error: the engine's (DeviceHealthIsTheEngines); memd_bytes and
  // outside_memd_bytes: the accounting's (DeviceMemoryIsTheAccountings).
  ExpectEveryFieldCrosses<v1::DeviceInfo, backend::DeviceInfo>(
      nullptr, nullptr, {"health_error", "memd_bytes", "outside_memd_bytes"});
}

TEST(ConvertTest, DeviceMemoryIsTheAccountings) {
  pool::DeviceMemory memory;
  memory.memd_bytes = 7;
  memory.outside_memd_bytes = 9;
  v1::DeviceInfo sent;
  ToProto(memory, &sent);
  EXPECT_EQ(sent.memd_bytes(), 7u);
  EXPECT_EQ(sent.outside_memd_bytes(), 9u);
}

TEST(ConvertTest, DeviceHealthIsTheEngines) {
  transfer::DeviceStats device;
  v1::DeviceInfo sent;
  ToProto(device, &sent);
  EXPECT_EQ(sent.health_error(), "") << "healthy";
  device.health = absl::InternalError("cuMemcpyHtoDAsync_v2: CUDA_ERROR_ILLEGAL_ADDRESS (700)");
  ToProto(device, &sent);
  EXPECT_THAT(sent.health_error(), ::testing::HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
}

TEST(ConvertTest, EveryTransferProgressFieldIsSent) {
  // A finished transfer: its elapsed time runs from start to end, and so
  // depends on both (and not on the time of the reply).
  const absl::Time now = absl::FromUnixSeconds(1000000);
  ExpectEveryFieldCrosses<v1::TransferProgress, transfer::TransferProgress>(
      [](const transfer::TransferProgress& progress, const void* field) {
        // The priority is the caller's own; the submission time shows in
        // the metrics' queue waits.
        return field == &progress.priority || field == &progress.submitted;
      },
      [now](const transfer::TransferProgress& progress, v1::TransferProgress* out) {
        transfer::TransferProgress finished = progress;
        // FillDistinct makes it kRunning; a perturbed state is kQueued.
        if (finished.state == transfer::TransferState::kRunning) {
          finished.state = transfer::TransferState::kDone;
        }
        ToProto(finished, now, out);
      });
}

TEST(ConvertTest, EveryListedTransferFieldIsSent) {
  // pid and command are the session's: ListTransfers adds them.
  ExpectEveryFieldCrosses<v1::TransferInfo, transfer::ListedTransfer>(
      nullptr,
      [](const transfer::ListedTransfer& listed, v1::TransferInfo* out) {
        ToProto(listed, absl::FromUnixSeconds(1000000), out);
      },
      {"pid", "command"});
}

TEST(ConvertTest, ListedTransfersSendTheirPriority) {
  transfer::ListedTransfer listed;
  listed.progress.priority = transfer::Priority::kBackground;
  v1::TransferInfo sent;
  ToProto(listed, absl::Now(), &sent);
  EXPECT_EQ(sent.priority(), v1::PRIORITY_BACKGROUND);
  listed.progress.priority = transfer::Priority::kCritical;
  ToProto(listed, absl::Now(), &sent);
  EXPECT_EQ(sent.priority(), v1::PRIORITY_CRITICAL);
}

TEST(ConvertTest, ARunningTransferHasRunUntilNow) {
  transfer::TransferProgress progress;
  progress.state = transfer::TransferState::kRunning;
  progress.started = absl::FromUnixSeconds(100);
  v1::TransferProgress sent;
  ToProto(progress, absl::FromUnixSeconds(103), &sent);
  EXPECT_EQ(sent.elapsed_ns(), 3'000'000'000);
  progress.state = transfer::TransferState::kQueued;
  progress.started = absl::InfinitePast();
  sent.Clear();
  ToProto(progress, absl::FromUnixSeconds(103), &sent);
  EXPECT_EQ(sent.elapsed_ns(), 0) << "no time before the first chunk";
}

TEST(ConvertTest, ATransfersEndIsSentAsCodeAndMessage) {
  transfer::TransferProgress progress;
  progress.state = transfer::TransferState::kFailed;
  progress.status = absl::DeadlineExceededError("no chunk finished for 30s");
  v1::TransferProgress sent;
  ToProto(progress, absl::Now(), &sent);
  EXPECT_EQ(sent.state(), v1::TRANSFER_FAILED);
  EXPECT_EQ(sent.error_code(), static_cast<int>(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ(sent.error_message(), "no chunk finished for 30s");
}

TEST(ConvertTest, EngineStatsAreSummedOverDirectionsDevicesAndReasons) {
  transfer::EngineStats stats;
  stats.flows = {{transfer::Direction::kHostToHost, -1, 100, 2},
                 {transfer::Direction::kHostToDevice, 0, 1000, 3}};
  stats.failures = {{transfer::FailureReason::kDeadline, 1},
                    {transfer::FailureReason::kCancelled, 4}};
  stats.retries = 5;
  stats.active_transfers = 6;
  stats.active_bytes = 7;
  stats.admission_rejections = 8;
  v1::TransferStats sent;
  ToProto(stats, &sent);
  EXPECT_EQ(sent.bytes(), 1100u);
  EXPECT_EQ(sent.completed(), 5u);
  EXPECT_EQ(sent.failed(), 5u);
  EXPECT_EQ(sent.retries(), 5u);
  EXPECT_EQ(sent.active(), 6u);
  EXPECT_EQ(sent.active_bytes(), 7u);
  EXPECT_EQ(sent.rejected(), 8u);
  EXPECT_THAT(test::MessageFieldsLeftDefault(sent), IsEmpty())
      << "a TransferStats field nothing fills";
}

TEST(ConvertTest, PrioritiesComeFromTheRequestAndUnknownOnesAreRefused) {
  EXPECT_EQ(*FromProto(v1::PRIORITY_CRITICAL), transfer::Priority::kCritical);
  EXPECT_EQ(*FromProto(v1::PRIORITY_UNSPECIFIED), transfer::Priority::kNormal);
  EXPECT_EQ(*FromProto(v1::PRIORITY_BACKGROUND), transfer::Priority::kBackground);
  auto unknown = FromProto(static_cast<v1::TransferPriority>(42));
  EXPECT_TRUE(absl::IsInvalidArgument(unknown.status()));
  EXPECT_THAT(std::string(unknown.status().message()), ::testing::HasSubstr("42"));
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
