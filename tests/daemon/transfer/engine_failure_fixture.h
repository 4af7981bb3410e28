#pragma once

// The fixture of the engine's failure and session tests: buffers that
// outlive the engine, and a probe copy that shows the lane took a turn.

#include <cstdint>
#include <deque>

#include "gtest/gtest.h"
#include "tests/daemon/transfer/engine_fixture.h"
#include "tests/support/poll_until.h"

namespace memd::test {

// Buffers outlive the engine: a transfer that ended early may leave chunks
// on the fake device, which (like a GPU) still writes them; in the daemon
// the transfer's SegmentHolds keep that memory alive.
class EngineFailureTest : public ::testing::Test {
 protected:
  TestBuffer& Buffer(std::uint64_t bytes) {
    buffers_.emplace_back(bytes, buffers_.size() + 1, static_cast<int>(buffers_.size()));
    return buffers_.back();
  }
  // Starts a 1 MiB copy out of device 0 (its own stream and buffers, so
  // nothing holds it back) and returns once the lane has issued its chunk:
  // the lane has then taken a turn since the call, and any transfer that
  // was runnable, fitted and came first in its order (same class and uid,
  // waiting longer) was started in that turn or before. How a test sees
  // that something did not happen, without waiting for it not to.
  transfer::TransferId Probe(transfer::Engine& engine, transfer::SessionId session) {
    TestBuffer& device = Buffer(kMiB);
    TestBuffer& host = Buffer(kMiB);
    auto id = engine.Submit(Spec(session, Device(0, device), Host(host)));
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return 0;
    EXPECT_TRUE(PollUntil([&] {
      return engine.Progress(session, *id)->state != transfer::TransferState::kQueued;
    })) << "the lane never started the probe";
    return *id;
  }
  std::deque<TestBuffer> buffers_;
};

}  // namespace memd::test
