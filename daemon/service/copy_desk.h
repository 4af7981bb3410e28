#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/broker/broker.h"
#include "daemon/broker/copy_regions.h"
#include "daemon/transfer/engine.h"

namespace memd::service {

// A Copy call's order in the daemon's terms.
struct CopyOrder {
  broker::CopyRegion source;
  broker::CopyRegion destination;
  transfer::Priority priority = transfer::Priority::kNormal;
  std::uint64_t deadline_ms = 0;  // 0: none.
  std::uint64_t chunk_bytes = 0;  // 0: the engine's default.
};

/// The daemon's copies below gRPC: resolves a session's Copy with the
/// broker and submits it to the transfer engine, charged to the session's
/// uid; answers for the session's own transfers (progress, cancel, which
/// still write a buffer); and fences a session's end, so that once
/// EndSession has begun no copy of that session starts, and its transfers
/// are cancelled and drained before the broker lets its leases go.
///
/// Borrows the broker and the engine (null: every copy is UNAVAILABLE),
/// which outlive it. Thread-safe. Errors: UNAVAILABLE (no engine),
/// UNAUTHENTICATED (the session is ending), the broker's ResolveCopy errors,
/// and the engine's (NOT_FOUND for another session's transfer id,
/// RESOURCE_EXHAUSTED from admission, INVALID_ARGUMENT).
class CopyDesk {
 public:
  CopyDesk(broker::Broker& broker, transfer::Engine* engine)
      : broker_(broker), engine_(engine) {}

  // The engine, or UNAVAILABLE.
  absl::StatusOr<transfer::Engine*> engine() const;

  absl::StatusOr<transfer::TransferId> Submit(broker::SessionId session, uid_t uid,
                                              const CopyOrder& order);
  absl::StatusOr<transfer::TransferProgress> Progress(broker::SessionId session,
                                                      transfer::TransferId id) const;
  absl::StatusOr<transfer::TransferProgress> Cancel(broker::SessionId session,
                                                    transfer::TransferId id);

  // A Seal's refusal; when it says copies still write the buffer, with the
  // ids of the session's own (the broker counts writers but knows no
  // transfer ids; another session's ids are its own business).
  absl::Status WithWritingTransfers(broker::SessionId session,
                                    const absl::Status& refusal) const;

  // A session ended (its client hung up or died): cancels its transfers and
  // waits up to `drain` for their chunks on the GPUs, then ends it in the
  // broker (its leases go), so that no copy touches memory whose lease is
  // gone. A Submit of the session that races with this is refused or
  // cancelled, never left running. Blocks up to `drain`.
  void EndSession(broker::SessionId session, absl::Duration drain);

 private:
  broker::Broker& broker_;
  transfer::Engine* const engine_;

  // Sessions whose end has begun: a Submit holds the gate (shared) from its
  // check to the engine's Submit, and EndSession marks the session
  // (exclusive) before it cancels the session's transfers, so that no copy
  // slips in between. Marks go once the broker has forgotten the session.
  absl::Mutex gate_;
  absl::flat_hash_set<broker::SessionId> ending_ ABSL_GUARDED_BY(gate_);
};

}  // namespace memd::service
