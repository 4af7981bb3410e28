// An in-place upgrade (issue 23): SIGUSR2 makes memd exec its binary again
// with the descriptors that keep every buffer, as nginx and HAProxy hand
// their sockets to a new binary. Under a stand-in for systemd's store, and
// with no store at all: an upgrade never depends on one.

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/client/pattern.h"
#include "tests/daemon/durable/buffer_steps.h"
#include "tests/support/daemon_process.h"
#include "tests/support/poll_until.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::ElementsAre;
using test::ExpectPattern;
using test::Publish;

constexpr std::uint64_t kKiB = 1024;

std::vector<std::string> Names(Client& client) {
  std::vector<std::string> names;
  auto listed = client.List();
  EXPECT_TRUE(listed.ok()) << listed.status();
  if (listed.ok()) {
    for (const BufferInfo& b : *listed) names.push_back(absl::StrCat(b.name, " ", b.id));
  }
  return names;
}

// Connects once the upgraded memd serves: the old one's sockets closed at
// the exec, the new one binds them again.
std::unique_ptr<Client> ConnectAfterUpgrade(const std::string& dir) {
  std::unique_ptr<Client> client;
  EXPECT_TRUE(test::PollUntil([&] {
    auto connected = Client::Connect({.socket_dir = dir});
    if (!connected.ok() || !(*connected)->Ping().ok()) return false;
    client = std::move(*connected);
    return true;
  }));
  return client;
}

TEST(UpgradeTest, AnUpgradeUnderTheStoreKeepsThePidAndEveryBuffer) {
  auto manager = test::ServiceManager::Create({.fd_store_max = 64});
  ASSERT_TRUE(manager.ok()) << manager.status();
  test::TempDir dir;
  const std::vector<std::string> args = {"--socket-dir", dir.path(), "--backend", "host",
                                         "--metrics-address", ""};
  ASSERT_TRUE((*manager)->Start(test::BinDir() + "/memd", args).ok());
  ASSERT_TRUE((*manager)->WaitReady().ok());
  const pid_t pid = (*manager)->Current().main_pid;
  std::vector<std::string> before;
  {
    auto client = Client::Connect({.socket_dir = dir.path()});
    ASSERT_TRUE(client.ok());
    Publish(**client, "weights", 300 * kKiB, 5);
    Publish(**client, "config", 100, 6, {.mode = 0644});
    before = Names(**client);
  }
  const std::size_t statuses = (*manager)->Current().statuses.size();
  ASSERT_TRUE((*manager)->Kill(SIGUSR2).ok());
  // The new binary says READY=1 (and its status) again, from the same pid.
  ASSERT_TRUE((*manager)->WaitFor([&](const test::ServiceManager::Snapshot& now) {
    return now.statuses.size() > statuses;
  }));
  EXPECT_EQ((*manager)->Current().main_pid, pid);
  // Kept through the crash below: a new client's first call must not ride
  // on this one's dead connection.
  auto client = ConnectAfterUpgrade(dir.path());
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(Names(*client), before);
  ExpectPattern(*client, "weights", 5);
  ExpectPattern(*client, "config", 6);
  // And a crash after the upgrade still finds everything in the store.
  ASSERT_TRUE((*manager)->Kill(SIGKILL).ok());
  ASSERT_TRUE((*manager)->Wait().ok());
  ASSERT_TRUE((*manager)->Start(test::BinDir() + "/memd", args).ok());
  ASSERT_TRUE((*manager)->WaitReady().ok());
  auto after_crash = Client::Connect({.socket_dir = dir.path()});
  ASSERT_TRUE(after_crash.ok());
  EXPECT_EQ(Names(**after_crash), before);
  ExpectPattern(**after_crash, "weights", 5);
}

TEST(UpgradeTest, AnUpgradeNeedsNoStore) {
  // Under DaemonProcess, memd's store messages reach a socket that keeps
  // nothing: the upgrade rests on memd's own descriptors alone.
  auto daemon = test::DaemonProcess::Start({"--backend", "host"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::string dir = (*daemon)->socket_dir();
  std::vector<std::string> before;
  {
    auto client = Client::Connect({.socket_dir = dir});
    ASSERT_TRUE(client.ok());
    Publish(**client, "dataset/0", 2 * 1024 * kKiB, 7);
    Publish(**client, "dataset/1", 10, 8);
    before = Names(**client);
    ASSERT_EQ(before.size(), 2u);
    // Four times: a memd that was itself upgraded upgrades again, and each
    // exec races the old memd's own threads (a hand-off that moved
    // descriptors onto their numbers lost one about one exec in three).
    for (int round = 0; round < 4; ++round) {
      ASSERT_EQ(::kill((*daemon)->pid(), SIGUSR2), 0);
      // The old memd's sockets go at the exec: this client's calls fail
      // until it connects again.
      ASSERT_TRUE(test::PollUntil([&] { return !(*client)->Ping().ok(); }));
      auto upgraded = ConnectAfterUpgrade(dir);
      ASSERT_NE(upgraded, nullptr) << "round " << round << ", memd said:\n" << (*daemon)->Log();
      EXPECT_EQ(Names(*upgraded), before) << "round " << round;
      ExpectPattern(*upgraded, "dataset/0", 7);
      ExpectPattern(*upgraded, "dataset/1", 8);
      client = Client::Connect({.socket_dir = dir});
      ASSERT_TRUE(client.ok());
    }
  }
}

}  // namespace
}  // namespace memd
