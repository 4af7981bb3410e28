// A waiting WaitTransfer against a fake watcher whose watch the test ends,
// and a fake call whose alarm rings when the test says: every way a wait
// ends, and the races between them.

#include "daemon/service/transfer_wait.h"

#include <memory>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace memd::service {
namespace {

using State = TransferWait::State;
using Event = TransferWait::Event;

transfer::TransferProgress ProgressOf(transfer::TransferState state, std::uint64_t done) {
  transfer::TransferProgress progress;
  progress.id = 7;
  progress.state = state;
  progress.bytes_done = done;
  progress.bytes_total = 100;
  return progress;
}

// Records what the wait does to its call.
class FakeCall : public TransferWait::Call {
 public:
  void SetAlarm(Alarm alarm, absl::Duration wait, std::function<void()> ring) override {
    EXPECT_EQ(alarm, Alarm::kDeadline) << "a transfer wait has one alarm";
    ++alarms_set;
    alarm_wait = wait;
    this->ring = std::move(ring);
  }
  void End(const absl::Status& status,
           const transfer::TransferProgress* progress) override {
    ended.push_back(status);
    if (progress != nullptr) answered = *progress;
  }

  int alarms_set = 0;
  absl::Duration alarm_wait;
  std::function<void()> ring;
  std::vector<absl::Status> ended;
  std::optional<transfer::TransferProgress> answered;
};

// The engine's side of one transfer, steered by the test. Shared with the
// test, which keeps it after the wait has taken its unique_ptr.
struct Watched {
  absl::Status watch_status;  // What Watch answers.
  bool ended_already = false;  // Watch runs `done` at once.
  transfer::TransferProgress now = ProgressOf(transfer::TransferState::kRunning, 40);
  absl::Status progress_status;
  std::optional<transfer::Engine::Done> done;  // The watch, while set.
  int cancel_calls = 0;
  // Runs at the start of CancelWatch: a watch ending while it is taken back.
  std::function<void()> during_cancel;
};

class FakeWatcher : public TransferWatcher {
 public:
  explicit FakeWatcher(Watched& watched) : watched_(watched) {}
  absl::StatusOr<std::uint64_t> Watch(transfer::Engine::Done done) override {
    if (!watched_.watch_status.ok()) return watched_.watch_status;
    if (watched_.ended_already) {
      done(ProgressOf(transfer::TransferState::kDone, 100));
      return 1;
    }
    watched_.done = std::move(done);
    return 1;
  }
  bool CancelWatch(std::uint64_t token) override {
    ++watched_.cancel_calls;
    if (watched_.during_cancel) std::exchange(watched_.during_cancel, nullptr)();
    if (!watched_.done.has_value()) return false;  // Ran, or running.
    watched_.done.reset();
    return true;
  }
  absl::StatusOr<transfer::TransferProgress> Progress() override {
    if (!watched_.progress_status.ok()) return watched_.progress_status;
    return watched_.now;
  }

 private:
  Watched& watched_;
};

class TransferWaitTest : public ::testing::Test {
 protected:
  std::shared_ptr<TransferWait> Start() {
    auto wait = std::make_shared<TransferWait>(std::make_unique<FakeWatcher>(watched_),
                                               absl::Seconds(5), call_);
    wait->Start();
    return wait;
  }
  // The engine ends the transfer: the watch runs (and is gone).
  void EndTransfer(transfer::TransferState state) {
    ASSERT_TRUE(watched_.done.has_value());
    transfer::Engine::Done done = std::move(*watched_.done);
    watched_.done.reset();
    done(ProgressOf(state, state == transfer::TransferState::kDone ? 100 : 60));
  }

  Watched watched_;
  FakeCall call_;
};

TEST_F(TransferWaitTest, AnEndedTransferIsAnsweredAtOnceWithoutAnAlarm) {
  watched_.ended_already = true;
  auto wait = Start();
  EXPECT_EQ(wait->state(), State::kDone);
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(call_.ended[0].ok());
  EXPECT_EQ(call_.answered->state, transfer::TransferState::kDone);
  EXPECT_EQ(call_.alarms_set, 0);
}

TEST_F(TransferWaitTest, TheTransfersEndAnswersWithItsFinalProgress) {
  auto wait = Start();
  EXPECT_EQ(wait->state(), State::kWatching);
  EXPECT_EQ(call_.alarms_set, 1);
  EXPECT_EQ(call_.alarm_wait, absl::Seconds(5));
  EndTransfer(transfer::TransferState::kFailed);
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(call_.ended[0].ok()) << "the transfer's failure is in the answer";
  EXPECT_EQ(call_.answered->state, transfer::TransferState::kFailed);
  // The alarm after the end changes nothing.
  call_.ring();
  EXPECT_EQ(call_.ended.size(), 1u);
  EXPECT_EQ(watched_.cancel_calls, 0);
}

TEST_F(TransferWaitTest, TheAlarmAnswersWithTheProgressNowAndTakesTheWatchBack) {
  auto wait = Start();
  call_.ring();
  EXPECT_EQ(wait->state(), State::kDone);
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(call_.ended[0].ok());
  EXPECT_EQ(call_.answered->state, transfer::TransferState::kRunning);
  EXPECT_EQ(call_.answered->bytes_done, 40u);
  EXPECT_FALSE(watched_.done.has_value()) << "the watch was taken back";
}

TEST_F(TransferWaitTest, AnAlarmThatLosesTheWatchLeavesTheAnswerToTheEnd) {
  auto wait = Start();
  // The transfer ends while the alarm takes the watch back: the end answers
  // once, the alarm not at all.
  watched_.during_cancel = [&] { EndTransfer(transfer::TransferState::kDone); };
  call_.ring();
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_EQ(call_.answered->state, transfer::TransferState::kDone);
}

TEST_F(TransferWaitTest, ACancelledCallEndsCancelledAndTakesTheWatchBack) {
  auto wait = Start();
  wait->On(Event::kCancelled);
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(absl::IsCancelled(call_.ended[0]));
  EXPECT_FALSE(watched_.done.has_value());
  call_.ring();  // Late: ignored.
  EXPECT_EQ(call_.ended.size(), 1u);
}

TEST_F(TransferWaitTest, ACancelBeforeTheWatchIsSetIsKeptForIt) {
  auto wait = std::make_shared<TransferWait>(std::make_unique<FakeWatcher>(watched_),
                                             absl::Seconds(5), call_);
  wait->On(Event::kCancelled);  // gRPC may cancel before Start.
  EXPECT_EQ(wait->state(), State::kStarting);
  wait->Start();
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(absl::IsCancelled(call_.ended[0]));
  EXPECT_EQ(call_.alarms_set, 0);
  EXPECT_FALSE(watched_.done.has_value()) << "no watch is left behind";
}

TEST_F(TransferWaitTest, AnUnknownTransferEndsTheCallNotFound) {
  watched_.watch_status = absl::NotFoundError("session 3 has no transfer 7");
  auto wait = Start();
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(absl::IsNotFound(call_.ended[0]));
  EXPECT_FALSE(call_.answered.has_value());
  EXPECT_EQ(call_.alarms_set, 0);
}

TEST_F(TransferWaitTest, ATransferForgottenBeforeTheAlarmEndsTheCallWithWhy) {
  auto wait = Start();
  watched_.progress_status = absl::NotFoundError("forgotten");
  call_.ring();
  ASSERT_EQ(call_.ended.size(), 1u);
  EXPECT_TRUE(absl::IsNotFound(call_.ended[0]));
}

TEST_F(TransferWaitTest, TheWatchKeepsTheWaitAliveAndTheAlarmDoesNot) {
  std::weak_ptr<TransferWait> weak;
  {
    auto wait = Start();
    weak = wait;
  }
  EXPECT_FALSE(weak.expired()) << "the engine's watch holds it";
  EndTransfer(transfer::TransferState::kDone);
  EXPECT_TRUE(weak.expired());
  call_.ring();  // The alarm's ring finds nothing.
  EXPECT_EQ(call_.ended.size(), 1u);
}

}  // namespace
}  // namespace memd::service
