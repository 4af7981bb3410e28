#pragma once

// What durability did and does, as plain data: the one header Stats
// (service/) and the metrics (metrics/) see of daemon/durable/, so that
// neither links the recorder or recovery to show their figures.

#include <cstdint>
#include <string>

#include "absl/time/time.h"

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
  // Segments the previous memd stored that this one could not take back:
  // every one when its state could not be read (the buffers in them are
  // not known then), else those whose memory was gone.
  std::uint64_t lost_segments = 0;
  // One line for the log: what happened, and why when memd started empty.
  std::string summary;
};

// What a running memd shows of its durability (Stats, metrics): whether
// its buffers will outlive it, and what its start took back. Fixed once
// recovery ran: the daemon fills it before it serves anyone.
struct DurabilityStatus {
  bool recording = false;  // The state is recorded for the next memd.
  // Why not, when not: durability off, no descriptor store, the state
  // could not be written. Empty while recording.
  std::string not_recording;
  RecoveryReport recovery;
};

}  // namespace memd::durable
