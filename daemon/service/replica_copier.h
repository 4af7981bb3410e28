#pragma once

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/broker/replica_copier.h"
#include "daemon/transfer/engine.h"

namespace memd::service {

// The engine's view of one end of a copy the broker resolved: for the Copy
// call and for replica fills alike.
transfer::Endpoint EndpointOf(broker::CopyEnd end);

/// Makes the broker's replica copies with the transfer engine: each fill is
/// a transfer of the session that asked for the copy (its admission, its
/// priority class, cancelled with it), at normal priority since an open
/// waits for it. The engine reports a transfer's end on its own threads,
/// which must not block; the broker's end of a fill wakes waiting opens,
/// which may allocate the next copy and submit it. So the ends are run in
/// order on one thread of this copier's own.
///
/// Owns that thread and the ends queued for it. Thread-safe. Borrows the
/// engine. Shutdown order: the engine goes first (its destructor ends every
/// transfer and reports each end here), then this copier (which runs the
/// ends still queued, into the broker), then the broker.
/// Start's errors: the engine's Submit and Watch (RESOURCE_EXHAUSTED,
/// FAILED_PRECONDITION, INVALID_ARGUMENT).
class EngineReplicaCopier final : public broker::ReplicaCopier {
 public:
  explicit EngineReplicaCopier(transfer::Engine& engine);
  ~EngineReplicaCopier() override;

  absl::Status Start(broker::SessionId session, uid_t uid, broker::CopyEnds ends,
                     std::function<void(const absl::Status&)> done) override;

 private:
  void Post(std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  transfer::Engine& engine_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts once the rest is ready.
};

}  // namespace memd::service
