#pragma once

// The fixture of the client tests that run memd in their own process
// (Daemon::Start): a socket directory of the test's own, the daemon and a
// client of it.

#include <cstdint>
#include <memory>
#include <string>

#include "daemon/config.h"
#include "daemon/daemon.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/pattern.h"
#include "tests/support/temp_dir.h"

namespace memd::test {

/// Owns a temporary directory, memd started in this process on it with
/// `config_` (a test sets what it needs before StartDaemon), and `client_`.
/// Members go in reverse: the client, the daemon, the directory.
class InProcessDaemonTest : public ::testing::Test {
 protected:
  InProcessDaemonTest() {
    config_.socket_dir = dir_.Join("run");
    config_.metrics_address = "";  // No metrics listener.
  }

  // Starts memd with `config_`; then connects `client_` unless told not to.
  void StartDaemon(bool connect = true) {
    auto daemon = Daemon::Start(config_);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    if (connect) {
      client_ = Connect();
      ASSERT_NE(client_, nullptr);
    }
  }

  std::unique_ptr<Client> Connect() {
    auto client = Client::Connect({.socket_dir = config_.socket_dir});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // A sealed buffer of `client_` holding the pattern of `seed`.
  void Publish(const std::string& name, std::uint64_t size, std::uint32_t seed,
               const CreateOptions& options = {}) {
    auto buffer = client_->Create(name, size, options);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    FillPattern(buffer->mutable_data(), seed);
    ASSERT_TRUE(buffer->Seal().ok());
  }

  TempDir dir_;
  Config config_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<Client> client_;
};

}  // namespace memd::test
