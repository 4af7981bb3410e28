#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "daemon/backend/backend.h"
#include "daemon/broker/broker.h"
#include "daemon/durable/fd_store.h"
#include "daemon/durable/report.h"
#include "daemon/durable/state.h"
#include "daemon/pool/pool_set.h"

namespace memd::durable {

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
//
// Each segment adopted is reported to `keep` with its name and descriptor
// (borrowed): the store holds it already, and a later upgrade by exec hands
// it on from memd's own copy (MirrorStore::Keep).
Recovered Recover(std::vector<ListenedFd> fds, backend::Backend& backend,
                  pool::PoolSet& pools, broker::Broker& broker, FdStore* store,
                  const Clock& clock,
                  const std::function<void(const std::string& name, int fd)>& keep);

}  // namespace memd::durable
