#pragma once

// A step the re-claim tests share (tests/client/client_reclaim_test.cc, and
// tests/gpu/real_gpu_test.cc on the real driver). Header-only.

#include <signal.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/cuda/driver.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/pattern.h"
#include "tests/daemon/durable/buffer_steps.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"
#include "tests/support/temp_dir.h"

namespace memd::test {

// memd under the stand-in for systemd (buffers and leases outlive a kill
// -9): a Client writing an unsealed buffer at `location` when memd dies
// takes its lease back by itself, and seals through the same Buffer.
// `driver`: the CUDA driver this process writes and reads device buffers
// with (null for host memory).
inline void WriterReclaimsAndSeals(const std::string& location,
                            const std::vector<std::string>& backend_args,
                            const cuda::Driver* driver = nullptr) {
  TempDir dir;
  auto manager = ServiceManager::Create({.fd_store_max = 4096});
  ASSERT_TRUE(manager.ok()) << manager.status();
  std::vector<std::string> args = {"--socket-dir", dir.path(), "--metrics-address", ""};
  args.insert(args.end(), backend_args.begin(), backend_args.end());
  auto start = [&] {
    ASSERT_TRUE((*manager)->Start(BinDir() + "/memd", args).ok());
    ASSERT_TRUE((*manager)->WaitReady().ok());
  };
  start();
  auto writer = Client::Connect({.socket_dir = dir.path()});
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::vector<std::byte> bytes(64 * 1024);
  FillPattern(bytes, 11);
  if (driver != nullptr) {  // Device 0's primary context, current here.
    const cuda::DriverApi& api = driver->api();
    CUcontext context;
    ASSERT_TRUE(driver->Check(api.DevicePrimaryCtxRetain(&context, 0), "retain").ok());
    ASSERT_TRUE(driver->Check(api.CtxSetCurrent(context), "set current").ok());
  }
  auto wip = (*writer)->Create("wip", bytes.size(), {.location = location});
  ASSERT_TRUE(wip.ok()) << wip.status();
  if (driver == nullptr) {
    std::memcpy(wip->mutable_data().data(), bytes.data(), bytes.size());
  } else {
    ASSERT_TRUE(driver
                    ->Check(driver->api().MemcpyHtoD(wip->device_pointer(), bytes.data(),
                                                     bytes.size()),
                            "cuMemcpyHtoD")
                    .ok());
  }

  KillWithSigkill(**manager);
  start();

  // The writer makes no call: its new session shows up holding the lease.
  auto reader = Client::Connect({.socket_dir = dir.path()});
  ASSERT_TRUE(reader.ok()) << reader.status();
  const std::uint64_t reader_session = (*reader)->session_id();
  std::uint64_t holder = 0;
  ASSERT_TRUE(PollUntil([&] {
    auto sessions = (*reader)->Sessions();
    if (!sessions.ok()) return false;
    for (const SessionInfo& s : *sessions) {
      if (s.id != reader_session && s.lease_count == 1) holder = s.id;
    }
    return holder != 0;
  }));
  // That session is the writer's (asking connects no one: it is connected).
  EXPECT_EQ((*writer)->session_id(), holder);
  ASSERT_TRUE(wip->Seal().ok());
  auto read = (*reader)->Open("wip");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->info().state, BufferState::kSealed);
  EXPECT_EQ(read->info().location, location);
  std::vector<std::byte> got(bytes.size());
  if (driver == nullptr) {
    std::memcpy(got.data(), read->data().data(), got.size());
  } else {
    ASSERT_TRUE(driver
                    ->Check(driver->api().MemcpyDtoH(got.data(), read->device_pointer(),
                                                     got.size()),
                            "cuMemcpyDtoH")
                    .ok());
  }
  EXPECT_TRUE(MatchesPattern(got, 11));
  EXPECT_TRUE(wip->Release().ok());
}

}  // namespace memd::test
