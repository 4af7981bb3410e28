#include "daemon/service/copy_desk.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/service/replica_copier.h"

namespace memd::service {
namespace {

// 0: none. Beyond what a duration holds it is as good as none.
absl::Time DeadlineOf(std::uint64_t deadline_ms, absl::Time now) {
  if (deadline_ms == 0) return absl::InfiniteFuture();
  constexpr auto kMost = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  return now + absl::Milliseconds(static_cast<std::int64_t>(std::min(deadline_ms, kMost)));
}

}  // namespace

absl::StatusOr<transfer::Engine*> CopyDesk::engine() const {
  if (engine_ == nullptr) {
    return absl::UnavailableError("this daemon runs no transfer engine");
  }
  return engine_;
}

absl::StatusOr<transfer::TransferId> CopyDesk::Submit(broker::SessionId session, uid_t uid,
                                                      const CopyOrder& order) {
  MEMD_ASSIGN_OR_RETURN(transfer::Engine * engine, engine());
  // Held to the Submit: EndSession cancels what was submitted before it
  // marks the session, and nothing is submitted after.
  absl::ReaderMutexLock gate(&gate_);
  if (ending_.contains(session)) {
    return absl::UnauthenticatedError("the session has ended; reconnect");
  }
  MEMD_ASSIGN_OR_RETURN(broker::CopyEnds ends,
                        broker_.ResolveCopy(session, order.source, order.destination));
  transfer::TransferSpec spec;
  spec.session = session;
  spec.uid = uid;
  spec.source = EndpointOf(std::move(ends.source));
  spec.destination = EndpointOf(std::move(ends.destination));
  spec.priority = order.priority;
  spec.deadline = DeadlineOf(order.deadline_ms, absl::Now());
  spec.chunk_bytes = order.chunk_bytes;
  return engine->Submit(std::move(spec));
}

absl::StatusOr<transfer::TransferProgress> CopyDesk::Progress(broker::SessionId session,
                                                              transfer::TransferId id) const {
  MEMD_ASSIGN_OR_RETURN(transfer::Engine * engine, engine());
  return engine->Progress(session, id);
}

absl::StatusOr<transfer::TransferProgress> CopyDesk::Cancel(broker::SessionId session,
                                                            transfer::TransferId id) {
  MEMD_ASSIGN_OR_RETURN(transfer::Engine * engine, engine());
  return engine->Cancel(session, id);
}

absl::Status CopyDesk::WithWritingTransfers(broker::SessionId session,
                                            const absl::Status& refusal) const {
  const std::optional<broker::BufferId> buffer = broker::BufferCopiesStillWrite(refusal);
  if (!buffer.has_value() || engine_ == nullptr) return refusal;
  const std::vector<transfer::TransferId> writers = engine_->WritersOf(session, *buffer);
  if (writers.empty()) return refusal;
  return absl::Status(refusal.code(), absl::StrCat(refusal.message(), " (this session's: transfer",
                                                   writers.size() == 1 ? " " : "s ",
                                                   absl::StrJoin(writers, ", "), ")"));
}

void CopyDesk::EndSession(broker::SessionId session, absl::Duration drain) {
  {
    absl::MutexLock gate(&gate_);
    ending_.insert(session);
  }
  if (engine_ != nullptr) engine_->EndSession(session, drain);
  broker_.EndSession(session);
  // The broker refuses the session's calls now (UNAUTHENTICATED).
  absl::MutexLock gate(&gate_);
  ending_.erase(session);
}

}  // namespace memd::service
