#include "daemon/session/session_ender.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace memd::session {
namespace {

using ::testing::UnorderedElementsAre;

TEST(SessionEnderTest, EndReturnsAtOnceAndTheEndRunsOnAWorker) {
  absl::Notification release;
  absl::Notification started;
  SessionEnder ender(
      [&](std::uint64_t) {
        started.Notify();
        release.WaitForNotification();
      },
      2);
  ender.End(1);  // Would block here if the end ran on this thread.
  started.WaitForNotification();
  release.Notify();
  ender.Stop();
}

TEST(SessionEnderTest, OneSlowEndHoldsUpNoOtherSession) {
  absl::Notification release;
  absl::Notification second_ended;
  SessionEnder ender(
      [&](std::uint64_t session) {
        if (session == 1) release.WaitForNotification();
        if (session == 2) second_ended.Notify();
      },
      2);
  ender.End(1);
  ender.End(2);
  second_ended.WaitForNotification();  // While session 1's end still waits.
  release.Notify();
}

TEST(SessionEnderTest, StopEndsEverySessionQueuedAndLaterEndsRunInline) {
  absl::Mutex mu;
  std::vector<std::uint64_t> ended;
  SessionEnder ender(
      [&](std::uint64_t session) {
        absl::MutexLock lock(&mu);
        ended.push_back(session);
      },
      1);
  for (std::uint64_t session = 1; session <= 5; ++session) ender.End(session);
  ender.Stop();
  {
    absl::MutexLock lock(&mu);
    EXPECT_THAT(ended, UnorderedElementsAre(1, 2, 3, 4, 5));
  }
  ender.End(6);  // After Stop: on this thread, at once.
  absl::MutexLock lock(&mu);
  EXPECT_EQ(ended.back(), 6u);
}

}  // namespace
}  // namespace memd::session
