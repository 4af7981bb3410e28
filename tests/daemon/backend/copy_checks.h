#pragma once

// What the copy-side tests of both GPU backends check with
// (cuda_copy_device_test.cc, ze_copy_*_test.cc).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
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

// A wake still running never holds back the copies queued after it: it
// runs beside the stream (CUDA: a host function on a second stream, since
// one queued on the copy stream would hold every later chunk; Level Zero:
// the waiter thread). Copies `bytes` from `source` to `device` while a wake
// blocks; `landed` says whether they are there, read the backend's way.
inline void ExpectAPendingWakeNeverHoldsBackLaterCopies(CopyStream& stream, DeviceAddress device,
                                                       const std::byte* source,
                                                       std::uint64_t bytes,
                                                       const std::function<bool()>& landed) {
  // Shared with the wake, which may still be returning from its wait when
  // the test ends.
  struct Gates {
    absl::Notification waking, release;
  };
  auto gates = std::make_shared<Gates>();
  ASSERT_TRUE(stream.WakeWhenDone([gates] {
    gates->waking.Notify();
    gates->release.WaitForNotification();
  }).ok());
  ASSERT_TRUE(gates->waking.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(stream.HostToDevice(device, source, bytes).ok());
  auto marker = stream.Mark();
  ASSERT_TRUE(marker.ok());
  EXPECT_TRUE(Is(Await(stream, *marker), true));
  EXPECT_TRUE(landed());
  gates->release.Notify();
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
