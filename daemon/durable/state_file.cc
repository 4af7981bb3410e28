#include "daemon/durable/state_file.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "daemon/durable/crc32c.h"
#include "daemon/durable/state_codec.h"

namespace memd::durable {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the state file is written in native byte order, read as little-endian");

constexpr char kMagic[8] = {'m', 'e', 'm', 'd', 's', 't', 'a', 't'};
constexpr std::size_t kVersionAt = 8;
constexpr std::size_t kEpochAt = 16;
constexpr std::size_t kChecksumAt = 24;
// A payload's length is a u32, and 0 marks the end.
constexpr std::uint64_t kMaxPayloadBytes = 0xffffffffu - 8;

constexpr std::uint64_t Align8(std::uint64_t n) { return (n + 7) & ~std::uint64_t{7}; }

std::uint64_t FrameBytes(std::uint64_t payload) { return Align8(kFrameHeaderBytes + payload); }

template <typename T>
T ReadAt(const std::byte* base, std::uint64_t at) {
  T value;
  std::memcpy(&value, base + at, sizeof value);
  return value;
}

template <typename T>
void WriteAt(std::byte* base, std::uint64_t at, T value) {
  std::memcpy(base + at, &value, sizeof value);
}

// A read-only mapping, unmapped when it goes.
class ReadMapping {
 public:
  ReadMapping(const std::byte* base, std::uint64_t bytes) : base_(base), bytes_(bytes) {}
  ReadMapping(const ReadMapping&) = delete;
  ReadMapping& operator=(const ReadMapping&) = delete;
  ~ReadMapping() { ::munmap(const_cast<std::byte*>(base_), bytes_); }

 private:
  const std::byte* base_;
  std::uint64_t bytes_;
};

// One frame as read: a whole one's payload, or where and how the frames end.
struct Frame {
  enum class Kind { kWhole, kEnd, kTorn } kind = Kind::kEnd;
  std::string_view payload;
  std::uint64_t next = 0;  // Where the next frame starts (kWhole only).
  std::string why;         // kTorn only.
};

Frame ReadFrame(const std::byte* base, std::uint64_t size, std::uint64_t at) {
  // Frames are 8-aligned and so is size's lower bound; a file whose size is
  // not a multiple of 8 just ends a little early.
  if (at > size || size - at < kFrameHeaderBytes) return {};
  const auto length = ReadAt<std::uint32_t>(base, at);
  const auto checksum = ReadAt<std::uint32_t>(base, at + 4);
  if (length == 0) {
    // An append writes its checksum first: one without its length is torn.
    if (checksum == 0) return {};
    return {Frame::Kind::kTorn, {}, 0, absl::StrCat("a frame at ", at, " without its length")};
  }
  if (length > size - at - kFrameHeaderBytes) {
    return {Frame::Kind::kTorn, {}, 0,
            absl::StrCat("a frame at ", at, " of ", length, " bytes, past the end at ", size)};
  }
  const std::byte* payload = base + at + kFrameHeaderBytes;
  if (Crc32c(payload, length) != checksum) {
    return {Frame::Kind::kTorn, {}, 0, absl::StrCat("a frame at ", at, " fails its checksum")};
  }
  return {Frame::Kind::kWhole,
          std::string_view(reinterpret_cast<const char*>(payload), length),
          std::min<std::uint64_t>(at + FrameBytes(length), size), {}};
}

absl::Status HeaderLoss(absl::string_view why) {
  return absl::DataLossError(absl::StrCat("state file: ", why));
}

absl::StatusOr<LoadedState> Parse(const std::byte* base, std::uint64_t size) {
  if (std::memcmp(base, kMagic, sizeof kMagic) != 0) {
    return HeaderLoss("not a state file (no magic)");
  }
  // The version before the checksum: another version may checksum its header
  // differently, and is refused for what it is.
  const auto version = ReadAt<std::uint32_t>(base, kVersionAt);
  if (version != kStateFormatVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("state file: format version ", version, "; this build reads version ",
                     kStateFormatVersion, " only"));
  }
  if (Crc32c(base, kChecksumAt) != ReadAt<std::uint32_t>(base, kChecksumAt)) {
    return HeaderLoss("the header fails its checksum");
  }
  LoadedState loaded;
  loaded.epoch = ReadAt<std::uint64_t>(base, kEpochAt);

  Frame frame = ReadFrame(base, size, kStateHeaderBytes);
  if (frame.kind != Frame::Kind::kWhole) {
    return HeaderLoss(absl::StrCat("no whole snapshot (", frame.kind == Frame::Kind::kEnd
                                                              ? std::string("none")
                                                              : frame.why,
                                   ")"));
  }
  absl::StatusOr<DurableState> snapshot = DecodeSnapshot(frame.payload);
  if (!snapshot.ok()) return snapshot.status();
  IndexedState state(*std::move(snapshot));

  for (std::uint64_t at = frame.next;;) {
    frame = ReadFrame(base, size, at);
    if (frame.kind == Frame::Kind::kEnd) break;
    if (frame.kind == Frame::Kind::kTorn) {
      loaded.torn_tail = true;
      break;
    }
    // A whole frame (checksum and all) that does not decode is no torn
    // append: refuse it rather than drop it and what follows.
    absl::StatusOr<std::vector<Change>> batch = DecodeBatch(frame.payload);
    if (!batch.ok()) {
      return absl::DataLossError(absl::StrCat("state file: frame at ", at, ": ",
                                              batch.status().message()));
    }
    for (const Change& change : *batch) state.Apply(change);
    ++loaded.batches;
    at = frame.next;
  }
  loaded.state = std::move(state).Take();
  if (absl::Status valid = Validate(loaded.state); !valid.ok()) {
    return absl::DataLossError(absl::StrCat("state file of epoch ", loaded.epoch,
                                            " after ", loaded.batches,
                                            " batches: ", valid.message()));
  }
  return loaded;
}

}  // namespace

absl::StatusOr<StateFile> StateFile::Create(const DurableState& state, std::uint64_t epoch,
                                            std::uint64_t journal_room) {
  const std::string snapshot = EncodeSnapshot(state);
  if (snapshot.size() > kMaxPayloadBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("state file: a snapshot of ", snapshot.size(), " bytes is too large"));
  }
  const std::uint64_t snapshot_end = kStateHeaderBytes + FrameBytes(snapshot.size());
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::uint64_t capacity = snapshot_end + std::max(journal_room, 8 * snapshot_end);
  capacity = (capacity + page - 1) / page * page;

  StateFile file;
  file.fd_ = UniqueFd(::memfd_create(StateFdName(epoch).c_str(), MFD_CLOEXEC));
  if (!file.fd_.valid()) return ErrnoStatus("memfd_create", errno);
  if (::ftruncate(file.fd_.get(), static_cast<off_t>(capacity)) != 0) {
    return ErrnoStatus("ftruncate", errno);
  }
  void* base = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED, file.fd_.get(), 0);
  if (base == MAP_FAILED) return ErrnoStatus("mmap", errno);
  file.base_ = static_cast<std::byte*>(base);
  file.capacity_ = capacity;
  file.epoch_ = epoch;

  std::memcpy(file.base_, kMagic, sizeof kMagic);
  WriteAt<std::uint32_t>(file.base_, kVersionAt, kStateFormatVersion);
  WriteAt<std::uint64_t>(file.base_, kEpochAt, epoch);
  WriteAt<std::uint32_t>(file.base_, kChecksumAt, Crc32c(file.base_, kChecksumAt));
  file.tail_ = kStateHeaderBytes;
  file.WriteFrame(snapshot);
  file.snapshot_end_ = file.tail_;
  return file;
}

absl::StatusOr<LoadedState> StateFile::Load(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus("fstat", errno);
  if (!S_ISREG(st.st_mode)) return HeaderLoss("not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < kStateHeaderBytes) {
    return HeaderLoss(absl::StrCat(size, " bytes, fewer than a header's ", kStateHeaderBytes));
  }
  if (size > kMaxStateFileBytes) {
    return HeaderLoss(absl::StrCat(size, " bytes, more than a state file ever holds (",
                                   kMaxStateFileBytes, ")"));
  }
  void* base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return ErrnoStatus("mmap", errno);
  ReadMapping mapping(static_cast<const std::byte*>(base), size);
  return Parse(static_cast<const std::byte*>(base), size);
}

StateFile::StateFile(StateFile&& other) noexcept { *this = std::move(other); }

StateFile& StateFile::operator=(StateFile&& other) noexcept {
  if (this != &other) {
    if (base_ != nullptr) ::munmap(base_, capacity_);
    fd_ = std::move(other.fd_);
    base_ = std::exchange(other.base_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    epoch_ = other.epoch_;
    snapshot_end_ = other.snapshot_end_;
    tail_ = other.tail_;
    scratch_ = std::move(other.scratch_);
  }
  return *this;
}

StateFile::~StateFile() {
  if (base_ != nullptr) ::munmap(base_, capacity_);
}

absl::Status StateFile::Append(std::span<const Change> batch) {
  if (batch.empty()) return absl::OkStatus();
  EncodeBatch(batch, scratch_);
  if (scratch_.size() > kMaxPayloadBytes ||
      FrameBytes(scratch_.size()) > capacity_ - tail_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "state file of epoch ", epoch_, ": a batch of ", scratch_.size(), " bytes does not fit in ",
        capacity_ - tail_, " bytes left"));
  }
  WriteFrame(scratch_);
  return absl::OkStatus();
}

void StateFile::WriteFrame(std::string_view payload) {
  std::byte* frame = base_ + tail_;
  WriteAt<std::uint32_t>(frame, 4, Crc32c(payload.data(), payload.size()));
  std::memcpy(frame + kFrameHeaderBytes, payload.data(), payload.size());
  // The length last, and not before the rest in the compiler's order either:
  // a crash before this store leaves a length of 0, and the frame unread.
  std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(frame))
      .store(static_cast<std::uint32_t>(payload.size()), std::memory_order_release);
  tail_ += FrameBytes(payload.size());
}

}  // namespace memd::durable
