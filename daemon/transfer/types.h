#pragma once

// The transfer engine's vocabulary: what a copy asks for and what it reports.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/backend/copy_device.h"
#include "daemon/pool/pool.h"

namespace memd::transfer {

using TransferId = std::uint64_t;
using SessionId = std::uint64_t;

// Served at chunk boundaries, critical before normal before background, with
// ageing so that nothing waits forever.
enum class Priority { kCritical = 0, kNormal = 1, kBackground = 2 };
inline constexpr int kPriorities = 3;

enum class TransferState { kQueued, kRunning, kDone, kFailed, kCancelled };

// How the bytes moved.
enum class DataPath {
  kNone,     // Not started.
  kCpu,      // Host to host: CPU copies.
  kStaged,   // Pageable host memory through the pinned staging ring.
  kDirect,   // Registered (pinned) host memory: DMA with no staging.
  kDevice,   // Device to device on one GPU.
  kPeerStaged,  // Device to another device, through the staging ring.
};

enum class Direction { kHostToHost, kHostToDevice, kDeviceToHost, kDeviceToDevice };

// Why a transfer ended without finishing: what EngineStats counts, what a
// cancelled transfer's status says, the metric's `reason` label.
enum class FailureReason {
  kCancelled,         // Its session's Cancel.
  kDeadline,          // TransferSpec::deadline passed.
  kStall,             // No chunk finished for EngineOptions::stall_timeout.
  kDriver,            // A chunk failed (not transient, or out of retries).
  kDeviceUnhealthy,   // A device it uses reported a sticky error.
  kSessionEnded,      // Its session ended (EndSession).
  kDestinationFreed,  // Its destination buffer was freed (CancelWritesTo).
  kShutdown,          // The engine stopped.
};

std::string_view PriorityName(Priority priority);       // "critical", ...
std::string_view StateName(TransferState state);         // "queued", ...
std::string_view DataPathName(DataPath path);            // "cpu", "staged", ...
std::string_view DirectionName(Direction direction);     // "h2d", "d2h", ...
std::string_view FailureReasonName(FailureReason reason);  // "cancelled", "deadline", ...

// One side of a copy: bytes the daemon reaches, and what keeps them alive
// while the transfer runs.
struct Endpoint {
  // Already moved to the start of the range (SegmentMemory::At).
  backend::SegmentMemory memory;
  std::uint64_t length = 0;
  // Keeps the segment, and so the memory, alive until the transfer ends,
  // whatever happens to the lease that named it.
  pool::SegmentHold hold;
  // Keeps the bytes from going to another buffer meanwhile (the broker's
  // CopyPin: a buffer freed during the copy is given back to its pool only
  // when the transfer lets go). Empty: nothing to keep.
  std::shared_ptr<const void> pin;
  // Called once, under the engine's mutex, when the transfer will write no
  // more: its last chunk has left the device (the broker's
  // CopyClaim::Written, so that the buffer may be sealed). Must not block
  // or call the engine. Empty: nothing to tell.
  std::function<void()> written;
  // Which buffer and where in it: transfers whose ranges overlap (one
  // writing what the other reads or writes) run in submission order.
  std::uint64_t buffer_id = 0;
  std::uint64_t offset = 0;
  // Only for listings (Engine::List): the buffer's name and the location
  // of the copy of it read or written ("host", "device:0"); may be empty.
  std::string name;
  std::string location;
};

struct TransferSpec {
  SessionId session = 0;
  // The submitting session's uid, as the kernel reported it: admission
  // bounds each uid's unfinished copies, and the lanes give uids turns.
  uid_t uid = 0;
  Endpoint source;
  Endpoint destination;  // Same length as the source.
  Priority priority = Priority::kNormal;
  // The transfer fails with DEADLINE_EXCEEDED if it has not finished by then.
  absl::Time deadline = absl::InfiniteFuture();
  // 0: the engine's default; else 1 MiB .. the staging slot size.
  std::uint64_t chunk_bytes = 0;
};

// Unfinished transfers and their bytes: what admission counts (of a
// session, a uid, or the daemon).
struct TransferActivity {
  std::uint64_t transfers = 0;
  std::uint64_t bytes = 0;
};

struct TransferProgress {
  TransferId id = 0;
  TransferState state = TransferState::kQueued;
  std::uint64_t bytes_done = 0;
  std::uint64_t bytes_total = 0;
  Direction direction = Direction::kHostToHost;
  DataPath path = DataPath::kNone;
  int device = -1;  // The GPU that moved the bytes; -1 for host to host.
  Priority priority = Priority::kNormal;
  std::uint32_t retries = 0;
  // OK unless kFailed or kCancelled: then what ended it (CANCELLED,
  // DEADLINE_EXCEEDED, or the driver's error naming the chunk, the call and
  // the CUresult).
  absl::Status status;
  absl::Time submitted;
  absl::Time started;   // First chunk; InfinitePast before.
  absl::Time finished;  // InfinitePast until terminal.

  bool terminal() const {
    return state == TransferState::kDone || state == TransferState::kFailed ||
           state == TransferState::kCancelled;
  }
};

// An unfinished transfer as Engine::List shows it.
struct ListedTransfer {
  TransferProgress progress;  // kQueued or kRunning.
  SessionId session = 0;
  uid_t uid = 0;
  // Endpoint::name, location and offset of each side.
  std::string source_name;
  std::string source_location;
  std::uint64_t source_offset = 0;
  std::string destination_name;
  std::string destination_location;
  std::uint64_t destination_offset = 0;
  absl::Duration age;  // Since Submit, by the engine's clock.
};

struct TransferListing {
  std::vector<ListedTransfer> transfers;  // Oldest first.
  std::uint64_t omitted = 0;              // Unfinished ones past the most asked for.
  absl::Time now;  // The engine's clock when it was taken.
};

}  // namespace memd::transfer
