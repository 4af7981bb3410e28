// The descriptor store end to end: memd-fd-store-service (a stand-in for
// memd) stores memfds through FdStore with tests/support's ServiceManager as
// its systemd, dies, and gets them back through TakeListenedFds.

#include "daemon/durable/fd_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/unix_socket.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"

namespace memd::durable {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using test::ServiceManager;

std::string Service() { return test::BinDir() + "/memd-fd-store-service"; }

std::unique_ptr<ServiceManager> Manager(std::size_t max = 16) {
  auto manager = ServiceManager::Create({.fd_store_max = max});
  EXPECT_TRUE(manager.ok()) << manager.status();
  return std::move(*manager);
}

// Starts the stand-in with `steps` and waits for its READY=1.
void StartReady(ServiceManager& manager, const std::vector<std::string>& steps) {
  ASSERT_TRUE(manager.Start(Service(), steps).ok());
  const absl::Status ready = manager.WaitReady();
  ASSERT_TRUE(ready.ok()) << ready;
}

std::string LastStatus(ServiceManager& manager) {
  const auto statuses = manager.Current().statuses;
  return statuses.empty() ? "" : statuses.back();
}

std::string Contents(int fd) {
  char buffer[256];
  const ssize_t got = ::pread(fd, buffer, sizeof(buffer), 0);
  return got > 0 ? std::string(buffer, got) : "";
}

TEST(FdStoreTest, StoredMemfdsComeBackByNameAfterSigkill) {
  auto manager = Manager();
  StartReady(*manager, {"listen", "store=memd.state.1=state-one",
                        "store=memd.segment.7=segment-seven", "ready", "pause"});
  EXPECT_THAT(manager->Current().statuses, ElementsAre("listened "));
  EXPECT_THAT(manager->Current().stored_names,
              ElementsAre("memd.state.1", "memd.segment.7"));

  ASSERT_TRUE(manager->Kill(SIGKILL).ok());
  EXPECT_EQ(*manager->Wait(), 128 + SIGKILL);
  // What systemd's Restart= does: a new start with the store kept.
  StartReady(*manager, {"listen", "ready", "pause"});
  EXPECT_EQ(LastStatus(*manager),
            "listened memd.state.1=state-one memd.segment.7=segment-seven ");
}

TEST(FdStoreTest, RemoveDropsEveryDescriptorOfTheName) {
  auto manager = Manager();
  StartReady(*manager, {"store=a=1", "store=a=2", "store=b=3", "remove=a", "ready", "pause"});
  EXPECT_THAT(manager->Current().stored_names, ElementsAre("b"));
  std::vector<UniqueFd> b = manager->DupStored("b");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(Contents(b[0].get()), "3");
}

TEST(FdStoreTest, NamesSystemdWouldNotKeepAreRefusedBeforeSending) {
  auto manager = Manager();
  StartReady(*manager, {"try=a:b", "try=", "try=" + std::string(256, 'n'), "try=tab\there",
                        "try=caf\xc3\xa9", "try=" + std::string(255, 'n'), "ready", "pause"});
  EXPECT_THAT(manager->Current().statuses,
              ElementsAre("try INVALID_ARGUMENT", "try INVALID_ARGUMENT",
                          "try INVALID_ARGUMENT", "try INVALID_ARGUMENT",
                          "try INVALID_ARGUMENT", "try OK"));
  EXPECT_THAT(manager->Current().stored_names, ElementsAre(std::string(255, 'n')));
}

TEST(FdStoreTest, FdNameIsValidFollowsSystemdButRefusesTheEmptyName) {
  EXPECT_TRUE(FdNameIsValid("memd.segment.42"));
  EXPECT_TRUE(FdNameIsValid("with space ~"));
  EXPECT_FALSE(FdNameIsValid(""));
  EXPECT_FALSE(FdNameIsValid("a:b"));
  EXPECT_FALSE(FdNameIsValid("new\nline"));
  EXPECT_FALSE(FdNameIsValid("del\x7f"));
  EXPECT_FALSE(FdNameIsValid(std::string(256, 'x')));
}

// Sends `text` with `fd` to the manager's socket from this process, which
// is not the service's main pid.
void SendAsStranger(const std::string& socket_path, const std::string& text, int fd) {
  auto socket = ConnectUnix(socket_path, SOCK_DGRAM);
  ASSERT_TRUE(socket.ok()) << socket.status();
  ASSERT_TRUE(SendPacket(socket->get(), text, fd).ok());
}

TEST(FdStoreTest, MessagesFromAnotherPidThanTheMainOneAreIgnored) {
  auto manager = Manager();
  StartReady(*manager, {"ready", "pause"});
  UniqueFd memfd(::memfd_create("stranger", MFD_CLOEXEC));
  SendAsStranger(manager->notify_socket(), "FDSTORE=1\nFDNAME=intruder\nSTATUS=owned", memfd.get());
  ASSERT_TRUE(manager->WaitFor([](const auto& seen) { return seen.foreign_messages == 1; }));
  EXPECT_THAT(manager->Current().stored_names, IsEmpty());
  EXPECT_THAT(manager->Current().statuses, IsEmpty());
}

TEST(FdStoreTest, DescriptorsBeyondTheMaxAreDroppedAndCounted) {
  auto manager = Manager(/*max=*/2);
  StartReady(*manager, {"store=a=1", "store=b=2", "store=c=3", "ready", "pause"});
  EXPECT_THAT(manager->Current().stored_names, ElementsAre("a", "b"));
  EXPECT_EQ(manager->Current().dropped_over_max, 1u);
}

TEST(FdStoreTest, OneMessageCarriesAtMostScmMaxFdDescriptors) {
  auto manager = Manager(/*max=*/300);
  StartReady(*manager, {"storemany=many=253", "storemany=more=254", "ready", "pause"});
  EXPECT_THAT(manager->Current().statuses,
              ElementsAre("storemany OK", "storemany INVALID_ARGUMENT"));
  EXPECT_EQ(manager->Current().stored_names.size(), 253u);
}

TEST(FdStoreTest, HungUpDescriptorsAreDropped) {
  auto manager = Manager();
  StartReady(*manager, {"storehup=peer", "store=kept=1", "ready", "pause"});
  EXPECT_THAT(manager->Current().stored_names, ElementsAre("kept"));
  EXPECT_EQ(manager->Current().dropped_hangup, 1u);
}

TEST(FdStoreTest, RestartKeepsTheStoreAndStopEmptiesIt) {
  auto manager = Manager();
  StartReady(*manager, {"store=s=kept", "ready", "pause"});
  ASSERT_TRUE(manager->Restart().ok());
  ASSERT_TRUE(manager->WaitReady().ok()) << "the restarted service sends nothing";
  // The restart's steps are the first start's: it stored "s" again, which
  // the manager kept beside the first.
  EXPECT_EQ(manager->Current().stored_names.size(), 2u);

  ASSERT_TRUE(manager->Stop().ok());
  EXPECT_THAT(manager->Current().stored_names, IsEmpty());
  StartReady(*manager, {"listen", "ready", "pause"});
  EXPECT_EQ(LastStatus(*manager), "listened ");
}

TEST(FdStoreTest, NoManagerMeansNoStoreAndNoListenedFds) {
  // This test process runs with neither (ctest starts it plainly).
  if (std::getenv("NOTIFY_SOCKET") == nullptr) {
    EXPECT_EQ(ServiceManagerStore(), nullptr);
  }
  if (std::getenv("LISTEN_FDS") == nullptr) {
    auto taken = TakeListenedFds();
    ASSERT_TRUE(taken.ok()) << taken.status();
    EXPECT_THAT(*taken, IsEmpty());
  }
}

}  // namespace
}  // namespace memd::durable
