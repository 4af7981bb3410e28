// Durable recovery (issue 23, docs/security.md "Recovery: what a restart
// must not give away"): memd killed with SIGKILL and started again under
// the stand-in for systemd (tests/support/service_manager.h) takes back its
// buffers with their owners, modes and names. A restart must not be a way
// in: another uid cannot read a private buffer afterwards, keep someone
// else's adopted buffer alive past the grace period, take its name during
// the grace period, or plant descriptors for the next memd to adopt.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/unix_socket.h"
#include "memd/client.h"
#include "tests/support/hostile.h"
#include "tests/support/poll_until.h"
#include "tests/support/raw_session.h"
#include "tests/support/run_program.h"
#include "tests/support/service_manager.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace memd {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using test::kAlice;
using test::kBob;
using test::kMallory;

// A program run in the background as another uid, its stdout on a pipe:
// a holder that prints one line, then waits to be killed.
class Background {
 public:
  Background(const std::string& program, const std::vector<std::string>& args,
             const std::string& socket_dir) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    out_ = out[0];
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      if (!absl::StartsWith(*entry, "MEMD_SOCKET_DIR=")) env.push_back(*entry);
    }
    env.push_back("MEMD_SOCKET_DIR=" + socket_dir);
    std::vector<std::string> argv_text = {program};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv, envp;
    for (std::string& arg : argv_text) argv.push_back(arg.data());
    argv.push_back(nullptr);
    for (std::string& entry : env) envp.push_back(entry.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    if (::posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(), envp.data()) !=
        0) {
      pid_ = -1;
    }
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
  }
  ~Background() {
    Kill();
    if (out_ >= 0) ::close(out_);
  }

  // Its output until it printed `line` or ended; whether it printed it.
  bool Said(const std::string& line) {
    for (;;) {
      if (absl::StrContains(output_, line + "\n")) return true;
      pollfd ready{out_, POLLIN, 0};
      if (::poll(&ready, 1, 30000) != 1) return false;  // A guard, not a timing.
      char chunk[256];
      const ssize_t got = ::read(out_, chunk, sizeof(chunk));
      if (got <= 0) return false;
      output_.append(chunk, got);
    }
  }
  const std::string& output() const { return output_; }

  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string output_;
};

class RecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::chmod(dir_.path().c_str(), 0755);  // mkdtemp made it 0700.
    socket_dir_ = dir_.Join("run");
    auto manager = test::ServiceManager::Create({.fd_store_max = 1024});
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
  }

  // memd on the host backend, its sockets open to the test users.
  void StartMemd(int grace_seconds = 3600, const std::vector<std::string>& more = {}) {
    std::vector<std::string> args = {"--socket-dir", socket_dir_, "--socket-mode", "0666",
                                     "--backend", "host", "--metrics-address", "",
                                     "--recovery-grace-seconds", std::to_string(grace_seconds)};
    args.insert(args.end(), more.begin(), more.end());
    ASSERT_TRUE(manager_->Start(test::BinDir() + "/memd", args).ok());
    absl::Status ready = manager_->WaitReady();
    ASSERT_TRUE(ready.ok()) << ready;
  }

  void KillMemd() {
    ASSERT_TRUE(manager_->Kill(SIGKILL).ok());
    ASSERT_TRUE(manager_->Wait().ok());
  }

  std::unique_ptr<Client> Connect() {
    auto client = Client::Connect({.socket_dir = socket_dir_});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  test::ProgramResult Hostile(uid_t uid, const std::vector<std::string>& args) {
    return test::RunHostile(uid, socket_dir_, args);
  }

  // memd-test-client --uid UID ARGS... in the background.
  std::unique_ptr<Background> Holder(uid_t uid, std::vector<std::string> args) {
    args.insert(args.begin(), {"--uid", std::to_string(uid)});
    return std::make_unique<Background>(test::BinDir() + "/memd-test-client", args,
                                        socket_dir_);
  }
  std::unique_ptr<Background> Claimer(uid_t uid, const std::string& name) {
    return std::make_unique<Background>(
        test::BinDir() + "/memd-hostile",
        std::vector<std::string>{"--uid", std::to_string(uid), "claim", name}, socket_dir_);
  }

  bool Exists(Client& client, const std::string& name) { return client.Stat(name).ok(); }

  test::TempDir dir_;
  std::string socket_dir_;
  std::unique_ptr<test::ServiceManager> manager_;
};

TEST_F(RecoveryTest, APrivateBufferStaysItsOwnersAfterARestart) {
  StartMemd();
  test::ProgramResult published =
      Hostile(kAlice, {"publish_text", "alice/secret", "the launch codes", "600"});
  ASSERT_EQ(published.exit_code, 0) << published.out << published.err;
  KillMemd();
  StartMemd();
  // Owner and mode came back with the bytes: Mallory still may not read.
  test::ProgramResult stolen = Hostile(kMallory, {"read_text", "alice/secret", "0"});
  EXPECT_NE(stolen.exit_code, 0);
  EXPECT_THAT(stolen.out, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(stolen.out, Not(HasSubstr("launch")));
  test::ProgramResult claimed = Hostile(kMallory, {"claim", "alice/secret"});
  EXPECT_THAT(claimed.out, HasSubstr("PERMISSION_DENIED"));
  test::ProgramResult read = Hostile(kAlice, {"read_text", "alice/secret", "0"});
  EXPECT_EQ(read.exit_code, 0) << read.out << read.err;
  EXPECT_THAT(read.out, HasSubstr("read: the launch codes"));
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto info = client->Stat("alice/secret");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->owner_uid, kAlice);
  EXPECT_EQ(info->owner_gid, kAlice);
  EXPECT_EQ(info->mode, 0600u);
}

TEST_F(RecoveryTest, OnlyAUserTheModeLetsInKeepsAnAdoptedBufferPastTheGracePeriod) {
  StartMemd();
  // Alice's writers die with memd: two unsealed buffers, one private, one
  // others may write (0666), and an ephemeral one (hold's "NAME.mine").
  ASSERT_EQ(Hostile(kAlice, {"publish_text", "alice/pub", "public", "644"}).exit_code, 0);
  auto private_writer = Holder(kAlice, {"create-hold", "alice/private", "4096"});
  auto open_writer = Holder(kAlice, {"create-hold", "alice/open", "4096", "666"});
  auto ephemeral = Holder(kAlice, {"hold", "alice/pub"});
  ASSERT_TRUE(private_writer->Said("held")) << private_writer->output();
  ASSERT_TRUE(open_writer->Said("held")) << open_writer->output();
  ASSERT_TRUE(ephemeral->Said("held")) << ephemeral->output();
  KillMemd();
  private_writer->Kill();
  open_writer->Kill();
  ephemeral->Kill();
  StartMemd(3);
  // During the grace period: Mallory may not claim what the mode keeps
  // from her; Bob may claim what the mode gives everyone.
  test::ProgramResult denied = Hostile(kMallory, {"claim", "alice/private"});
  EXPECT_THAT(denied.out, Not(HasSubstr("held")));
  // Refused for who she is (or gone already), not for want of a daemon.
  EXPECT_THAT(denied.out, AnyOf(HasSubstr("PERMISSION_DENIED"), HasSubstr("NOT_FOUND")));
  test::ProgramResult denied_ephemeral = Hostile(kMallory, {"claim", "alice/pub.mine"});
  EXPECT_THAT(denied_ephemeral.out, Not(HasSubstr("held")));
  EXPECT_THAT(denied_ephemeral.out,
              AnyOf(HasSubstr("PERMISSION_DENIED"), HasSubstr("NOT_FOUND")));
  auto bob = Claimer(kBob, "alice/open");
  ASSERT_TRUE(bob->Said("held")) << bob->output() << " (the grace period ended first?)";
  // Mallory tries again, holding on to whatever she gets.
  auto mallory = Claimer(kMallory, "alice/private");
  auto mallory_ephemeral = Claimer(kMallory, "alice/pub.mine");
  EXPECT_FALSE(mallory->Said("held")) << mallory->output();
  EXPECT_FALSE(mallory_ephemeral->Said("held")) << mallory_ephemeral->output();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(test::PollUntil([&] {
    return !Exists(*client, "alice/private") && !Exists(*client, "alice/pub.mine");
  })) << "an adopted buffer outlived its grace period";
  // What Bob legitimately re-claimed stays while he holds it; the sealed
  // persistent buffer needs nobody.
  EXPECT_TRUE(Exists(*client, "alice/open"));
  EXPECT_TRUE(Exists(*client, "alice/pub"));
  bob->Kill();
  EXPECT_TRUE(test::PollUntil([&] { return !Exists(*client, "alice/open"); }));
}

TEST_F(RecoveryTest, AnotherUidCannotReclaimALeaseEvenWithItsTokenAndId) {
  StartMemd();
  // Root's writer: an unsealed buffer, its lease recorded with its token.
  test::RawSession writer = test::RawSession::Open(socket_dir_);
  v1::CreateRequest create;
  create.set_name("root/wip");
  create.set_size_bytes(4096);
  create.set_mode(0666);  // Even a buffer Mallory may write.
  v1::Lease lease;
  ASSERT_TRUE(writer.Call(&v1::Memd::Stub::Create, create, &lease).ok());
  const std::string lease_id = std::to_string(lease.lease_id());
  KillMemd();
  StartMemd();
  // Mallory learned the token and the id (a leaked log, say): a session of
  // her uid gets nothing, told no more than for a made-up id.
  test::ProgramResult stolen = Hostile(kMallory, {"reclaim", writer.token, lease_id});
  EXPECT_EQ(stolen.exit_code, 0) << stolen.out << stolen.err;
  EXPECT_EQ(stolen.out, "reclaimed 0 NOT_FOUND\n");
  test::ProgramResult guessed = Hostile(kMallory, {"reclaim", writer.token, "12345"});
  EXPECT_EQ(guessed.out, "reclaimed 0 NOT_FOUND\n");
  // Nor did her try spend it: root's writer takes it back.
  test::RawSession again = test::RawSession::Open(socket_dir_);
  v1::ReclaimRequest request;
  request.set_previous_token(writer.token);
  request.add_lease_ids(lease.lease_id());
  v1::ReclaimReply reply;
  ASSERT_TRUE(again.Call(&v1::Memd::Stub::Reclaim, request, &reply).ok());
  EXPECT_EQ(reply.reclaimed_size(), 1);
  // A flood of ids is bounded like the leases a session may hold.
  std::vector<std::string> flood = {"reclaim", writer.token};
  for (int i = 0; i < 70000; ++i) flood.push_back(std::to_string(i + 1));
  test::ProgramResult flooded = Hostile(kMallory, flood);
  EXPECT_THAT(flooded.out, HasSubstr("INVALID_ARGUMENT"));
}

TEST_F(RecoveryTest, OneUidCannotFillTheDescriptorStoreForEveryoneElse) {
  // A store of 7, as a node's is bounded (FileDescriptorStoreMax=): the
  // state file (two while one replaces the other), Mallory's share and
  // Alice's segment fit; Mallory's six would fill it, and the store would
  // drop Alice's. Each 2 MiB buffer is a segment of its own; Mallory may
  // keep 3, whatever she makes.
  auto small_store = test::ServiceManager::Create({.fd_store_max = 7});
  ASSERT_TRUE(small_store.ok()) << small_store.status();
  manager_ = std::move(*small_store);
  const std::vector<std::string> cap = {"--durable-segments-per-uid", "3"};
  StartMemd(3600, cap);
  test::ProgramResult filled = Hostile(kMallory, {"fill_buffers", "mallory/big", "2097152", "6"});
  ASSERT_THAT(filled.out, HasSubstr("buffers 6")) << filled.err;
  test::ProgramResult published =
      Hostile(kAlice, {"publish_text", "alice/notes", "still here", "600"});
  ASSERT_EQ(published.exit_code, 0) << published.out << published.err;
  KillMemd();
  StartMemd(3600, cap);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  int kept = 0;
  for (int i = 0; i < 6; ++i) kept += Exists(*client, "mallory/big/" + std::to_string(i));
  EXPECT_EQ(kept, 3) << "Mallory's segments past her share were kept, or hers were not";
  test::ProgramResult read = Hostile(kAlice, {"read_text", "alice/notes", "0"});
  EXPECT_THAT(read.out, HasSubstr("read: still here")) << read.err;
}

TEST_F(RecoveryTest, AnAdoptedBuffersNameStaysItsOwnersThroughTheGracePeriod) {
  StartMemd();
  auto writer = Holder(kAlice, {"create-hold", "alice/draft", "4096"});
  ASSERT_TRUE(writer->Said("held")) << writer->output();
  KillMemd();
  writer->Kill();
  StartMemd();  // A grace period of an hour: the name is Alice's all along.
  test::ProgramResult taken =
      Hostile(kMallory, {"publish_text", "alice/draft", "forged", "644"});
  EXPECT_NE(taken.exit_code, 0);
  EXPECT_THAT(taken.out, HasSubstr("ALREADY_EXISTS"));
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto info = client->Stat("alice/draft");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->owner_uid, kAlice);
  EXPECT_EQ(info->state, BufferState::kCreating);
  // Once the buffer goes (its owner unlinks it), the name is free again.
  test::ProgramResult unlinked = test::RunProgram(
      test::BinDir() + "/memd-test-client",
      {"--uid", std::to_string(kAlice), "unlink", "alice/draft"}, "",
      {{"MEMD_SOCKET_DIR", socket_dir_}});
  ASSERT_EQ(unlinked.exit_code, 0) << unlinked.out << unlinked.err;
  test::ProgramResult published =
      Hostile(kMallory, {"publish_text", "alice/draft", "now mine", "644"});
  EXPECT_EQ(published.exit_code, 0) << published.out << published.err;
}

TEST_F(RecoveryTest, DescriptorsAClientPlantsInTheStoreAreNeverAdopted) {
  StartMemd();
  ASSERT_EQ(Hostile(kAlice, {"publish_text", "alice/real", "real bytes", "644"}).exit_code, 0);
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto before = client->List();
  ASSERT_TRUE(before.ok());
  client.reset();
  const test::ServiceManager::Snapshot was = manager_->Current();
  // A process that is not memd's main pid (a client of memd, as root even)
  // sends FDSTORE=1 with a state memfd of an epoch newer than any memd
  // wrote, and a segment, to the notify socket.
  const std::string notify = manager_->notify_socket();
  test::ChildResult planted = test::ForkAs(0, 0, [&](int out) {
    const int state = ::memfd_create("memd.state.999", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    const int segment = ::memfd_create("memd.segment.999", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (state < 0 || segment < 0 || ::ftruncate(state, 4096) != 0 ||
        ::ftruncate(segment, 2 << 20) != 0) {
      return 3;
    }
    const char header[] = "memd state, trust me";
    (void)!::pwrite(state, header, sizeof(header), 0);
    auto sock = ConnectUnix(notify, SOCK_DGRAM);
    if (!sock.ok()) return 4;
    int sent = 0;
    for (const auto& [fd, name] : {std::pair{state, "memd.state.999"},
                                   std::pair{segment, "memd.segment.999"}}) {
      const std::string text = absl::StrCat("FDSTORE=1\nFDNAME=", name, "\n");
      if (SendPacket(sock->get(), text, fd).ok()) ++sent;
    }
    test::WriteAll(out, absl::StrCat("sent ", sent));
    return 0;
  });
  ASSERT_EQ(planted.exit_code, 0);
  ASSERT_EQ(planted.out, "sent 2");  // The socket took them: the manager must refuse.
  ASSERT_TRUE(manager_->WaitFor([&](const test::ServiceManager::Snapshot& now) {
    return now.foreign_messages >= was.foreign_messages + 2;
  }));
  for (const std::string& name : manager_->Current().stored_names) {
    EXPECT_THAT(name, Not(HasSubstr("999")));
  }
  KillMemd();
  StartMemd();
  // The next memd finds only what memd stored: the same buffers, nothing
  // planted.
  client = Connect();
  ASSERT_NE(client, nullptr);
  auto after = client->List();
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), before->size());
  EXPECT_EQ((*after)[0].id, (*before)[0].id);
  test::ProgramResult read = Hostile(kBob, {"read_text", "alice/real", "0"});
  EXPECT_THAT(read.out, HasSubstr("read: real bytes"));
  for (const std::string& name : manager_->Current().stored_names) {
    EXPECT_THAT(name, Not(HasSubstr("999")));
  }
}

}  // namespace
}  // namespace memd
