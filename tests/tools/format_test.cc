#include "tools/memctl/format.h"

#include <set>
#include <sstream>
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

TEST(FormatTest, StatsJsonShowsEveryMemoryWaitsField) {
  ExpectEveryFieldShows<MemoryWaits>(
      [](const MemoryWaits& waits) {
        DaemonStats stats;
        stats.memory_waits.push_back(waits);
        return StatsJson(stats, "/run/memd")["memory_waits"][0];
      },
      *v1::MemoryWaits::descriptor());
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

// A recording daemon, generation 3, that took back 4 buffers and lost one.
DurabilityStats Recovered() {
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
  return durability;
}

TEST(FormatTest, StatsTextSaysWhatTheDaemonTookBack) {
  EXPECT_EQ(FormatDurability(Recovered()),
            "durability recording\n"
            "generation 3, recovered " +
                FormatLocalTime(absl::FromUnixSeconds(1700000000)) +
                " in 2.4ms: 4 buffers (7 MiB) in 4 segments adopted, 1 lost\n");
}

// During the grace period: how many buffers wait for their holders (an
// unlinked one among them gives its memory back only after it).
TEST(FormatTest, StatsTextSaysWhileTheGracePeriodKeepsBuffersForTheirHolders) {
  DurabilityStats durability = Recovered();
  durability.in_grace = true;
  durability.awaiting_holders = 1;
  durability.reclaimable_leases = 3;
  EXPECT_THAT(FormatDurability(durability),
              testing::EndsWith("adopted, 1 lost\n"
                                "grace period on: 1 buffer waits for its holders (kept until "
                                "it ends, even if unlinked), 3 leases may be re-claimed\n"));
  durability.awaiting_holders = 2;
  durability.reclaimable_leases = 1;
  EXPECT_THAT(FormatDurability(durability),
              testing::HasSubstr("2 buffers wait for their holders (kept until it ends, even "
                                 "if unlinked), 1 lease may be re-claimed\n"));
  durability.in_grace = false;
  EXPECT_THAT(FormatDurability(durability), testing::Not(testing::HasSubstr("grace")));
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

TEST(FormatTest, BufferUsageJsonShowsEveryField) {
  ExpectEveryFieldShows<BufferUsage>(internal::BufferUsageJson, *v1::BufferUsage::descriptor());
}

TEST(FormatTest, RecommendationJsonShowsEveryField) {
  ExpectEveryFieldShows<Recommendation>(internal::RecommendationJson,
                                        *v1::Recommendation::descriptor());
}

TEST(FormatTest, LeakJsonShowsEveryField) {
  ExpectEveryFieldShows<Leak>(LeakJson, *v1::Leak::descriptor());
  ExpectEveryFieldShows<LeakReport>(LeakReportJson, *v1::LeaksReply::descriptor());
}

TEST(FormatTest, LeaksReadAsATableWithWhatWasLeftOut) {
  LeakReport report;
  report.leaks.push_back({1000, "idle_lease", "lease 7 on w", 4096, absl::Minutes(90), 42,
                          "4 KiB held for 1 hour, pid 42"});
  report.leaks.push_back({1000, "many_leases", "session 3 (trainer)", 0, absl::ZeroDuration(),
                          0, "2000 leases held (the report's mark is 1024)"});
  report.omitted = 5;
  std::ostringstream out;
  PrintLeaks(out, report, {});
  EXPECT_EQ(out.str(),
            " UID  KIND         SUBJECT              BYTES    AGE  PID  EVIDENCE\n"
            "1000  idle_lease   lease 7 on w         4 KiB  1h30m   42  4 KiB held for 1 hour, pid 42\n"
            "1000  many_leases  session 3 (trainer)      -      -    -  2000 leases held (the "
            "report's mark is 1024)\n"
            "5 more not shown\n");
  std::ostringstream none;
  PrintLeaks(none, {}, {.older_than = absl::Hours(24), .many_leases = 8});
  EXPECT_EQ(none.str(), "no leaks: nothing older than 24h, no session holding 8 leases or more\n");
}

TEST(FormatTest, ARecommendationReadsAsTheIssueWrites) {
  Recommendation prefetch{"weights/llama/", "prefetch", {"device:0", "device:1"},
                          "opened 412 times on device:0 and device:1, lives on host, 96 GiB "
                          "copied in the last hour",
                          std::uint64_t{96} << 30};
  EXPECT_EQ(FormatRecommendation(prefetch),
            "weights/llama/: opened 412 times on device:0 and device:1, lives on host, 96 GiB "
            "copied in the last hour -> prefetch to device:0,device:1 (96 GiB to copy)");
  Recommendation unlink{"scratch/", "unlink", {"host"},
                        "12 buffers, 3 GiB, not opened for 2 days", std::uint64_t{3} << 30};
  EXPECT_EQ(FormatRecommendation(unlink),
            "scratch/: 12 buffers, 3 GiB, not opened for 2 days -> unlink on host (3 GiB to "
            "free)");
}

TEST(FormatTest, InspectShowsTheUsageCounters) {
  BufferUsage usage;
  EXPECT_THAT(UsageRows(usage),
              ::testing::ElementsAre(::testing::Pair("opens", "-"),
                                     ::testing::Pair("opens by user", "-"),
                                     ::testing::Pair("copies", "0"),
                                     ::testing::Pair("copies avoided", "0"),
                                     ::testing::Pair("last used", "never since memd started")));
  usage.opens_by_location = {{"device:0", 412}, {"host", 3}};
  usage.opens_by_uid = {{4242424, 400}, {static_cast<uid_t>(-1), 15}};
  usage.lazy_copies = 5;
  usage.bytes_copied = {{"host_to_device", std::uint64_t{96} << 30}, {"device_to_host", 512}};
  usage.copies_avoided = 407;
  usage.last_used = absl::UnixEpoch() + absl::Hours(1);
  const auto rows = UsageRows(usage);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].second, "device:0 412, host 3");
  EXPECT_EQ(rows[1].second, "4242424 400, other users 15") << "a uid with no name shows its number";
  EXPECT_EQ(rows[2].second, "5 (512 B device_to_host, 96 GiB host_to_device)");
  EXPECT_EQ(rows[3].second, "407");
  EXPECT_EQ(rows[4].second, FormatLocalTime(absl::UnixEpoch() + absl::Hours(1)));
}

TEST(FormatTest, SessionJsonShowsEveryField) {
  ExpectEveryFieldShows<SessionInfo>(SessionJson, *v1::SessionInfo::descriptor());
}

TEST(FormatTest, UsageJsonShowsEveryField) {
  ExpectEveryFieldShows<UidUsage>(UsageJson, *v1::UidUsage::descriptor());
}

}  // namespace
}  // namespace memd::memctl
