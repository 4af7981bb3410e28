// Issue 28, target 3: memd tells a session when it frees a device buffer the
// session opened asking to hear of it (OpenRequest.notify_freed), so that
// libmemd lets go of the import it kept. The notices are packets on the
// session socket, so a client that asks for them and never reads must cost
// only itself: the notices stop at the session's in-flight bound (the rest
// are dropped), the daemon blocks on nothing, and everyone else is served.
// A session hears only of buffers it was granted, and a notice names only
// their ids.
//
// A real memd on the project's fake CUDA driver; this process plays the
// clients: a raw session that never reads, and libmemd clients around it.

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/session_codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/raw_session.h"

namespace memd {
namespace {

using ::testing::HasSubstr;
using test::RawSession;

constexpr int kInFlight = 8;
constexpr int kBuffers = 20;  // Freed while the raw session reads nothing.
constexpr std::uint64_t kSize = 64 * 1024;

class FreedNoticeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    auto daemon = test::DaemonProcess::Start(
        {"--backend", "cuda", "--cuda-driver", MEMD_FAKE_CUDA_PATH,
         "--max-fds-in-flight-per-session", std::to_string(kInFlight)});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    // libmemd here maps what it creates: the fake driver, loaded in this
    // process. It keeps no imports of its own.
    ::setenv("MEMD_CUDA_DRIVER", MEMD_FAKE_CUDA_PATH, 1);
    auto client = Client::Connect({.socket_dir = daemon_->socket_dir(), .device_cache_bytes = 0});
    ASSERT_TRUE(client.ok()) << client.status();
    others_ = std::move(*client);
  }

  void PublishDevice(const std::string& name) {
    auto made = others_->Create(name, kSize, {.location = "device:0"});
    ASSERT_TRUE(made.ok()) << made.status();
    ASSERT_TRUE(made->Seal().ok());
  }

  // Opens `name` read-only asking to hear when it is freed, takes the
  // descriptor and releases the lease. Returns the buffer's id.
  std::uint64_t OpenAndRelease(const RawSession& raw, const std::string& name) {
    v1::OpenRequest open;
    open.set_name(name);
    open.set_access(v1::READ);
    open.set_notify_freed(true);
    v1::Lease lease;
    grpc::Status opened = raw.Call(&v1::Memd::Stub::Open, open, &lease);
    EXPECT_TRUE(opened.ok()) << opened.error_message();
    EXPECT_TRUE(raw.TakeFd(lease.handle().fd_seq()).ok());
    v1::ReleaseRequest release;
    release.set_lease_id(lease.lease_id());
    v1::ReleaseReply released;
    EXPECT_TRUE(raw.Call(&v1::Memd::Stub::Release, release, &released).ok());
    return lease.buffer().id();
  }

  std::unique_ptr<test::DaemonProcess> daemon_;
  std::unique_ptr<Client> others_;
};

TEST_F(FreedNoticeTest, ASessionThatNeverReadsItsNoticesCostsOnlyItself) {
  RawSession mallory = RawSession::Open(daemon_->socket_dir());
  std::set<std::uint64_t> opened;
  for (int i = 0; i < kBuffers; ++i) {
    const std::string name = absl::StrCat("n/", i);
    ASSERT_NO_FATAL_FAILURE(PublishDevice(name));
    opened.insert(OpenAndRelease(mallory, name));
  }
  // A buffer she never opened: she must not hear of it.
  ASSERT_NO_FATAL_FAILURE(PublishDevice("private"));
  ASSERT_TRUE(others_->Unlink("private").ok());
  // Every one freed while she reads nothing: one notice each, up to her
  // bound; memd answers each unlink at once all the same.
  for (int i = 0; i < kBuffers; ++i) {
    ASSERT_TRUE(others_->Unlink(absl::StrCat("n/", i)).ok());
  }
  // Others are served as before.
  ASSERT_NO_FATAL_FAILURE(PublishDevice("still/served"));
  auto read = others_->Open("still/served");
  EXPECT_TRUE(read.ok()) << read.status();

  // Her own next descriptor is refused with the numbers: her socket is
  // full of what she did not read.
  v1::OpenRequest open;
  open.set_name("still/served");
  open.set_access(v1::READ);
  v1::Lease lease;
  grpc::Status refused = mallory.Call(&v1::Memd::Stub::Open, open, &lease);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr(absl::StrCat(kInFlight, " packets (descriptors, notices) it has not read")));

  // What waits in her socket: at most her bound of notices, naming only
  // buffers she opened.
  int notices = 0;
  for (;;) {
    auto packet = ReceivePacket(mallory.socket.get(), 4096, MSG_DONTWAIT);
    ASSERT_TRUE(packet.ok()) << packet.status();
    if (!packet->has_value()) break;
    auto message = DecodeSessionMessage((*packet)->bytes);
    ASSERT_TRUE(message.ok()) << message.status();
    const auto* freed = std::get_if<SessionFreed>(&*message);
    ASSERT_NE(freed, nullptr) << "only notices wait there";
    EXPECT_FALSE((*packet)->fd) << "a notice carries no descriptor";
    for (std::uint64_t id : freed->buffer_ids) EXPECT_TRUE(opened.contains(id)) << id;
    ++notices;
  }
  EXPECT_GE(notices, 1);
  EXPECT_LE(notices, kInFlight);

  // Once she reads, she is served again, and hears of what is freed next.
  grpc::Status served = mallory.Call(&v1::Memd::Stub::Open, open, &lease);
  EXPECT_TRUE(served.ok()) << served.error_message();
}

TEST_F(FreedNoticeTest, NoNoticeForAnOpenThatDidNotAskOrForAHostBuffer) {
  RawSession raw = RawSession::Open(daemon_->socket_dir());
  ASSERT_NO_FATAL_FAILURE(PublishDevice("quiet"));
  {
    auto host = others_->Create("host", kSize, {.location = "host"});
    ASSERT_TRUE(host.ok()) << host.status();
    ASSERT_TRUE(host->Seal().ok());
  }
  v1::OpenRequest open;
  open.set_name("quiet");
  open.set_access(v1::READ);  // notify_freed unset.
  v1::Lease lease;
  ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Open, open, &lease).ok());
  ASSERT_TRUE(raw.TakeFd(lease.handle().fd_seq()).ok());
  v1::ReleaseRequest release;
  release.set_lease_id(lease.lease_id());
  v1::ReleaseReply released;
  ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Release, release, &released).ok());
  ASSERT_NE(OpenAndRelease(raw, "host"), 0u);
  ASSERT_TRUE(others_->Unlink("quiet").ok());
  ASSERT_TRUE(others_->Unlink("host").ok());
  // A notice, had one been sent, was in the socket before Ping's reply.
  ASSERT_TRUE(others_->Ping().ok());
  auto packet = ReceivePacket(raw.socket.get(), 4096, MSG_DONTWAIT);
  ASSERT_TRUE(packet.ok()) << packet.status();
  EXPECT_FALSE(packet->has_value()) << "nothing was sent";
}

}  // namespace
}  // namespace memd
