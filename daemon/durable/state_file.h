#pragma once

// The durable state in one memfd, kept in the service manager's descriptor
// store under StateFdName(epoch) so that it outlives memd.
//
// Layout (native byte order; memd runs on little-endian machines only):
//   header, 32 bytes: magic "memdstat", u32 format version, u32 0, u64 epoch,
//                     u32 CRC-32C of the 24 bytes before it, u32 0
//   frames, each at an 8-byte aligned offset:
//                     u32 payload length, u32 CRC-32C of the payload, payload,
//                     zeros up to the next multiple of 8
//   the first frame is a Snapshot, each later one a Batch (state_codec.h).
//
// The file is sized once to a sparse capacity (a memfd's pages cost only once
// touched) and mapped once. An append writes the checksum, then the payload,
// then the length word last, so a crash in between leaves a length of 0
// where the frame would be: the loader stops there and the batch never
// happened. Beyond the last frame the file is all zeros: frames are only
// ever appended, and a refused append writes nothing.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "daemon/durable/state.h"

namespace memd::durable {

inline constexpr std::uint32_t kStateFormatVersion = 1;
inline constexpr std::size_t kStateHeaderBytes = 32;
inline constexpr std::size_t kFrameHeaderBytes = 8;
// Room for appends when none is asked for; compaction (StateJournal) usually
// comes well before it is used up.
inline constexpr std::uint64_t kDefaultJournalRoom = std::uint64_t{2} << 20;
// The largest file Load maps: far beyond any state memd writes, small enough
// that a lying size costs nothing but address space.
inline constexpr std::uint64_t kMaxStateFileBytes = std::uint64_t{64} << 30;

// What Load read back.
struct LoadedState {
  DurableState state;
  std::uint64_t epoch = 0;
  std::uint64_t batches = 0;  // Frames applied after the snapshot.
  // The journal ended in a frame that is not whole (an append a crash cut
  // short, or a damaged last frame): it was ignored.
  bool torn_tail = false;
};

/// One state file: owns its memfd and its writable mapping. Move-only; not
/// thread-safe (StateJournal serialises it).
/// Errors: Create: RESOURCE_EXHAUSTED / INTERNAL from memfd_create,
/// ftruncate or mmap (ErrnoStatus). Append: RESOURCE_EXHAUSTED when the frame
/// does not fit (the caller compacts into a new file). Load: DATA_LOSS,
/// FAILED_PRECONDITION, or a system call's status.
class StateFile {
 public:
  // A new file of `epoch` holding `state` as its snapshot, with room for at
  // least max(journal_room, 8 x the snapshot) bytes of appended frames.
  static absl::StatusOr<StateFile> Create(const DurableState& state, std::uint64_t epoch,
                                          std::uint64_t journal_room = kDefaultJournalRoom);

  // Reads a state file through a read-only mapping of `fd` (not taken), its
  // size from fstat and every length in it checked against that size.
  // The snapshot and then every whole frame, up to the first that is not
  // (length 0, past the end, or a bad checksum: torn_tail when not a clean
  // end). The result passes Validate.
  // Errors: DATA_LOSS saying why (not a state file, a bad header checksum,
  // no whole snapshot, an undecodable record, a state Validate refuses);
  // FAILED_PRECONDITION for another format version, naming both.
  static absl::StatusOr<LoadedState> Load(int fd);

  StateFile(StateFile&& other) noexcept;
  StateFile& operator=(StateFile&& other) noexcept;
  StateFile(const StateFile&) = delete;
  StateFile& operator=(const StateFile&) = delete;
  ~StateFile();

  // Appends `batch` as one frame: no system call, the length word last. An
  // empty batch writes nothing. Errors: RESOURCE_EXHAUSTED when it does not
  // fit (nothing written).
  absl::Status Append(std::span<const Change> batch);

  int fd() const { return fd_.get(); }
  std::uint64_t epoch() const { return epoch_; }
  // The header and the snapshot frame.
  std::uint64_t snapshot_bytes() const { return snapshot_end_; }
  // Frames appended after the snapshot, padding included.
  std::uint64_t journal_bytes() const { return tail_ - snapshot_end_; }
  std::uint64_t capacity() const { return capacity_; }

 private:
  StateFile() = default;
  // Writes one frame at tail_ (fits: checked by the caller).
  void WriteFrame(std::string_view payload);

  UniqueFd fd_;
  std::byte* base_ = nullptr;  // capacity_ bytes, mapped shared and writable.
  std::uint64_t capacity_ = 0;
  std::uint64_t epoch_ = 0;
  std::uint64_t snapshot_end_ = 0;
  std::uint64_t tail_ = 0;  // Where the next frame goes.
  std::string scratch_;     // The batch being appended, reused.
};

}  // namespace memd::durable
