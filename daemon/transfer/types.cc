#include "daemon/transfer/types.h"

#include <algorithm>

#include "daemon/transfer/engine_types.h"

namespace memd::transfer {

int DefaultCopyThreads(int usable_cpus) { return std::clamp(usable_cpus / 2, 2, 8); }

std::string_view PriorityName(Priority priority) {
  switch (priority) {
    case Priority::kCritical:
      return "critical";
    case Priority::kNormal:
      return "normal";
    case Priority::kBackground:
      return "background";
  }
  return "unknown";
}

std::string_view StateName(TransferState state) {
  switch (state) {
    case TransferState::kQueued:
      return "queued";
    case TransferState::kRunning:
      return "running";
    case TransferState::kDone:
      return "done";
    case TransferState::kFailed:
      return "failed";
    case TransferState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::string_view DataPathName(DataPath path) {
  switch (path) {
    case DataPath::kNone:
      return "none";
    case DataPath::kCpu:
      return "cpu";
    case DataPath::kStaged:
      return "staged";
    case DataPath::kDirect:
      return "direct";
    case DataPath::kDevice:
      return "device";
    case DataPath::kPeerStaged:
      return "peer_staged";
  }
  return "unknown";
}

std::string_view DirectionName(Direction direction) {
  switch (direction) {
    case Direction::kHostToHost:
      return "h2h";
    case Direction::kHostToDevice:
      return "h2d";
    case Direction::kDeviceToHost:
      return "d2h";
    case Direction::kDeviceToDevice:
      return "d2d";
  }
  return "unknown";
}

std::string_view FailureReasonName(FailureReason reason) {
  switch (reason) {
    case FailureReason::kCancelled:
      return "cancelled";
    case FailureReason::kDeadline:
      return "deadline";
    case FailureReason::kStall:
      return "stall";
    case FailureReason::kDriver:
      return "driver";
    case FailureReason::kDeviceUnhealthy:
      return "device_unhealthy";
    case FailureReason::kSessionEnded:
      return "session_ended";
    case FailureReason::kDestinationFreed:
      return "destination_freed";
    case FailureReason::kShutdown:
      return "shutdown";
  }
  return "unknown";
}

}  // namespace memd::transfer
