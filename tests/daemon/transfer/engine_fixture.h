#pragma once

// What the engine's tests share: buffers with a pattern, endpoints over
// them (host, registered host, fake device memory), an engine over fake
// devices, a wait for a transfer's end through Watch, and the drive of a
// fake clock. A test whose outcome depends on time gives the engine (and,
// when it needs the link's time, the fake devices) a FakeClock and moves
// it; nothing here sleeps.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "daemon/transfer/engine.h"
#include "gtest/gtest.h"
#include "tests/daemon/transfer/fake_copy_device.h"
#include "tests/support/fake_clock.h"
#include "tests/support/poll_until.h"

namespace memd::test {

inline constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
// Bounds a wait that should end: never asserted as a duration.
inline constexpr absl::Duration kGuard = absl::Seconds(60);

// Bytes with an identity: a pattern per seed, and a buffer id for range order.
struct TestBuffer {
  TestBuffer(std::uint64_t bytes, std::uint64_t id, int seed) : bytes(bytes), id(id) {
    for (std::uint64_t i = 0; i < bytes; ++i) {
      this->bytes[i] = static_cast<std::byte>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
    }
  }
  std::byte* data() { return bytes.data(); }
  std::vector<std::byte> bytes;
  std::uint64_t id;
};

inline transfer::Endpoint HostAt(TestBuffer& buffer, std::uint64_t offset, std::uint64_t length,
                                 bool registered = false) {
  transfer::Endpoint endpoint;
  endpoint.memory.host = buffer.data() + offset;
  endpoint.memory.registered = registered;
  endpoint.length = length;
  endpoint.buffer_id = buffer.id;
  endpoint.offset = offset;
  return endpoint;
}
inline transfer::Endpoint Host(TestBuffer& buffer, bool registered = false) {
  return HostAt(buffer, 0, buffer.bytes.size(), registered);
}
inline transfer::Endpoint DeviceAt(int device, TestBuffer& buffer, std::uint64_t offset,
                                   std::uint64_t length) {
  transfer::Endpoint endpoint;
  endpoint.memory = FakeDeviceMemory(device, buffer.data() + offset);
  endpoint.length = length;
  endpoint.buffer_id = buffer.id;
  endpoint.offset = offset;
  return endpoint;
}
inline transfer::Endpoint Device(int device, TestBuffer& buffer) {
  return DeviceAt(device, buffer, 0, buffer.bytes.size());
}

inline transfer::TransferSpec Spec(transfer::SessionId session, transfer::Endpoint source,
                                   transfer::Endpoint destination,
                                   transfer::Priority priority = transfer::Priority::kNormal) {
  transfer::TransferSpec spec;
  spec.session = session;
  spec.source = std::move(source);
  spec.destination = std::move(destination);
  spec.priority = priority;
  return spec;
}

// Options small enough for tests: 1 MiB chunks and slots.
inline transfer::EngineOptions SmallOptions() {
  transfer::EngineOptions options;
  options.chunk_bytes = kMiB;
  options.slot_bytes = 2 * kMiB;
  options.stall_timeout = absl::Seconds(30);
  return options;
}

// Fake devices 0..n-1 and their steering handles; their link runs in
// `clock`'s time (it must outlive the engine).
struct FakeDevices {
  explicit FakeDevices(int count, FakeLink link = FakeLink{},
                       const Clock& clock = RealClock::Default()) {
    for (int i = 0; i < count; ++i) {
      states.push_back(std::make_shared<FakeDeviceState>(link, clock));
    }
  }
  std::vector<std::unique_ptr<backend::CopyDevice>> Make() const {
    std::vector<std::unique_ptr<backend::CopyDevice>> devices;
    for (std::size_t i = 0; i < states.size(); ++i) {
      devices.push_back(std::make_unique<FakeCopyDevice>(static_cast<int>(i), states[i]));
    }
    return devices;
  }
  std::vector<std::shared_ptr<FakeDeviceState>> states;
};

inline std::unique_ptr<transfer::Engine> StartEngine(const FakeDevices& devices,
                                                     transfer::EngineOptions options,
                                                     const Clock& clock = RealClock::Default()) {
  auto engine = transfer::Engine::Start(devices.Make(), options, clock);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

// Waits (bounded) for the transfer's end through Watch, and returns its
// final progress.
inline transfer::TransferProgress WaitEnd(transfer::Engine& engine, transfer::SessionId session,
                                          transfer::TransferId id) {
  auto notification = std::make_shared<absl::Notification>();
  auto result = std::make_shared<transfer::TransferProgress>();
  auto watch = engine.Watch(session, id, [notification, result](const auto& progress) {
    *result = progress;
    notification->Notify();
  });
  EXPECT_TRUE(watch.ok()) << watch.status();
  const bool ended = notification->WaitForNotificationWithTimeout(kGuard);
  EXPECT_TRUE(ended) << "transfer " << id << " did not end";
  if (!ended) {
    engine.CancelWatch(*watch);
    auto progress = engine.Progress(session, id);
    return progress.ok() ? *progress : transfer::TransferProgress{};
  }
  return *result;
}

// Whether the transfer has ended (false for one it cannot find).
inline bool Ended(const transfer::Engine& engine, transfer::SessionId session,
                  transfer::TransferId id) {
  auto progress = engine.Progress(session, id);
  return progress.ok() && progress->terminal();
}

// Moves `clock` on by `step` between looks at `done` until it holds (the
// guard bounds a test that fails). For copies on a link in the fake
// clock's time, whose end the test need not know: each step lets the link
// move on; what the test asserts must not depend on how many steps it took.
inline bool AdvanceUntil(FakeClock& clock, absl::Duration step,
                         const std::function<bool()>& done) {
  return PollUntil([&] {
    if (done()) return true;
    clock.Advance(step);
    return false;
  });
}

// Destroys the engine while moving `clock` on, a minute a step: a test on
// a link in the fake clock's time that stopped early (a failed assertion)
// leaves copies that land only as the clock moves, and a lane that waits
// for them up to its stop bound in that clock. Quick when all has ended.
inline void StopEngine(std::unique_ptr<transfer::Engine>& engine, FakeClock& clock) {
  if (engine == nullptr) return;
  absl::Notification stopped;
  std::thread stopper([&] {
    engine.reset();
    stopped.Notify();
  });
  EXPECT_TRUE(AdvanceUntil(clock, absl::Minutes(1), [&] { return stopped.HasBeenNotified(); }))
      << "the engine did not stop";
  stopper.join();
}

inline bool SameBytes(const TestBuffer& a, std::uint64_t a_offset, const TestBuffer& b,
                      std::uint64_t b_offset, std::uint64_t length) {
  return std::equal(a.bytes.begin() + a_offset, a.bytes.begin() + a_offset + length,
                    b.bytes.begin() + b_offset);
}

}  // namespace memd::test
