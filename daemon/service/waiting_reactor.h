#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/service/convert.h"
#include "daemon/service/waiting_call.h"
#include "grpcpp/alarm.h"
#include "grpcpp/support/server_callback.h"

namespace memd::service {

/// A waiting call in gRPC, whatever it waits for: the reactor that answers
/// it and the alarms that end its waits, for one state machine `Wait`
/// (WaitingOpen, TransferWait) whose `Wait::Call` it implements; the
/// subclass adds how the call ends. Deletes itself when gRPC is done with
/// the call. Holds its wait weakly: the machine's watch keeps it alive, and
/// the machine borrows this call until it ends it. SetAlarm and Answer run
/// under the machine's mutex (its Call contract); OnCancel and OnDone on
/// gRPC's threads.
template <typename Wait>
class WaitingReactor : public grpc::ServerUnaryReactor, public Wait::Call {
 public:
  void SetAlarm(AlarmedCall::Alarm which, absl::Duration wait,
                std::function<void()> ring) final {
    Alarm& alarm = alarms_[static_cast<int>(which)];
    alarm.set = true;
    alarm.alarm.Set(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(wait),
                    [ring = std::move(ring)](bool fired) {
                      if (fired) ring();
                    });
  }

  void OnCancel() final {
    if (auto wait = wait_.lock()) wait->On(Wait::Event::kCancelled);
  }
  void OnDone() final { delete this; }

 protected:
  // Starts `wait`: its first try or its watch; the call may have ended when
  // this returns.
  void Begin(std::shared_ptr<Wait> wait) {
    wait_ = wait;  // Before the start: a cancel may come at once.
    wait->Start();
  }

  // Takes the alarms back and answers gRPC; once, last.
  void Answer(const absl::Status& status) {
    for (Alarm& alarm : alarms_) {
      if (alarm.set) alarm.alarm.Cancel();
    }
    this->Finish(ToGrpcStatus(status));
  }

 private:
  struct Alarm {
    bool set = false;  // Set and cancelled only under the wait's mutex.
    grpc::Alarm alarm;
  };
  std::array<Alarm, AlarmedCall::kAlarms> alarms_;
  std::weak_ptr<Wait> wait_;
};

}  // namespace memd::service
