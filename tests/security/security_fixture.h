#pragma once

// A daemon in this process that every test user can reach: its sockets are
// 0666 in a directory others may search, as on a node where every process
// may use memd.

#include <sys/stat.h>

#include <memory>

#include "daemon/daemon.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace memd::testing {

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
    config_.socket_dir = dir_.Join("run");
    config_.socket_mode = 0666;
    config_.metrics_address = "";
    config_.host_pool_limit_bytes = std::uint64_t{256} << 20;
  }

  // Starts the daemon with config_ as the test left it.
  void StartDaemon() {
    auto daemon = Daemon::Start(config_);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }

  const std::string& socket_dir() const { return config_.socket_dir; }

  TempDir dir_;
  Config config_;
  std::unique_ptr<Daemon> daemon_;
};

}  // namespace memd::testing
