// Location auto through the broker: the candidates it builds (the pools the
// caller may map, each pool's free bytes from an injected source), the rule
// text in the buffer's info, and OpenOrCreate on an existing name.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/broker/broker.h"
#include "daemon/pool/carving_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"
#include "tests/support/fake_clock.h"

namespace memd::broker {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr std::uint64_t kKiB = 1 << 10;
constexpr std::uint64_t kMiB = 1 << 20;
constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// Free and total bytes a test sets per location; unset ones are unknown.
class FakeCapacity : public CapacitySource {
 public:
  std::vector<std::optional<Capacity>> Of(
      const std::vector<Location>& locations) const override {
    std::vector<std::optional<Capacity>> out;
    for (const Location& location : locations) {
      asked.push_back(location.ToString());
      auto it = by_location.find(location.ToString());
      out.push_back(it == by_location.end() ? std::nullopt
                                            : std::optional<Capacity>(it->second));
    }
    return out;
  }
  std::map<std::string, Capacity> by_location;
  mutable std::vector<std::string> asked;
};

class BrokerPlacementTest : public ::testing::Test {
 protected:
  BrokerPlacementTest() {
    // Host and pinned pools may reserve 256 MiB, device pools 64 GiB (more
    // than the fake devices have: their free bytes decide). Memory is
    // reserved only for what a test creates.
    for (Location location : {Location::Host(), Location::Pinned(), Location::Device(0),
                              Location::Device(1)}) {
      pool::CarvingPoolOptions options;
      options.limit_bytes = location.kind == Location::Kind::kDevice ? 64 * kGiB : 256 * kMiB;
      options.idle_budget = -1;  // Idle memory stays in the pool, to be counted.
      pools_.Add(std::make_unique<pool::CarvingPool>(backend_, location, options, clock_));
    }
    broker_ = std::make_unique<Broker>(pools_, BrokerLimits{}, clock_);
    broker_->SetCapacitySource(&capacity_);
    SetFree({{"host", 64 * kGiB}, {"pinned", 64 * kGiB}, {"device:0", 8 * kGiB},
             {"device:1", 12 * kGiB}});
    session_ = *broker_->StartSession(PeerCredentials{4000, 1000, 1000, {}}, "test");
  }

  // Free bytes per location; totals are 16 GiB for devices, 128 GiB else.
  void SetFree(const std::map<std::string, std::uint64_t>& free) {
    for (const auto& [location, bytes] : free) {
      capacity_.by_location[location] =
          Capacity{bytes, location.starts_with("device") ? 16 * kGiB : 128 * kGiB};
    }
  }

  static CreateParams Auto(std::string name, std::uint64_t size,
                           AccessHint hint = AccessHint::kNone,
                           std::vector<Location> mappable = Everywhere()) {
    CreateParams params;
    params.name = std::move(name);
    params.size = size;
    params.auto_location = true;
    params.hint = hint;
    params.mappable = std::move(mappable);
    return params;
  }
  static CreateParams Named(std::string name, std::uint64_t size, Location location) {
    CreateParams params;
    params.name = std::move(name);
    params.size = size;
    params.location = location;
    return params;
  }
  static std::vector<Location> Everywhere() {
    return {Location::Host(), Location::Pinned(), Location::Device(0), Location::Device(1)};
  }

  // Creates `params`; the buffer's info as Stat tells it afterwards.
  BufferInfo CreateAndStat(const CreateParams& params) {
    auto grant = broker_->Create(session_, params);
    EXPECT_TRUE(grant.ok()) << grant.status();
    if (!grant.ok()) return {};
    auto info = broker_->Stat(session_, params.name);
    EXPECT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->placement, grant->buffer.placement);
    return *info;
  }

  test::FakeClock clock_;
  test::FakeBackend backend_;
  pool::PoolSet pools_;
  FakeCapacity capacity_;
  std::unique_ptr<Broker> broker_;
  SessionId session_ = 0;
};

TEST_F(BrokerPlacementTest, ASmallBufferGoesToPinnedAndSaysWhy) {
  const BufferInfo info = CreateAndStat(Auto("small", 4 * kKiB));
  EXPECT_EQ(info.location, Location::Pinned());
  EXPECT_EQ(info.placement, "4 KiB is under 64 KiB: pinned");
}

TEST_F(BrokerPlacementTest, AMediumBufferGoesToTheDeviceWithTheMostFree) {
  const BufferInfo info = CreateAndStat(Auto("medium", 8 * kMiB));
  EXPECT_EQ(info.location, Location::Device(1));
  EXPECT_THAT(info.placement, HasSubstr("8 MiB is in 64 KiB-16 MiB: device; device:1 has the "
                                        "most free"));

  SetFree({{"device:0", 14 * kGiB}});
  EXPECT_EQ(CreateAndStat(Auto("medium2", 8 * kMiB)).location, Location::Device(0));
}

TEST_F(BrokerPlacementTest, ANamedLocationHasNoPlacementText) {
  const BufferInfo info = CreateAndStat(Named("named", 8 * kMiB, Location::Device(0)));
  EXPECT_EQ(info.location, Location::Device(0));
  EXPECT_THAT(info.placement, IsEmpty());
  EXPECT_THAT(capacity_.asked, IsEmpty()) << "a named location asks for no free memory";
}

TEST_F(BrokerPlacementTest, ALargeBufferOnTightDevicesGoesToTheHost) {
  // Large from 64 KiB up; 1 MiB on a device of 8 MiB with 2 MiB free leaves
  // 12% of it, under the headroom of 25%.
  broker_->SetPlacementRules(*PlacementRules::Parse("small=4KiB,medium=64KiB"));
  capacity_.by_location["device:0"] = Capacity{2 * kMiB, 8 * kMiB};
  capacity_.by_location["device:1"] = Capacity{2 * kMiB, 8 * kMiB};
  const BufferInfo info = CreateAndStat(Auto("large", kMiB));
  EXPECT_EQ(info.location, Location::Host());
  EXPECT_THAT(info.placement, HasSubstr("no device keeps 25% free after it"));
  EXPECT_THAT(info.placement, HasSubstr("so host"));

  // Roomy again: the device.
  capacity_.by_location["device:1"] = Capacity{7 * kMiB, 8 * kMiB};
  EXPECT_EQ(CreateAndStat(Auto("large2", kMiB)).location, Location::Device(1));
}

TEST_F(BrokerPlacementTest, AHintReplacesTheTable) {
  const BufferInfo streaming = CreateAndStat(Auto("streaming", 8 * kMiB, AccessHint::kStreaming));
  EXPECT_EQ(streaming.location, Location::Pinned());
  EXPECT_EQ(streaming.placement, "8 MiB with hint streaming: pinned");

  EXPECT_EQ(CreateAndStat(Auto("host", 4 * kKiB, AccessHint::kHostFrequent)).location,
            Location::Host());
  EXPECT_EQ(CreateAndStat(Auto("gpu", 4 * kKiB, AccessHint::kDeviceFrequent)).location,
            Location::Device(1));
}

TEST_F(BrokerPlacementTest, ADeviceTheCallerDidNotListIsNeverChosen) {
  // device:1 has by far the most free, but the caller's process sees only
  // device:0.
  SetFree({{"device:0", 100 * kMiB}, {"device:1", 15 * kGiB}});
  const std::vector<Location> mappable = {Location::Host(), Location::Device(0)};
  EXPECT_EQ(CreateAndStat(Auto("a", 8 * kMiB, AccessHint::kNone, mappable)).location,
            Location::Device(0));
  EXPECT_THAT(capacity_.asked, ::testing::UnorderedElementsAre("host", "device:0"))
      << "only the listed locations' memory is asked for";

  // device:0 full: the host, not device:1 (nor pinned, also unlisted).
  SetFree({{"device:0", 0}});
  const BufferInfo info = CreateAndStat(Auto("b", 8 * kMiB, AccessHint::kDeviceFrequent, mappable));
  EXPECT_EQ(info.location, Location::Host());
  EXPECT_THAT(info.placement, HasSubstr("pinned cannot be mapped by this process"));
}

TEST_F(BrokerPlacementTest, AnEmptyMappableListMeansHostAndPinnedOnly) {
  const BufferInfo info = CreateAndStat(Auto("a", 8 * kMiB, AccessHint::kDeviceFrequent, {}));
  EXPECT_EQ(info.location, Location::Pinned());
  EXPECT_THAT(info.placement, HasSubstr("no device this process can map"));
}

TEST_F(BrokerPlacementTest, AListedLocationWithoutAPoolIsNoCandidate) {
  const std::vector<Location> mappable = {Location::Device(7)};
  auto refused = broker_->Create(session_, Auto("a", kMiB, AccessHint::kNone, mappable));
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("no candidate location this process can map"));
  EXPECT_THAT(refused.status().message(), HasSubstr("'a' (location auto)"));
}

TEST_F(BrokerPlacementTest, FullEverywhereIsResourceExhaustedWithEachLocationsFreeBytes) {
  SetFree({{"host", kMiB}, {"pinned", 0}, {"device:0", 2 * kMiB}, {"device:1", 0}});
  auto refused = broker_->Create(session_, Auto("big", 4 * kMiB));
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("no location can hold 4 MiB"));
  EXPECT_THAT(refused.status().message(), HasSubstr("host has 1 MiB free"));
  EXPECT_THAT(refused.status().message(), HasSubstr("device:0 has 2 MiB free"));
  EXPECT_FALSE(broker_->Stat(session_, "big").ok()) << "nothing is created";
}

TEST_F(BrokerPlacementTest, ThePoolLimitAndItsIdleBytesCount) {
  // The source says 1 TiB free; the pool may reserve only 256 MiB.
  SetFree({{"host", 1024 * kGiB}, {"pinned", 0}, {"device:0", 0}, {"device:1", 0}});
  auto refused = broker_->Create(session_, Auto("huge", 300 * kMiB, AccessHint::kHostFrequent));
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("host has 256 MiB free"));

  // Memory device:0's pool keeps idle is free to it although its driver
  // reports none.
  auto grant = broker_->Create(session_, Named("was", 8 * kMiB, Location::Device(0)));
  ASSERT_TRUE(grant.ok()) << grant.status();
  ASSERT_TRUE(broker_->Unlink(session_, "was").ok());
  ASSERT_TRUE(broker_->Release(session_, grant->lease).ok());
  EXPECT_EQ(CreateAndStat(Auto("reuse", 8 * kMiB)).location, Location::Device(0));
}

TEST_F(BrokerPlacementTest, WithoutASourceThePoolLimitsAreTheOnlyBound) {
  broker_->SetCapacitySource(nullptr);
  EXPECT_EQ(CreateAndStat(Auto("medium", 8 * kMiB)).location, Location::Device(0))
      << "equal free bytes: the lowest ordinal";
}

TEST_F(BrokerPlacementTest, OpenOrCreateAutoOpensAnExistingNameWhereverItLives) {
  auto created = broker_->Create(session_, Named("shared", 8 * kMiB, Location::Device(0)));
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(broker_->Seal(session_, created->lease).ok());

  // Another location would be chosen now, and this caller lists no device:
  // the buffer is opened where it is, not refused as "another location".
  SetFree({{"device:0", 0}});
  auto opened = broker_->OpenOrCreate(session_, Auto("shared", 8 * kMiB, AccessHint::kNone, {}),
                                      broker_->NewWatchId(), [] {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  ASSERT_TRUE(opened->has_value());
  EXPECT_FALSE((*opened)->created);
  EXPECT_EQ((*opened)->buffer.location, Location::Device(0));

  // Another size is still refused, saying "auto".
  auto other = broker_->OpenOrCreate(session_, Auto("shared", 4 * kMiB), broker_->NewWatchId(),
                                     [] {});
  EXPECT_TRUE(absl::IsFailedPrecondition(other.status())) << other.status();
  EXPECT_THAT(other.status().message(), HasSubstr("asked for size 4194304 at auto"));

  // Nothing free anywhere: an existing buffer at a location the caller
  // lists opens all the same; a new name is refused.
  SetFree({{"host", 0}, {"pinned", 0}, {"device:0", 0}, {"device:1", 0}});
  auto full = broker_->OpenOrCreate(session_, Auto("shared", 8 * kMiB), broker_->NewWatchId(),
                                    [] {});
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_FALSE((*full)->created);
  auto fresh = broker_->OpenOrCreate(session_, Auto("fresh", 8 * kMiB), broker_->NewWatchId(),
                                     [] {});
  EXPECT_TRUE(absl::IsResourceExhausted(fresh.status())) << fresh.status();
}

TEST_F(BrokerPlacementTest, OpenOrCreateAutoOfANewNameCreatesWithItsRule) {
  auto created = broker_->OpenOrCreate(session_, Auto("new", 4 * kKiB), broker_->NewWatchId(),
                                       [] {});
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(created->has_value());
  EXPECT_TRUE((*created)->created);
  EXPECT_EQ((*created)->buffer.location, Location::Pinned());
  EXPECT_EQ((*created)->buffer.placement, "4 KiB is under 64 KiB: pinned");
}

TEST_F(BrokerPlacementTest, SizesCreateRefusesAreRefusedAsForANamedLocation) {
  auto zero = broker_->Create(session_, Auto("zero", 0));
  EXPECT_TRUE(absl::IsInvalidArgument(zero.status())) << zero.status();
  EXPECT_THAT(zero.status().message(), HasSubstr("size is 0"));
  auto huge = broker_->Create(session_, Auto("huge", std::uint64_t{1} << 50));
  EXPECT_TRUE(absl::IsInvalidArgument(huge.status())) << huge.status();
  EXPECT_THAT(huge.status().message(), HasSubstr("exceeds the maximum"));
  EXPECT_THAT(capacity_.asked, IsEmpty());
}

}  // namespace
}  // namespace memd::broker
