#include "daemon/broker/advice.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::broker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;
const Location kHost = Location::Host();
const Location kDev0 = Location::Device(0);
const Location kDev1 = Location::Device(1);
const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);
const absl::Time kLongAgo = kNow - absl::Hours(24 * 3);

// A recommendation on one line, so that a failure shows every field.
std::string Line(const Recommendation& r) {
  std::string line = r.subject + " " + r.action + " [";
  for (const std::string& location : r.locations) {
    line += (line.back() == '[' ? "" : ",") + location;
  }
  return line + "] " + std::to_string(r.bytes) + ": " + r.evidence;
}

// Buffers with a usage history recorded by a real UsageTracker; buffer i has
// id i + 1.
class AdviceTest : public ::testing::Test {
 protected:
  // A sealed buffer homed at `home`, counted since `kLongAgo`.
  std::uint64_t Add(std::string name, std::uint64_t size, Location home = kHost) {
    BufferFacts facts;
    facts.name = std::move(name);
    facts.size = size;
    facts.home = home;
    facts.replicas.push_back({home, size, false});
    facts.sealed = true;
    facts.counted_since = kLongAgo;
    buffers_.push_back(std::move(facts));
    return buffers_.size();
  }
  BufferFacts& At(std::uint64_t id) { return buffers_[id - 1]; }
  void AddReplica(std::uint64_t id, Location at, bool leased = false) {
    At(id).replicas.push_back({at, At(id).size, leased});
  }
  // `n` opens at `at`, `ago` before now.
  void Open(std::uint64_t id, Location at, int n, absl::Duration ago = absl::Minutes(5),
            bool served_by_replica = false) {
    for (int i = 0; i < n; ++i) {
      tracker_.Opened(id, at, 1000, kNow - ago,
                      served_by_replica && !(at == At(id).home));
    }
  }

  std::vector<std::string> Advice(std::string_view prefix = "", const AdviceRules& rules = {}) {
    for (std::size_t i = 0; i < buffers_.size(); ++i) {
      buffers_[i].usage = tracker_.Of(i + 1);
      buffers_[i].activity = tracker_.Activity(i + 1, kNow);
    }
    std::vector<std::string> lines;
    for (const Recommendation& r : Advise(buffers_, prefix, kNow, rules)) {
      lines.push_back(Line(r));
    }
    return lines;
  }

  UsageTracker tracker_;
  std::vector<BufferFacts> buffers_;
};

// The first example: a model's shards, homed on the host, opened on
// two GPUs whose replicas keep being made and dropped.
TEST_F(AdviceTest, PrefetchesAGroupOpenedOnDevicesWithoutAReplica) {
  for (const char* shard : {"weights/llama/0", "weights/llama/1"}) {
    const std::uint64_t id = Add(shard, 24 * kGiB);
    Open(id, kDev0, 103);
    Open(id, kDev1, 103);
    tracker_.Copied(id, kHost, kDev0, 24 * kGiB, kNow - absl::Minutes(50));
    tracker_.Copied(id, kHost, kDev1, 24 * kGiB, kNow - absl::Minutes(20));
  }
  EXPECT_THAT(Advice(), ElementsAre("weights/llama/ prefetch [device:0,device:1] " +
                                    std::to_string(96 * kGiB) +
                                    ": 2 buffers, opened 412 times on device:0 and device:1, "
                                    "lives on host, 96 GiB copied in the last hour"));
}

TEST_F(AdviceTest, PrefetchStartsAtItsThresholdPerDevice) {
  const std::uint64_t id = Add("weights/a", 4 * kGiB);
  Open(id, kDev0, 15);
  Open(id, kDev1, 15);
  Open(id, kHost, 1);  // Not a move: opened in three places.
  EXPECT_THAT(Advice(), IsEmpty()) << "15 opens per device are below 16";
  Open(id, kDev1, 1);
  EXPECT_THAT(Advice(), ElementsAre("weights/ prefetch [device:1] " + std::to_string(4 * kGiB) +
                                    ": opened 16 times on device:1 in the last hour, lives on "
                                    "host"));
  EXPECT_THAT(Advice("", {.prefetch_opens = 17}), IsEmpty());
}

TEST_F(AdviceTest, NoPrefetchWhereAReplicaServesTheOpens) {
  const std::uint64_t id = Add("weights/a", 4 * kGiB);
  AddReplica(id, kDev0);
  Open(id, kDev0, 100, absl::Minutes(5), true);
  Open(id, kHost, 1);
  EXPECT_THAT(Advice(), IsEmpty());
}

TEST_F(AdviceTest, OpensOlderThanAnHourAreNotEvidence) {
  const std::uint64_t id = Add("weights/a", 4 * kGiB);
  Open(id, kDev0, 100, absl::Minutes(61));
  EXPECT_THAT(Advice(), IsEmpty());
}

TEST_F(AdviceTest, MovesABufferOpenedOnlyAwayFromItsHome) {
  const std::uint64_t id = Add("embeddings", 6 * kGiB);
  Open(id, kDev1, 20);
  tracker_.Copied(id, kHost, kDev1, 6 * kGiB, kNow - absl::Minutes(5));
  EXPECT_THAT(Advice(), ElementsAre("embeddings move [device:1] " + std::to_string(6 * kGiB) +
                                    ": opened 20 times in the last hour, all on device:1, lives "
                                    "on host, 6 GiB copied in the last hour"))
      << "a move replaces the prefetch the same opens would give";
  AddReplica(id, kDev1);
  EXPECT_THAT(Advice(), ElementsAre("embeddings move [device:1] 0: opened 20 times in the last "
                                    "hour, all on device:1, lives on host, 6 GiB copied in the "
                                    "last hour"))
      << "the replica there already: nothing to copy";
}

TEST_F(AdviceTest, NoMoveBelowItsThresholdOrWhenOpenedAtHome) {
  const std::uint64_t id = Add("embeddings", 6 * kGiB, kDev0);
  Open(id, kHost, 15);
  EXPECT_THAT(Advice(), IsEmpty());
  const std::uint64_t other = Add("tables", 6 * kGiB, kDev0);
  Open(other, kDev0, 40);
  EXPECT_THAT(Advice(), IsEmpty()) << "all opens at its home";
}

TEST_F(AdviceTest, DropsAReplicaNotOpenedThereForADay) {
  const std::uint64_t id = Add("cache/x", 8 * kGiB);
  AddReplica(id, kDev0);
  AddReplica(id, kDev1, /*leased=*/true);
  Open(id, kDev0, 3, absl::Hours(30));
  Open(id, kDev1, 3, absl::Hours(30));
  Open(id, kHost, 1, absl::Hours(2));
  EXPECT_THAT(Advice(), ElementsAre("cache/ drop_replica [device:0] " + std::to_string(8 * kGiB) +
                                    ": 1 replica on device:0, 8 GiB, not opened there for 1 day"))
      << "the leased replica on device:1 stays";
  EXPECT_THAT(Advice("", {.replica_idle = absl::Hours(31)}), IsEmpty());
}

TEST_F(AdviceTest, AReplicaNeverOpenedIsIdleSinceCountingBegan) {
  const std::uint64_t a = Add("cache/a", 1 * kGiB);
  const std::uint64_t b = Add("cache/b", 2 * kGiB);
  AddReplica(a, kDev0);  // A prefetch nobody used.
  AddReplica(b, kDev1);
  Open(a, kHost, 1, absl::Hours(1));
  Open(b, kHost, 1, absl::Hours(1));
  Open(b, kDev1, 1, absl::Hours(25));
  EXPECT_THAT(Advice(), ElementsAre("cache/ drop_replica [device:0,device:1] " +
                                    std::to_string(3 * kGiB) +
                                    ": 2 replicas on device:0 and device:1, 3 GiB, not opened "
                                    "there for 1 day"));
}

// The second example.
TEST_F(AdviceTest, UnlinksBuffersNotOpenedForTwoDays) {
  for (int i = 0; i < 12; ++i) {
    const std::uint64_t id = Add("scratch/" + std::to_string(i), 256 * kMiB);
    Open(id, kHost, 1, absl::Hours(49));
  }
  const std::uint64_t leased = Add("scratch/leased", 256 * kMiB);
  At(leased).replicas[0].leased = true;
  const std::uint64_t recent = Add("scratch/recent", 256 * kMiB);
  Open(recent, kHost, 1, absl::Hours(47));
  EXPECT_THAT(Advice(), ElementsAre("scratch/ unlink [host] " + std::to_string(3 * kGiB) +
                                    ": 12 buffers, 3 GiB, not opened for 2 days"));
}

TEST_F(AdviceTest, UnlinkCountsEveryCopyAndSaysWhatWasNeverOpenedOrSealed) {
  const std::uint64_t opened = Add("tmp/a", 1 * kGiB);
  AddReplica(opened, kDev0);
  Open(opened, kDev0, 1, absl::Hours(60));
  const std::uint64_t never = Add("tmp/b", 1 * kGiB);
  At(never).sealed = false;
  EXPECT_THAT(Advice(), ElementsAre("tmp/ unlink [host,device:0] " + std::to_string(3 * kGiB) +
                                    ": 2 buffers, 3 GiB, not opened for 2 days, 1 never opened, "
                                    "1 never sealed"))
      << "the replica on device:0 is freed too, and is not also a drop_replica";
  At(opened).counted_since = kNow - absl::Hours(1);
  At(never).counted_since = kNow - absl::Hours(1);
  EXPECT_THAT(Advice(), IsEmpty()) << "memd has watched them for an hour only";
}

TEST_F(AdviceTest, ABufferNeverOpenedSaysSinceWhen) {
  Add("old", 1 * kGiB);
  EXPECT_THAT(Advice(), ElementsAre("old unlink [host] " + std::to_string(kGiB) +
                                    ": 1 buffer, 1 GiB, never opened in 3 days"));
}

TEST_F(AdviceTest, AQuietNodeGetsNoAdvice) {
  const std::uint64_t a = Add("weights/a", 4 * kGiB);
  AddReplica(a, kDev0);
  Open(a, kHost, 3, absl::Minutes(10));
  Open(a, kDev0, 3, absl::Hours(2));
  const std::uint64_t b = Add("frames/0", 1 * kMiB);
  Open(b, kHost, 2, absl::Hours(20));
  EXPECT_THAT(Advice(), IsEmpty());
  buffers_.clear();
  EXPECT_THAT(Advice(), IsEmpty()) << "no buffers at all";
}

TEST_F(AdviceTest, APrefixKeepsOnlyTheBuffersItStarts) {
  const std::uint64_t a = Add("weights/a", 1 * kGiB);
  const std::uint64_t b = Add("weights/b", 1 * kGiB);
  Open(a, kDev0, 20);
  Open(a, kHost, 1);
  Open(b, kDev0, 30);
  Open(b, kHost, 1);
  Add("scratch/old", 1 * kGiB);
  EXPECT_THAT(Advice("weights/"),
              ElementsAre("weights/ prefetch [device:0] " + std::to_string(2 * kGiB) +
                          ": 2 buffers, opened 50 times on device:0 in the last hour, lives on "
                          "host"));
  EXPECT_THAT(Advice("weights/b"),
              ElementsAre("weights/ prefetch [device:0] " + std::to_string(kGiB) +
                          ": opened 30 times on device:0 in the last hour, lives on host"));
  EXPECT_THAT(Advice("nothing/"), IsEmpty());
  EXPECT_EQ(Advice().size(), 2u);
}

TEST_F(AdviceTest, OrdersBySubjectThenAction) {
  // "b/": a prefetch, a drop_replica and an unlink; "a": a move; "c/": an unlink.
  const std::uint64_t busy = Add("b/busy", 1 * kGiB);
  Open(busy, kDev0, 20);
  Open(busy, kHost, 1);
  const std::uint64_t cached = Add("b/cached", 1 * kGiB);
  AddReplica(cached, kDev1);
  Open(cached, kHost, 1, absl::Hours(3));
  Add("b/old", 1 * kGiB);
  Add("c/old", 1 * kGiB);
  const std::uint64_t single = Add("a", 1 * kGiB);
  Open(single, kDev1, 16);
  std::vector<std::string> subjects_and_actions;
  for (const std::string& line : Advice()) {
    subjects_and_actions.push_back(line.substr(0, line.find(" [")));
  }
  EXPECT_THAT(subjects_and_actions, ElementsAre("a move", "b/ prefetch", "b/ drop_replica",
                                                "b/ unlink", "c/ unlink"));
}

TEST(FormatAgeTest, TheLargestWholeUnit) {
  EXPECT_EQ(FormatAge(absl::Seconds(59)), "59 seconds");
  EXPECT_EQ(FormatAge(absl::Minutes(1)), "1 minute");
  EXPECT_EQ(FormatAge(absl::Minutes(119)), "1 hour");
  EXPECT_EQ(FormatAge(absl::Hours(47)), "1 day");
  EXPECT_EQ(FormatAge(absl::Hours(48)), "2 days");
  EXPECT_EQ(FormatAge(-absl::Seconds(5)), "0 seconds");
}

}  // namespace
}  // namespace memd::broker
