#pragma once

#include <functional>

#include "absl/time/time.h"

namespace memd::service {

/// What every waiting call's state machine (WaitingOpen, TransferWait) asks
/// of the call it answers, besides its end: alarms. gRPC's reactor
/// (WaitingReactor, memd_service.cc) in the daemon, a fake in tests. The
/// machines differ where their watches do: the broker's CancelWatch never
/// waits, the engine's waits for a watch that is running, so each keeps its
/// own transitions around one shape (a watch, alarms, a cancel, one end).
/// Called with the machine's mutex held: must not call back.
class AlarmedCall {
 public:
  enum class Alarm {
    kDeadline,  // The call's whole wait.
    kMemory,    // How much of it may go to waiting for memory.
  };
  static constexpr int kAlarms = 2;

  virtual ~AlarmedCall() = default;
  // Calls `ring` once `wait` has passed, unless the call ends first. Each
  // alarm is set at most once.
  virtual void SetAlarm(Alarm alarm, absl::Duration wait, std::function<void()> ring) = 0;
};

}  // namespace memd::service
