#pragma once

// Memory whose first read of its tail stalls until the test lets it go
// (userfaultfd, missing mode): a lane that fills a staging slot from it
// stops in the middle of that fill, so a test knows the fill is under way
// and may act before it ends. Linux only; root or
// vm.unprivileged_userfaultfd = 1.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace memd::test {

/// Owns the mapping and the userfaultfd. Thread-compatible; the stalled
/// reader may be any thread.
class StallingBytes {
 public:
  // `bytes` of anonymous memory; the first `ready` (a multiple of the page
  // size) are there, the rest stall their first reader until Release.
  // Errors: UNAVAILABLE when userfaultfd is refused (with errno's words).
  static absl::StatusOr<std::unique_ptr<StallingBytes>> Make(std::uint64_t bytes,
                                                             std::uint64_t ready);
  ~StallingBytes();
  StallingBytes(const StallingBytes&) = delete;
  StallingBytes& operator=(const StallingBytes&) = delete;

  std::byte* data() const { return data_; }
  std::uint64_t size() const { return bytes_; }

  // Whether some thread read the stalling part within `guard`.
  bool AwaitRead(absl::Duration guard);
  // Fills the stalling part with `fill` (its size) and lets the reader on.
  absl::Status Release(std::span<const std::byte> fill);
  // Lets every reader on with zeros, as if released (closes the
  // userfaultfd): a failed test's stalled lane must not hang its engine.
  void LetGo();

 private:
  StallingBytes(std::byte* data, std::uint64_t bytes, std::uint64_t ready, int fd)
      : data_(data), bytes_(bytes), ready_(ready), fd_(fd) {}

  std::byte* data_;
  std::uint64_t bytes_;
  std::uint64_t ready_;
  int fd_;
};

}  // namespace memd::test
