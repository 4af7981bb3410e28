#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "daemon/backend/backend.h"
#include "daemon/broker/broker.h"
#include "daemon/durable/fd_store.h"
#include "daemon/durable/state.h"
#include "daemon/pool/pool_set.h"

namespace memd::durable {

// What a start of memd found and took back, for logs, Stats and metrics.
struct RecoveryReport {
  std::uint64_t generation = 1;  // This memd's: 1 for a start from nothing.
  bool recovered = false;        // A previous memd's state was read.
  absl::Time when;               // When recovery ran (only if recovered).
  absl::Duration took;
  std::uint64_t segments = 0;  // Adopted.
  std::uint64_t buffers = 0;
  std::uint64_t bytes = 0;  // Of the adopted buffers' allocations.
  // Buffers whose memory did not come back (a segment's descriptor missing,
  // a GPU gone or renumbered, a driver that no longer knows the memory).
  std::uint64_t lost_buffers = 0;
  // One line for the log: what happened, and why when memd started empty.
  std::string summary;
};

// What recovery hands on: the state to record from, the epoch of the state
// file to begin, and the stored names that are stale once that file is
// stored (the state files it read).
struct Recovered {
  DurableState state;
  std::uint64_t epoch = 1;
  std::vector<std::string> stale_names;
  RecoveryReport report;
};

// Takes back what a previous memd left among `fds` (the descriptors this
// process was started with: TakeListenedFds): reads the newest state file,
// adopts each recorded segment through `backend` into its pool, and the
// buffers in it into `broker` (which must not have served anyone yet).
//
// Never fails: a state it cannot read (corrupt, another format version)
// makes it start empty and say why in the summary and the log, loudly; it
// never adopts part of a state it could not read. What it cannot use
// (descriptors it does not know, segments lost as RecoveryReport says) is
// closed, and its name dropped from `store` (may be null: no store).
Recovered Recover(std::vector<ListenedFd> fds, backend::Backend& backend,
                  pool::PoolSet& pools, broker::Broker& broker, FdStore* store,
                  const Clock& clock);

}  // namespace memd::durable
