#include "daemon/broker/creating_names.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::broker {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(CreatingNamesTest, ANameHasOneCreateInFlightAtATime) {
  CreatingNames creating;
  EXPECT_TRUE(creating.Begin("model"));
  EXPECT_FALSE(creating.Begin("model"));
  EXPECT_TRUE(creating.Begin("other"));
  EXPECT_TRUE(creating.Contains("model"));
  EXPECT_EQ(creating.size(), 2u);
  creating.End("model");
  EXPECT_FALSE(creating.Contains("model"));
  EXPECT_TRUE(creating.Begin("model"));
}

TEST(CreatingNamesTest, EndHandsBackTheWaitersInTheOrderTheyCame) {
  CreatingNames creating;
  creating.Begin("model");
  const auto all_wait = [](WatchId) { return true; };
  creating.Wait("model", 3, all_wait);
  creating.Wait("model", 1, all_wait);
  creating.Wait("model", 2, all_wait);
  creating.Wait("model", 1, all_wait);  // Again: once, at its latest place.
  EXPECT_THAT(creating.End("model"), ElementsAre(3, 2, 1));
  EXPECT_THAT(creating.End("model"), IsEmpty());
}

TEST(CreatingNamesTest, WatchesThatNoLongerWaitAreDroppedAsOthersCome) {
  CreatingNames creating;
  creating.Begin("model");
  creating.Wait("model", 1, [](WatchId) { return true; });
  creating.Wait("model", 2, [](WatchId) { return true; });
  // 1 was cancelled meanwhile: the list keeps only what still waits.
  creating.Wait("model", 3, [](WatchId id) { return id != 1; });
  EXPECT_THAT(creating.End("model"), ElementsAre(2, 3));
}

TEST(CreatingNamesTest, AWaitOnANameNotInFlightIsIgnored) {
  CreatingNames creating;
  creating.Wait("model", 1, [](WatchId) { return true; });
  EXPECT_EQ(creating.size(), 0u);
  EXPECT_THAT(creating.End("model"), IsEmpty());
}

}  // namespace
}  // namespace memd::broker
