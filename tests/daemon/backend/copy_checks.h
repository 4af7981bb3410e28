#pragma once

// What the copy-side tests check with: the conformance suite every copy
// device passes (copy_device_conformance_test.cc) and each backend's own
// (cuda_copy_device_test.cc, ze_copy_*_test.cc).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/backend/backend.h"
#include "daemon/backend/copy_device.h"
#include "gtest/gtest.h"
#include "tests/support/poll_until.h"

namespace memd::backend {

// `size` bytes that depend on their position and `seed`.
inline std::vector<std::byte> Pattern(std::size_t size, unsigned seed) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = std::byte((i * 131 + seed) & 0xff);
  return bytes;
}

inline bool Same(const void* a, const void* b, std::size_t size) {
  return std::memcmp(a, b, size) == 0;
}

// A StatusOr<bool> that is OK and holds `expected`.
inline ::testing::AssertionResult Is(const absl::StatusOr<bool>& reached, bool expected) {
  if (!reached.ok()) return ::testing::AssertionFailure() << reached.status();
  if (*reached != expected) return ::testing::AssertionFailure() << "got " << *reached;
  return ::testing::AssertionSuccess();
}

// Waits (bounded) for `marker` and returns what Reached last said.
inline absl::StatusOr<bool> Await(CopyStream& stream, Marker marker) {
  absl::StatusOr<bool> reached = false;
  test::PollUntil([&] {
    reached = stream.Reached(marker);
    return !reached.ok() || *reached;
  });
  return reached;
}

// Reserves `bytes` at `location`, keeps the segment in `segments`, and
// returns where its bytes are (empty after a failure, which is reported).
inline SegmentMemory ReserveInto(Backend& backend, const Location& location,
                                 std::uint64_t bytes,
                                 std::vector<std::unique_ptr<Segment>>& segments) {
  auto segment = backend.Reserve(location, bytes);
  EXPECT_TRUE(segment.ok()) << segment.status();
  if (!segment.ok()) return {};
  auto memory = (*segment)->Memory();
  EXPECT_TRUE(memory.ok()) << memory.status();
  segments.push_back(*std::move(segment));
  return memory.ok() ? *memory : SegmentMemory{};
}

}  // namespace memd::backend
