#include "tools/memctl/format.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/v1/memd.pb.h"
#include "tests/client/public_fields.h"
#include "tests/support/struct_fields.h"

namespace memd::memctl {
namespace {

using ::testing::IsSupersetOf;

std::set<std::string> KeysOf(const Json& json) {
  std::set<std::string> keys;
  for (const auto& [key, value] : json.items()) keys.insert(key);
  return keys;
}

std::set<std::string> ProtocolNames(const google::protobuf::Descriptor& descriptor) {
  std::set<std::string> names;
  for (int i = 0; i < descriptor.field_count(); ++i) names.insert(descriptor.field(i)->name());
  return names;
}

// Every field of the struct shows in the JSON (changing it changes the
// JSON), under the name the protocol gives it: scripts read one vocabulary.
template <typename Struct, typename ToJson>
void ExpectEveryFieldShows(ToJson to_json, const google::protobuf::Descriptor& message) {
  Struct value;
  int next = 0;
  test::FillDistinct(value, next);
  const Json shown = to_json(value);
  EXPECT_THAT(KeysOf(shown), IsSupersetOf(ProtocolNames(message)));
  test::ForEachPerturbed(value, [&](std::size_t index, const Struct& changed, const void*) {
    EXPECT_NE(to_json(changed), shown)
        << message.name() << ": field #" << index << " of the struct does not show";
  });
}

TEST(FormatTest, StatsJsonShowsEveryDaemonStatistic) {
  ExpectEveryFieldShows<DaemonStats>(
      [](const DaemonStats& stats) { return StatsJson(stats, "/run/memd"); },
      *v1::StatsReply::descriptor());
}

TEST(FormatTest, StatsJsonShowsEveryPoolStatistic) {
  ExpectEveryFieldShows<PoolStats>(
      [](const PoolStats& pool) {
        DaemonStats stats;
        stats.pools.push_back(pool);
        return StatsJson(stats, "/run/memd")["pools"][0];
      },
      *v1::PoolStats::descriptor());
}

TEST(FormatTest, StatsJsonShowsEverySizeClassField) {
  ExpectEveryFieldShows<SizeClassStats>(
      [](const SizeClassStats& size_class) {
        DaemonStats stats;
        stats.pools.emplace_back().size_classes.push_back(size_class);
        return StatsJson(stats, "/run/memd")["pools"][0]["size_classes"][0];
      },
      *v1::SizeClassStats::descriptor());
}

TEST(FormatTest, StatsJsonShowsEveryDurabilityField) {
  ExpectEveryFieldShows<DurabilityStats>(
      [](const DurabilityStats& durability) {
        DaemonStats stats;
        stats.durability = durability;
        return StatsJson(stats, "/run/memd")["durability"];
      },
      *v1::DurabilityStats::descriptor());
}

TEST(FormatTest, StatsTextSaysWhatTheDaemonTookBack) {
  DurabilityStats durability;
  durability.recording = true;
  durability.generation = 3;
  durability.recovered = true;
  durability.recovered_at = absl::FromUnixSeconds(1700000000);
  durability.recovery = absl::Microseconds(2400) + absl::Nanoseconds(17);
  durability.adopted_segments = 4;
  durability.adopted_buffers = 4;
  durability.adopted_bytes = 7 << 20;
  durability.lost_buffers = 1;
  EXPECT_EQ(FormatDurability(durability),
            "durability recording\n"
            "generation 3, recovered " +
                FormatLocalTime(absl::FromUnixSeconds(1700000000)) +
                " in 2.4ms: 4 buffers (7 MiB) in 4 segments adopted, 1 lost\n");
}

TEST(FormatTest, StatsTextSaysWhenTheDaemonCouldNotReadItsState) {
  DurabilityStats durability;
  durability.recording = true;
  durability.generation = 1;
  durability.lost_segments = 3;
  EXPECT_EQ(FormatDurability(durability),
            "durability recording\n"
            "generation 1, started EMPTY: the previous state could not be read; 3 segments "
            "and their buffers lost (the daemon's log says why)\n");
}

TEST(FormatTest, StatsTextSaysWhyBuffersWillNotOutliveTheDaemon) {
  DurabilityStats durability;
  durability.generation = 1;
  durability.not_recording = "durability = \"off\" in the configuration";
  EXPECT_EQ(FormatDurability(durability),
            "durability OFF (durability = \"off\" in the configuration): buffers will not "
            "outlive this memd\n"
            "generation 1, started from nothing\n");
}

TEST(FormatTest, StatsTextSaysNothingOfDurabilityForADaemonTooOldToKnowIt) {
  EXPECT_EQ(FormatDurability(DurabilityStats{}), "");
}

TEST(FormatTest, DeviceJsonShowsEveryField) {
  ExpectEveryFieldShows<DeviceInfo>(DeviceJson, *v1::DeviceInfo::descriptor());
}

TEST(FormatTest, BufferJsonShowsEveryField) {
  ExpectEveryFieldShows<BufferInfo>(BufferJson, *v1::BufferInfo::descriptor());
}

TEST(FormatTest, SessionJsonShowsEveryField) {
  ExpectEveryFieldShows<SessionInfo>(SessionJson, *v1::SessionInfo::descriptor());
}

TEST(FormatTest, UsageJsonShowsEveryField) {
  ExpectEveryFieldShows<UidUsage>(UsageJson, *v1::UidUsage::descriptor());
}

}  // namespace
}  // namespace memd::memctl
