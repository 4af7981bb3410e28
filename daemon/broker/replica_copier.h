#pragma once

#include <sys/types.h>

#include <functional>

#include "absl/status/status.h"
#include "daemon/broker/copy_regions.h"
#include "daemon/broker/types.h"

namespace memd::broker {

/// What moves a replica's bytes: the broker decides that a copy of a buffer
/// must be made or refreshed (ReplicaSet), allocates it, and hands the two
/// ends to this; the daemon's is the transfer engine
/// (service::EngineReplicaCopier), so that every replica copy has the
/// engine's priorities, admission, cancellation and metrics. The broker
/// depends on this interface only: service -> broker stays one-way.
///
/// Implementations are thread-safe. Borrowed by the broker
/// (Broker::SetReplicaCopier).
class ReplicaCopier {
 public:
  virtual ~ReplicaCopier() = default;

  // Starts copying `ends.source` to `ends.destination` on behalf of
  // `session` of `uid` (whose transfer admission it counts against, and
  // with whose end it is cancelled). Calls `done` exactly once with the
  // copy's outcome, on another thread, never under the broker's mutex, when
  // it returns OK; when it returns an error (admission: RESOURCE_EXHAUSTED
  // with the numbers; FAILED_PRECONDITION for an unhealthy device) `done`
  // is never called.
  virtual absl::Status Start(SessionId session, uid_t uid, CopyEnds ends,
                             std::function<void(const absl::Status&)> done) = 0;
};

}  // namespace memd::broker
