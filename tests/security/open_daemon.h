#pragma once

// A real daemon in this process that the test users (kAlice, kBob,
// kMallory) can reach: sockets mode 0666 in a directory chain they can
// search. Tests set config_ (limits, quotas) and call StartDaemon().

#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "daemon/daemon.h"
#include "gtest/gtest.h"
#include "tests/support/hostile.h"
#include "tests/support/temp_dir.h"

namespace memd::test {

class OpenDaemonTest : public ::testing::Test {
 protected:
  OpenDaemonTest() {
    ::chmod(dir_.path().c_str(), 0755);  // mkdtemp made it 0700.
    config_.socket_dir = dir_.Join("run");
    config_.socket_mode = 0666;
    config_.metrics_address = "";
    config_.backend = "host";
  }

  void StartDaemon() {
    auto daemon = Daemon::Start(config_);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }

  // memd-hostile COMMAND ARGS... as `uid`.
  ProgramResult Hostile(uid_t uid, const std::vector<std::string>& args) {
    return RunHostile(uid, config_.socket_dir, args);
  }

  // A path for a HeldAttack gate.
  std::string Gate(const std::string& name) const { return dir_.Join(name); }

  TempDir dir_;
  Config config_;
  std::unique_ptr<Daemon> daemon_;
};

}  // namespace memd::test
