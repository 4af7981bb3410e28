// A waiting open against a real broker, with the test deciding when the
// broker's wake reaches it.

#include "daemon/service/waiting_open.h"

#include <memory>

#include "absl/synchronization/notification.h"
#include "daemon/pool/carving_pool.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"

namespace memd::service {
namespace {

TEST(WaitingOpenTest, AWaitWokenAsItsAlarmFiresStillEndsAtItsDeadline) {
  // Finding 13 of issue 9: a seal woke the waiter just as its alarm fired;
  // the alarm, finding no watch to cancel, left the end to the wake; the
  // wake found the name gone and waited again, with no alarm left: the call
  // never ended.
  test::FakeBackend backend;
  RealClock clock;
  pool::PoolSet pools;
  pools.Add(std::make_unique<pool::CarvingPool>(backend, Location::Host(),
                                                pool::CarvingPoolOptions{}, clock));
  broker::Broker broker(pools, broker::BrokerLimits{}, clock);
  const PeerCredentials peer{4000, 1000, 1000, {}};
  const broker::SessionId producer = *broker.StartSession(peer, "producer");
  const broker::SessionId consumer = *broker.StartSession(peer, "consumer");

  absl::Mutex mu;
  std::function<void()> held_wake;  // The wake on its way, held back.
  absl::Notification finished;
  absl::Status ended;
  grpc::ServerUnaryReactor* reactor = WaitingOpen::Start(
      broker, "late", absl::Milliseconds(50),
      [&](const absl::Status& status) {
        ended = status;
        finished.Notify();
      },
      [&](broker::WatchId watch, std::function<void()> wake) {
        return broker.OpenOrWatch(consumer, {"late", broker::Access::kRead}, watch,
                                  [&, wake] {
                                    absl::MutexLock lock(&mu);
                                    held_wake = wake;
                                  });
      },
      [](broker::Grant) { return absl::OkStatus(); });

  // The seal takes the watch and sends the wake on its way.
  auto created = broker.Create(producer, broker::CreateParams{"late", 4096, Location::Host()});
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(broker.Seal(producer, created->lease).ok());
  // The alarm (50 ms) fires meanwhile and leaves the end to the wake: the
  // call does not end without it.
  EXPECT_FALSE(finished.WaitForNotificationWithTimeout(absl::Seconds(1)));
  // By the time the wake arrives the name is gone, so it would wait again.
  ASSERT_TRUE(broker.Release(producer, created->lease).ok());
  ASSERT_TRUE(broker.Unlink(producer, "late").ok());
  std::function<void()> wake;
  {
    absl::MutexLock lock(&mu);
    wake = std::move(held_wake);
  }
  ASSERT_TRUE(wake);
  wake();
  ASSERT_TRUE(finished.WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "the wait outlived its deadline";
  EXPECT_TRUE(absl::IsDeadlineExceeded(ended)) << ended;
  delete reactor;  // No call owns it here (gRPC would, in the daemon).
}

}  // namespace
}  // namespace memd::service
