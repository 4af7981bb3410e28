#pragma once

#include "daemon/broker/types.h"
#include "daemon/pool/pool.h"

namespace memd::broker {

/// Where the broker reports every change to a buffer's durable facts, so
/// that a later memd can take the buffer back after this one dies
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
};

}  // namespace memd::broker
