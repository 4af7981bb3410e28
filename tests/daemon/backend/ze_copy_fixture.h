#pragma once

// The fixture of the Level Zero copy side's tests (ze_copy_device_test.cc,
// ze_copy_failures_test.cc): the project's fake driver under the REAL
// loader, the fake's poison and modelled latency to catch a marker or a
// wake that comes early, its fault injection, and its counters to show
// nothing is left behind.
//
// The loader and the fake read their environment once per process (at the
// first zeInit), so every test re-runs itself in a child process with the
// environment it needs (Start). ctest runs the binary in the loader's
// pass-through mode and again with ZE_ENABLE_LOADER_INTERCEPT=1, which the
// children inherit.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ze/driver.h"
#include "daemon/backend/level_zero/ze_backend.h"
#include "daemon/backend/level_zero/ze_copy_device.h"
#include "gtest/gtest.h"
#include "tests/daemon/backend/copy_checks.h"
#include "tests/fake_ze/fake_ze_hooks.h"

namespace memd::backend {

inline constexpr std::uint64_t kMiB = 1 << 20;

using Env = std::map<std::string, std::string>;
// The hook function has the struct's name: C++ needs the tag to see the type.
using FakeCounters = struct memd_fake_ze_counters;

// The fake's counters now (in a child that loaded it).
FakeCounters Counters();
// The fake's live objects a copy side makes: all back where they were once
// its streams and devices are gone.
void ExpectSameLiveObjects(const FakeCounters& now, const FakeCounters& before);

// Streams are destroyed first, then devices, segments, backend, loader.
class ZeCopyDeviceTest : public ::testing::Test {
 protected:
  // In the test process: runs this test again in a child with `env` (the
  // fake's variables; the rest unset) and returns false once it passed. In
  // that child: loads the loader over the fake, makes the backend and a
  // copy device per GPU, and returns true: the test goes on there.
  bool Start(Env env = {}, ZeCopyDevice::Options options = {});
  void TearDown() override;

  SegmentMemory Reserve(const Location& location, std::uint64_t bytes);
  CopyStream& NewStream(int device = 0);
  std::span<std::byte> Staging(std::uint64_t bytes, int device = 0);
  // The device bytes at `source`, read back through `stream` (the host
  // cannot read the fake's device memory: it is PROT_NONE, as a discrete
  // GPU's would be).
  static std::vector<std::byte> ReadBack(CopyStream& stream, DeviceAddress source,
                                         std::size_t size);
  // Host bytes that outlive the streams: a copy the test never waited for
  // may still read them while TearDown destroys the streams.
  const std::vector<std::byte>& Kept(std::vector<std::byte> bytes);

  bool in_child_ = false;
  bool check_leaks_ = true;
  FakeCounters before_{};
  std::shared_ptr<const ze::Loader> loader_;
  std::unique_ptr<ZeBackend> backend_;
  std::deque<std::vector<std::byte>> kept_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::vector<std::unique_ptr<ZeCopyDevice>> devices_;
  std::vector<std::unique_ptr<CopyStream>> streams_;

 private:
  static void RunInChild(Env env);
};

}  // namespace memd::backend
