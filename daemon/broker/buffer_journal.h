#pragma once

#include <sys/types.h>

#include <string>

#include "daemon/broker/types.h"
#include "daemon/pool/pool.h"

namespace memd::broker {

/// Where the broker reports every change to a buffer's durable facts, and
/// the sessions and leases that hold buffers, so that a later memd can take
/// the buffer back after this one dies and the clients their leases
/// (docs/design.md, "Durability"). The broker calls it under its mutex, in
/// the order the changes happen, so a journal sees a buffer created before
/// it is sealed, unlinked or freed. Implementations must be thread-safe
/// enough for that, cheap (every Create pays for a call), and must not call
/// the broker.
class BufferJournal {
 public:
  virtual ~BufferJournal() = default;

  // A buffer was created, or its name, state or unlinked flag changed:
  // `info` as it is now, in `allocation`.
  virtual void BufferChanged(const BufferInfo& info, const pool::Allocation& allocation) = 0;

  // A buffer's memory is going back to its pool: nothing of it is kept.
  virtual void BufferFreed(BufferId id) = 0;

  // A session started; `token_digest` (SHA-256 of its token) is what its
  // client proves itself with when it re-claims its leases after a restart.
  // Empty: the session cannot re-claim. A journal that keeps no sessions
  // ignores these.
  virtual void SessionStarted(SessionId /*id*/, uid_t /*uid*/,
                              const std::string& /*token_digest*/) {}
  // A session ended: with it every lease it held (no LeaseEnded follows).
  virtual void SessionEnded(SessionId /*id*/) {}
  // `session` holds lease `id` on `buffer` now: granted, or re-claimed
  // under the same id by a new session.
  virtual void LeaseGranted(LeaseId /*id*/, SessionId /*session*/, BufferId /*buffer*/,
                            Access /*access*/) {}
  virtual void LeaseEnded(LeaseId /*id*/) {}
};

}  // namespace memd::broker
