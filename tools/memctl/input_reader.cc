#include "tools/memctl/input_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "tools/memctl/failure.h"

namespace memd::memctl {
namespace {

// One read(2) at most this large: big enough for full device bandwidth,
// small enough to notice a signal.
constexpr std::size_t kMaxReadBytes = std::size_t{16} << 20;

}  // namespace

InputReader::InputReader(Input& input, const Collected* collected, bool sized_by_flag,
                         std::uint64_t total)
    : input_(input), collected_(collected), sized_by_flag_(sized_by_flag), total_(total) {}

absl::Status InputReader::EndedEarly() const {
  const std::string step = absl::StrCat("read ", input_.label);
  if (sized_by_flag_) {
    return Failed(step, absl::FailedPreconditionError(absl::StrCat(
                            input_.label, " ended after ", done_, " of the ", total_,
                            " bytes --size promised")));
  }
  return Failed(step, absl::FailedPreconditionError(absl::StrCat(
                          "the file ended after ", done_, " of ", total_,
                          " bytes; did it change while memctl read it?")));
}

absl::Status InputReader::Read(std::span<std::byte> into) {
  if (collected_ != nullptr) {
    CopyCollected(into);
    return absl::OkStatus();
  }
  return ReadBuffered(into);
}

absl::Status InputReader::ReadBuffered(std::span<std::byte> into) {
  while (!into.empty()) {
    const ssize_t got =
        ::read(input_.fd.get(), into.data(), std::min(into.size(), kMaxReadBytes));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Failed(absl::StrCat("read ", input_.label), ErrnoStatus("read", errno));
    if (got == 0) return EndedEarly();
    done_ += static_cast<std::uint64_t>(got);
    into = into.subspan(static_cast<std::size_t>(got));
  }
  return absl::OkStatus();
}

void InputReader::CopyCollected(std::span<std::byte> into) {
  while (!into.empty() && piece_ < collected_->pieces.size()) {
    const std::string& piece = collected_->pieces[piece_];
    const std::size_t take = std::min(into.size(), piece.size() - piece_offset_);
    std::memcpy(into.data(), piece.data() + piece_offset_, take);
    into = into.subspan(take);
    piece_offset_ += take;
    done_ += take;
    if (piece_offset_ == piece.size()) {
      ++piece_;
      piece_offset_ = 0;
    }
  }
}

absl::Status InputReader::CheckEnd() {
  if (collected_ != nullptr) return absl::OkStatus();
  // A device such as /dev/zero never ends: --size takes its first bytes.
  if (sized_by_flag_ && input_.kind == Input::Kind::kDevice) return absl::OkStatus();
  absl::StatusOr<bool> at_end = AtEnd(input_);
  if (!at_end.ok()) return at_end.status();
  if (*at_end) return absl::OkStatus();
  const std::string step = absl::StrCat("read ", input_.label);
  if (sized_by_flag_) {
    return Failed(step, absl::FailedPreconditionError(absl::StrCat(
                            input_.label, " has more than the ", total_,
                            " bytes --size promised")));
  }
  return Failed(step, absl::FailedPreconditionError(absl::StrCat(
                          "the file grew past ", total_,
                          " bytes while memctl read it; try again")));
}

}  // namespace memd::memctl
