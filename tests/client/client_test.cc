// libmemd against a real daemon started in this process (the daemon's own
// code runs here too, so the sanitizer build checks both sides).

#include "memd/client.h"

#include <unistd.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/paths.h"
#include "daemon/daemon.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "memd/v1/memd.grpc.pb.h"
#include "tests/client/in_process_daemon.h"
#include "tests/client/pattern.h"
#include "tests/support/poll_until.h"
#include "tests/support/raw_session.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;

class ClientTest : public test::InProcessDaemonTest {
 protected:
  void SetUp() override {
    config_.max_buffer_bytes = 64 * kMiB;
    config_.host_pool_limit_bytes = 256 * kMiB;
    StartDaemon();
  }

  // A raw stub on the control socket, for calls libmemd would never make.
  std::unique_ptr<v1::Memd::Stub> RawStub() {
    return v1::Memd::NewStub(grpc::CreateChannel(
        "unix:" + ControlSocketPath(config_.socket_dir),
        grpc::InsecureChannelCredentials()));
  }

  test::RawSession OpenRawSession() {
    return test::RawSession::Open(config_.socket_dir);
  }
};

TEST_F(ClientTest, CreateWriteSealThenOpenReadsTheSameBytes) {
  Publish("frames/0", 3 * kMiB + 5, 7);
  auto other = Connect();
  auto buffer = other->Open("frames/0");
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->size(), 3 * kMiB + 5);
  EXPECT_EQ(buffer->data().size(), 3 * kMiB + 5);
  EXPECT_FALSE(buffer->writable());
  EXPECT_TRUE(buffer->mutable_data().empty());
  EXPECT_EQ(buffer->info().state, BufferState::kSealed);
  EXPECT_TRUE(test::MatchesPattern(buffer->data(), 7));
}

// What a producer says about its bytes reaches every reader with the
// buffer: Open, Stat and List; attributes out of bounds are refused whole.
TEST_F(ClientTest, AttributesSetAtCreateReachEveryReader) {
  const std::map<std::string, std::string> attrs = {
      {"dtype", "float16"}, {"shape", "64,32"}, {"layout", "row-major"}};
  auto buffer = client_->Create("typed", 4096, {.attrs = attrs});
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(buffer->info().attrs, attrs);
  ASSERT_TRUE(buffer->Seal().ok());

  std::unique_ptr<Client> reader = Connect();
  auto opened = reader->Open("typed");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(opened->info().attrs, attrs);
  auto stat = reader->Stat("typed");
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->attrs, attrs);
  auto list = reader->List("typ");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().attrs, attrs);

  auto bad = client_->Create("bad", 4096, {.attrs = {{"shape", "1\n2"}}});
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_THAT(std::string(bad.status().message()),
              AllOf(HasSubstr("'bad'"), HasSubstr("'shape'"), HasSubstr("printable")));
  EXPECT_TRUE(absl::IsNotFound(client_->Stat("bad").status())) << "refused whole";
}

TEST_F(ClientTest, OpeningTheSameBufferTwiceMapsItOnce) {
  Publish("a", kMiB, 1);
  auto first = client_->Open("a");
  auto second = client_->Open("a");
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE(first->lease_id(), second->lease_id());
  EXPECT_EQ(first->data().data(), second->data().data());
  ASSERT_TRUE(first->Release().ok());
  // The mapping lives on with the second lease.
  EXPECT_TRUE(test::MatchesPattern(second->data(), 1));
  EXPECT_EQ(client_->Stat("a")->lease_count, 1u);
}

TEST_F(ClientTest, ReopeningAReleasedBufferReusesItsMapping) {
  Publish("a", kMiB, 1);
  Publish("b", kMiB, 2);
  const std::byte* first;
  {
    auto buffer = client_->Open("a");
    ASSERT_TRUE(buffer.ok());
    first = buffer->data().data();
  }
  EXPECT_EQ(client_->Stat("a")->lease_count, 0u);  // Released for real.
  auto other = client_->Open("b");  // A new mapping elsewhere meanwhile.
  ASSERT_TRUE(other.ok());
  auto again = client_->Open("a");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data().data(), first);
  EXPECT_TRUE(test::MatchesPattern(again->data(), 1));
  EXPECT_TRUE(test::MatchesPattern(other->data(), 2));
}

// Resident bytes of this process's mapping that starts at `address`, from
// /proc/self/smaps (counts pages mapped here, not pages that merely exist).
std::uint64_t MappedResidentBytes(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const std::string start = absl::StrCat(absl::Hex(reinterpret_cast<std::uintptr_t>(address)));
  bool in_mapping = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.find('-') != std::string::npos && line.find(' ') > line.find('-') &&
        !absl::StartsWith(line, "Rss") && std::isxdigit(line[0])) {
      in_mapping = absl::StartsWith(line, start + "-");
    }
    if (in_mapping && absl::StartsWith(line, "Rss:")) {
      std::uint64_t kib = 0;
      std::istringstream(line.substr(4)) >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

TEST_F(ClientTest, PopulateMapsEveryPageUpFront) {
  auto lazy = client_->Create("lazy", 4 * kMiB);
  auto eager = client_->Create("eager", 4 * kMiB, {.populate = true});
  ASSERT_TRUE(lazy.ok() && eager.ok());
  EXPECT_EQ(MappedResidentBytes(eager->data().data()), 4 * kMiB);
  EXPECT_EQ(MappedResidentBytes(lazy->data().data()), 0u);
}

TEST_F(ClientTest, ANameBoundToANewBufferIsMappedAfresh) {
  Publish("a", kMiB, 1);
  { ASSERT_TRUE(client_->Open("a").ok()); }  // Leaves a cached mapping.
  ASSERT_TRUE(client_->Unlink("a").ok());
  Publish("a", kMiB, 2);  // Same name, same size, new memory.
  auto buffer = client_->Open("a");
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_TRUE(test::MatchesPattern(buffer->data(), 2));
}

TEST_F(ClientTest, DaemonSendsNoDescriptorForABufferTheClientMaps) {
  Publish("a", 4096, 1);
  Publish("b", 4096, 2);
  test::RawSession raw = OpenRawSession();
  v1::OpenRequest open;
  open.set_name("a");
  v1::Lease first;
  ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Open, open, &first).ok());
  EXPECT_NE(first.handle().fd_seq(), 0u);

  open.set_mapped_buffer_id(first.buffer().id());
  v1::Lease again;
  ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Open, open, &again).ok());
  EXPECT_EQ(again.handle().fd_seq(), 0u);
  EXPECT_NE(again.lease_id(), first.lease_id());  // Still a lease of its own.

  // An id that is not the name's buffer gets a descriptor as usual.
  open.set_name("b");
  v1::Lease other;
  ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Open, open, &other).ok());
  EXPECT_NE(other.handle().fd_seq(), 0u);
  EXPECT_EQ(client_->Stat("a")->lease_count, 2u);
}

TEST_F(ClientTest, WriterSeesItsOwnWritesThroughAReadOpenAfterSeal) {
  auto writer = client_->Create("w", 16);
  ASSERT_TRUE(writer.ok());
  std::memcpy(writer->mutable_data().data(), "0123456789abcdef", 16);
  ASSERT_TRUE(writer->Seal().ok());
  EXPECT_EQ(writer->info().state, BufferState::kSealed);
  auto reader = client_->Open("w");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(std::memcmp(reader->data().data(), "0123456789abcdef", 16), 0);
}

TEST_F(ClientTest, DestroyingTheBufferReleasesItsLease) {
  Publish("a", 4096, 1);
  {
    auto buffer = client_->Open("a");
    ASSERT_TRUE(buffer.ok());
    EXPECT_EQ(client_->Stats()->leases, 1u);
  }
  EXPECT_EQ(client_->Stats()->leases, 0u);
}

TEST_F(ClientTest, ReleasingTwiceIsFailedPreconditionLocallyAndNotFoundRemotely) {
  Publish("a", 4096, 1);
  auto buffer = client_->Open("a");
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE(buffer->Release().ok());
  EXPECT_EQ(buffer->Release().code(), absl::StatusCode::kFailedPrecondition);

  // The daemon's answer to a lease released twice, asked directly.
  test::RawSession raw = OpenRawSession();
  v1::Lease lease;
  v1::OpenRequest open;
  open.set_name("a");
  ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Open, open, &lease).ok());
  v1::ReleaseRequest release;
  release.set_lease_id(lease.lease_id());
  v1::ReleaseReply reply;
  ASSERT_TRUE(raw.Call(&v1::Memd::Stub::Release, release, &reply).ok());
  grpc::Status twice = raw.Call(&v1::Memd::Stub::Release, release, &reply);
  EXPECT_EQ(twice.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(twice.error_message(), HasSubstr("released already"));
}

TEST_F(ClientTest, MissingTokenIsUnauthenticated) {
  grpc::ClientContext context;
  v1::ListRequest request;
  v1::ListReply reply;
  grpc::Status status = RawStub()->List(&context, request, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(status.error_message(), HasSubstr("no 'memd-session' token"));
}

TEST_F(ClientTest, ForgedTokenIsUnauthenticated) {
  grpc::ClientContext context;
  context.AddMetadata("memd-session", "00112233445566778899aabbccddeeff");
  v1::ListRequest request;
  v1::ListReply reply;
  grpc::Status status = RawStub()->List(&context, request, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown"));
}

TEST_F(ClientTest, TokenOfAnEndedSessionIsUnauthenticated) {
  test::RawSession raw = OpenRawSession();
  raw.socket.reset();  // Hang up: the daemon ends the session.
  grpc::Status status;
  test::PollUntil([&] {
    v1::StatsReply reply;
    status = raw.Call(&v1::Memd::Stub::Stats, v1::StatsRequest(), &reply);
    return !status.ok();
  });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(ClientTest, PingNeedsNoSession) {
  grpc::ClientContext context;
  v1::PingRequest request;
  request.set_payload("echo");
  v1::PingReply reply;
  ASSERT_TRUE(RawStub()->Ping(&context, request, &reply).ok());
  EXPECT_EQ(reply.payload(), "echo");
  EXPECT_TRUE(client_->Ping().ok());
}

TEST_F(ClientTest, ValuesOnlyAHandMadeRequestCanCarryAreInvalidArgument) {
  test::RawSession raw = OpenRawSession();
  v1::Lease lease;

  v1::OpenRequest too_long;
  too_long.set_name("a");
  too_long.set_wait_timeout_ms(25ull * 3600 * 1000);
  grpc::Status status = raw.Call(&v1::Memd::Stub::Open, too_long, &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("90000000"));

  v1::OpenRequest bad_access;
  bad_access.set_name("a");
  bad_access.set_access(static_cast<v1::Access>(7));
  status = raw.Call(&v1::Memd::Stub::Open, bad_access, &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown access 7"));

  v1::CreateRequest bad_persistence;
  bad_persistence.set_name("a");
  bad_persistence.set_size_bytes(1);
  bad_persistence.set_persistence(static_cast<v1::Persistence>(9));
  status = raw.Call(&v1::Memd::Stub::Create, bad_persistence, &lease);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown persistence 9"));

  v1::SealRequest seal;
  seal.set_lease_id(123456);
  v1::SealReply sealed;
  status = raw.Call(&v1::Memd::Stub::Seal, seal, &sealed);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("lease 123456"));
}

TEST_F(ClientTest, EveryBadInputGetsTheMatchingCodeAndAReason) {
  struct Case {
    const char* what;
    absl::Status status;
    absl::StatusCode code;
    const char* reason;
  };
  Publish("exists", 4096, 1);
  auto unsealed = client_->Create("wip", 4096);
  ASSERT_TRUE(unsealed.ok());
  std::vector<Case> cases = {
      {"empty name", client_->Create("", 1).status(),
       absl::StatusCode::kInvalidArgument, "empty"},
      {"long name", client_->Create(std::string(256, 'a'), 1).status(),
       absl::StatusCode::kInvalidArgument, "256 bytes"},
      {"bad byte", client_->Create("a b", 1).status(),
       absl::StatusCode::kInvalidArgument, "[A-Za-z0-9._/-]"},
      {"dot dot", client_->Create("a/../b", 1).status(),
       absl::StatusCode::kInvalidArgument, "'..'"},
      {"size 0", client_->Create("z", 0).status(),
       absl::StatusCode::kInvalidArgument, "size is 0"},
      {"too big", client_->Create("big", 64 * kMiB + 1).status(),
       absl::StatusCode::kInvalidArgument, "67108865"},
      {"bad mode", client_->Create("m", 1, {.mode = 01777}).status(),
       absl::StatusCode::kInvalidArgument, "01777"},
      {"bad location", client_->Create("l", 1, {.location = "gpu"}).status(),
       absl::StatusCode::kInvalidArgument, "unknown location 'gpu'"},
      {"absent device", client_->Create("d", 1, {.location = "device:0"}).status(),
       absl::StatusCode::kInvalidArgument, "device:0 is not available"},
      {"unknown name", client_->Open("nope").status(),
       absl::StatusCode::kNotFound, "no buffer named 'nope'"},
      {"unknown stat", client_->Stat("nope").status(),
       absl::StatusCode::kNotFound, "'nope'"},
      {"unknown unlink", client_->Unlink("nope"),
       absl::StatusCode::kNotFound, "'nope'"},
      {"name exists", client_->Create("exists", 1).status(),
       absl::StatusCode::kAlreadyExists, "'exists' already exists"},
      {"not sealed", client_->Open("wip").status(),
       absl::StatusCode::kFailedPrecondition, "not sealed"},
      {"write sealed", client_->Open("exists", {.access = Access::kReadWrite}).status(),
       absl::StatusCode::kFailedPrecondition, "read-only"},
      {"bad prefix", client_->List("a b").status(),
       absl::StatusCode::kInvalidArgument, "prefix"},
      {"size mismatch", client_->OpenOrCreate("exists", 99).status(),
       absl::StatusCode::kFailedPrecondition, "exists with size 4096"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), c.code) << c.what << ": " << c.status;
    EXPECT_THAT(std::string(c.status.message()), HasSubstr(c.reason)) << c.what;
  }
  // None of it left anything behind.
  EXPECT_EQ(client_->Stats()->buffers, 2u);
}

TEST_F(ClientTest, CallsAfterUnlink) {
  auto buffer = client_->Create("gone", 4096);
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE(client_->Unlink("gone").ok());
  EXPECT_EQ(client_->Open("gone").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Stat("gone").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Unlink("gone").code(), absl::StatusCode::kNotFound);
  absl::Status sealed = buffer->Seal();
  EXPECT_EQ(sealed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(sealed.message()), HasSubstr("unlinked"));
  // The memory is still ours until we let go.
  std::memset(buffer->mutable_data().data(), 1, 4096);
  EXPECT_TRUE(buffer->Release().ok());
  EXPECT_EQ(client_->Stats()->buffers, 0u);
}

// An unlink that names the buffer it means (memctl unlink -r: the ids it
// listed and had confirmed) leaves alone a buffer re-created under the name.
TEST_F(ClientTest, UnlinkOfAnExpectedIdLeavesABufferReCreatedUnderTheName) {
  auto first = client_->Create("again", 4096);
  ASSERT_TRUE(first.ok());
  const std::uint64_t listed = client_->Stat("again")->id;
  ASSERT_TRUE(client_->Unlink("again").ok());
  ASSERT_TRUE(first->Release().ok());
  auto second = client_->Create("again", 4096);
  ASSERT_TRUE(second.ok());
  const std::uint64_t now = client_->Stat("again")->id;
  ASSERT_NE(now, listed);
  absl::Status stale = client_->Unlink("again", listed);
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition) << stale;
  EXPECT_THAT(std::string(stale.message()), HasSubstr("re-created"));
  EXPECT_TRUE(client_->Stat("again").ok()) << "the new buffer was unlinked";
  EXPECT_TRUE(client_->Unlink("again", now).ok());
  EXPECT_EQ(client_->Stat("again").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(second->Release().ok());
}

TEST_F(ClientTest, OpenWaitsForTheSeal) {
  auto writer = client_->Create("slow", 64);
  ASSERT_TRUE(writer.ok());
  absl::Notification opened;
  absl::StatusOr<Buffer> waited;
  std::thread reader([&] {
    auto other = Connect();
    waited = other->Open("slow", {.wait = absl::Seconds(30)});
    opened.Notify();
  });
  // The reader cannot finish before the seal, however long it runs.
  EXPECT_FALSE(opened.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  test::FillPattern(writer->mutable_data(), 9);
  ASSERT_TRUE(writer->Seal().ok());
  reader.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_TRUE(test::MatchesPattern(waited->data(), 9));
}

TEST_F(ClientTest, OpenWaitsForANameThatDoesNotExistYet) {
  absl::StatusOr<Buffer> waited;
  std::thread reader([&] {
    auto other = Connect();
    waited = other->Open("future", {.wait = absl::Seconds(30)});
  });
  Publish("future", 100, 3);
  reader.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_TRUE(test::MatchesPattern(waited->data(), 3));
}

TEST_F(ClientTest, OpenWaitEndsWithDeadlineExceeded) {
  auto waited = client_->Open("never", {.wait = absl::Milliseconds(50)});
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(waited.status().message()), HasSubstr("'never'"));
  // The daemon forgot the wait: the session can wait again at once.
  EXPECT_EQ(client_->Open("never", {.wait = absl::Milliseconds(1)}).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(ClientTest, OpenOrCreateCreatesForOneAndWaitsForTheOther) {
  auto first = client_->OpenOrCreate("shared", 128);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->created());
  EXPECT_TRUE(first->writable());
  absl::StatusOr<Buffer> second;
  std::thread other([&] {
    auto client = Connect();
    second = client->OpenOrCreate("shared", 128, {}, absl::Seconds(30));
  });
  test::FillPattern(first->mutable_data(), 5);
  ASSERT_TRUE(first->Seal().ok());
  other.join();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->created());
  EXPECT_TRUE(test::MatchesPattern(second->data(), 5));
}

// The host pool of a Stats() answer.
PoolStats HostPool(Client& client) {
  auto stats = client.Stats();
  EXPECT_TRUE(stats.ok()) << stats.status();
  for (const auto& pool : stats->pools) {
    if (pool.location == "host") return pool;
  }
  ADD_FAILURE() << "no host pool";
  return {};
}

TEST_F(ClientTest, ReleasedMemoryIsReusedAndCountedAsAHit) {
  for (int i = 0; i < 3; ++i) {
    auto buffer = client_->Create("tmp", 4 * kMiB,
                                  {.persistence = Persistence::kEphemeral});
    ASSERT_TRUE(buffer.ok()) << buffer.status();
  }
  PoolStats host = HostPool(*client_);
  EXPECT_EQ(host.miss_count, 1u);
  EXPECT_EQ(host.hit_count, 2u);
  EXPECT_EQ(host.used_bytes, 0u);
  EXPECT_EQ(host.reserved_bytes, 4 * kMiB);
  EXPECT_EQ(host.peak_used_bytes, 4 * kMiB);
  EXPECT_EQ(host.largest_free_block_bytes, 4 * kMiB);
  EXPECT_EQ(host.fragmentation, 0.0);
}

TEST_F(ClientTest, SmallBuffersShareASegmentAndComeFromSizeClasses) {
  std::vector<Buffer> held;
  for (int i = 0; i < 10; ++i) {
    auto buffer = client_->Create("small/" + std::to_string(i), 10000);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    held.push_back(std::move(*buffer));
  }
  PoolStats host = HostPool(*client_);
  EXPECT_EQ(host.segments, 1u);
  EXPECT_EQ(host.used_bytes, 10u * 12288);  // The 12 KiB class.
  ASSERT_GT(host.size_classes.size(), 2u);
  EXPECT_EQ(host.size_classes[2].bytes, 12288u);
  EXPECT_EQ(host.size_classes[2].allocations, 10u);
  // Each buffer still reads and writes only its own bytes.
  for (int i = 0; i < 10; ++i) {
    std::memset(held[i].mutable_data().data(), i, 10000);
  }
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(held[i].data()[9999], static_cast<std::byte>(i));
  }
}

TEST_F(ClientTest, TrimGivesIdleMemoryBack) {
  {
    auto buffer = client_->Create("tmp", 4 * kMiB,
                                  {.persistence = Persistence::kEphemeral});
    ASSERT_TRUE(buffer.ok());
  }
  EXPECT_EQ(HostPool(*client_).reserved_bytes, 4 * kMiB);
  auto trimmed = client_->Trim("host");
  ASSERT_TRUE(trimmed.ok()) << trimmed.status();
  ASSERT_EQ(trimmed->size(), 1u);
  EXPECT_EQ((*trimmed)[0].location, "host");
  EXPECT_EQ((*trimmed)[0].released_bytes, 4 * kMiB);
  PoolStats host = HostPool(*client_);
  EXPECT_EQ(host.reserved_bytes, 0u);
  EXPECT_EQ(host.trimmed_bytes, 4 * kMiB);
  auto all = client_->Trim();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);  // host and pinned.
  EXPECT_EQ(client_->Trim("device:3").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Trim("gpu").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, ListStatStatsAndSessionsDescribeTheDaemon) {
  Publish("job/a", 10, 1);
  Publish("job/b", 20, 2);
  Publish("other", 30, 3);
  auto listed = client_->List("job/");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name, "job/a");
  EXPECT_EQ((*listed)[1].size, 20u);
  auto info = client_->Stat("other");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->owner_uid, ::geteuid());
  EXPECT_EQ(info->mode, 0600u);
  EXPECT_EQ(info->location, "host");
  EXPECT_TRUE(info->sealed.has_value());

  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->backend, "host");
  EXPECT_EQ(stats->buffers, 3u);
  EXPECT_EQ(stats->sessions, 1u);
  EXPECT_FALSE(stats->version.empty());

  auto sessions = client_->Sessions();
  ASSERT_TRUE(sessions.ok());
  ASSERT_EQ(sessions->size(), 1u);
  EXPECT_EQ((*sessions)[0].pid, ::getpid());
  EXPECT_EQ((*sessions)[0].id, client_->session_id());
}

TEST_F(ClientTest, ClientDisconnectReleasesItsLeases) {
  Publish("a", 4096, 1);
  {
    auto other = Connect();
    auto buffer = other->Open("a");
    ASSERT_TRUE(buffer.ok());
    EXPECT_EQ(client_->Stat("a")->lease_count, 1u);
    // The Buffer outlives its Client here; the session ends with the Client
    // only once both are gone.
  }
  // Session end is noticed by the daemon's session thread: wait for it
  // (the lease may go first, released by the Buffer's own destructor).
  EXPECT_TRUE(test::PollUntil([&] {
    return client_->Stat("a")->lease_count == 0 && client_->Stats()->sessions == 1;
  }));
}

TEST_F(ClientTest, ClientSurvivesADaemonRestart) {
  Publish("a", 4096, 1);
  auto held = client_->Open("a");
  ASSERT_TRUE(held.ok());
  daemon_->Shutdown();
  daemon_.reset();
  EXPECT_EQ(client_->Stats().status().code(), absl::StatusCode::kUnavailable);
  StartDaemon(/*connect=*/false);  // The old client comes back by itself.
  // A new session, the old buffer gone with the old daemon, the old mapping
  // still readable, and releasing the old lease is harmless.
  auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_NE(client_->session_id(), 0u);
  EXPECT_EQ(stats->buffers, 0u);
  EXPECT_TRUE(test::MatchesPattern(held->data(), 1));
  EXPECT_TRUE(held->Release().ok());
  EXPECT_TRUE(client_->Create("b", 10).ok());
}

// An open over the session socket goes on the connection it has without
// asking first whether memd hung up (a poll an open). After a restart the
// old socket takes no call, and the open goes on a new session.
TEST_F(ClientTest, TheFirstOpenAfterARestartGoesOnANewSession) {
  daemon_->Shutdown();
  daemon_.reset();
  StartDaemon(/*connect=*/false);
  std::unique_ptr<Client> publisher = Connect();
  ASSERT_NE(publisher, nullptr);
  auto made = publisher->Create("after", 4096);
  ASSERT_TRUE(made.ok()) << made.status();
  test::FillPattern(made->mutable_data(), 5);
  ASSERT_TRUE(made->Seal().ok());
  ASSERT_TRUE(made->Release().ok());

  auto opened = client_->Open("after");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(test::MatchesPattern(opened->data(), 5));
  auto stat = publisher->Stat("after");
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(stat->lease_count, 1u) << "the open's lease, on the new session";
}

TEST_F(ClientTest, SessionsBeyondTheLimitAreRefusedWithTheNumbers) {
  daemon_.reset();
  client_.reset();
  config_.max_sessions = 1;
  StartDaemon(/*connect=*/false);
  client_ = Connect();
  ASSERT_NE(client_, nullptr);
  auto second = Client::Connect({.socket_dir = config_.socket_dir});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("too many sessions: 1 are open; the limit is 1"));
}

TEST_F(ClientTest, ConnectWithoutADaemonIsUnavailableAndSaysWhere) {
  auto client = Client::Connect({.socket_dir = dir_.Join("nothing-here")});
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(client.status().message()), HasSubstr("nothing-here"));
}

// End to end once the broker counts usage and answers Advise (issue 25).
// Expects a daemon whose advice rules call a buffer idle at once
// (unlink_idle 0): a sealed buffer nobody opened is an unlink candidate.
// A host buffer opened only in pinned memory, 16 times: memd counted it
// (the creator's lease is no open) and advises moving it there.
TEST_F(ClientTest, AdviseMovesABufferOpenedOnlyAwayFromItsHome) {
  Publish("advice-e2e/0", 4096, 1);
  auto quiet = client_->Stat("advice-e2e/0");
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  EXPECT_FALSE(quiet->usage.last_used.has_value()) << "the creator's lease is not an open";
  EXPECT_TRUE(client_->Advise("advice-e2e/")->empty());
  for (int i = 0; i < 16; ++i) {
    auto opened = client_->Open("advice-e2e/0", {.location = "pinned"});
    ASSERT_TRUE(opened.ok()) << opened.status();
  }
  auto advice = client_->Advise("advice-e2e/");
  ASSERT_TRUE(advice.ok()) << advice.status();
  ASSERT_EQ(advice->size(), 1u);
  EXPECT_EQ(advice->front().subject, "advice-e2e/");
  EXPECT_EQ(advice->front().action, "move");
  EXPECT_EQ(advice->front().locations, std::vector<std::string>{"pinned"});
  EXPECT_NE(advice->front().evidence.find("16"), std::string::npos) << advice->front().evidence;
  auto info = client_->Stat("advice-e2e/0");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->usage.opens_by_location.at("pinned"), 16u);
  EXPECT_EQ(info->usage.lazy_copies, 1u);
  EXPECT_EQ(info->usage.copies_avoided, 15u);
  EXPECT_TRUE(client_->Advise("nothing-here/")->empty());
}

// End to end under memory pressure (issue 26): the host pool holds four
// buffers of the largest size; a fifth evictable one takes the place of
// the least recently used unheld one, whose name then says it was evicted.
TEST_F(ClientTest, AFullHostEvictsTheLeastRecentlyUsedEvictableBufferAndSaysSo) {
  const std::uint64_t size = config_.host_pool_limit_bytes / 4;
  ASSERT_EQ(size, config_.max_buffer_bytes);
  for (int i = 0; i < 5; ++i) {
    auto buffer = client_->Create(absl::StrCat("pressure/", i), size,
                                  {.retention = "evictable"});
    ASSERT_TRUE(buffer.ok()) << i << ": " << buffer.status();
    test::FillPattern(buffer->mutable_data(), i);
    ASSERT_TRUE(buffer->Seal().ok());
    if (i == 3) {  // "pressure/1" becomes the least recently used.
      ASSERT_TRUE(client_->Open("pressure/0").ok());
    }
  }
  auto gone = client_->Stat("pressure/1");
  ASSERT_TRUE(absl::IsNotFound(gone.status())) << gone.status();
  EXPECT_THAT(std::string(gone.status().message()),
              AllOf(HasSubstr("evicted at"), HasSubstr("under memory pressure on host")));
  // The host pool counts what pressure took back there.
  const auto stats = client_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  for (const PoolStats& pool : stats->pools) {
    const bool host = pool.location == "host";
    EXPECT_EQ(pool.evictions, host ? 1u : 0u) << pool.location;
    EXPECT_EQ(pool.evicted_bytes, host ? size : 0u) << pool.location;
    EXPECT_EQ(pool.demotions, 0u) << pool.location;
  }
  std::vector<Buffer> held;
  for (int i : {0, 2, 3, 4}) {
    auto kept = client_->Open(absl::StrCat("pressure/", i));
    ASSERT_TRUE(kept.ok()) << i << ": " << kept.status();
    EXPECT_EQ(kept->info().retention, "evictable");
    EXPECT_TRUE(test::MatchesPattern(kept->data(), i)) << i;
    held.push_back(std::move(*kept));
  }
  // All four are held now: a pinned create finds nothing that may give way.
  auto refused = client_->Create("pressure/pinned", size);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
}

}  // namespace
}  // namespace memd
