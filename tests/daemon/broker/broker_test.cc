// The broker: create, open and seal, lifetimes, legacy IPC handles
// (BrokerTest). Limits and quotas: broker_limits_test.cc; permissions and
// listings: broker_access_test.cc; waiting opens and OpenOrCreate:
// broker_waits_test.cc.

#include "daemon/broker/broker.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/broker/broker_fixture.h"

namespace memd::broker {
namespace {

using ::memd::test::Peer;
using ::testing::HasSubstr;

// ---- Create ----

TEST_F(BrokerTest, CreateGrantsAWritableLeaseOnANewBuffer) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  auto grant = broker_->Create(alice, Params("frames/0", 1000, 0640));
  ASSERT_TRUE(grant.ok()) << grant.status();
  EXPECT_EQ(grant->access, Access::kReadWrite);
  EXPECT_TRUE(grant->created);
  EXPECT_GE(grant->handle.fd, 0);
  EXPECT_EQ(grant->offset, 0u);
  EXPECT_EQ(grant->mapped_bytes, 4096u);
  const BufferInfo& info = grant->buffer;
  EXPECT_EQ(info.name, "frames/0");
  EXPECT_EQ(info.size, 1000u);
  EXPECT_EQ(info.owner_uid, kAlice);
  EXPECT_EQ(info.owner_gid, kStaff);
  EXPECT_EQ(info.mode, 0640u);
  EXPECT_EQ(info.state, BufferState::kCreating);
  EXPECT_EQ(info.lease_count, 1u);
  EXPECT_EQ(info.created, clock_.Now());
  EXPECT_EQ(info.creator_pid, 4000 + static_cast<pid_t>(kAlice));
  EXPECT_EQ(broker_->Counts().buffers, 1u);
  EXPECT_EQ(broker_->Counts().leases, 1u);
}

TEST_F(BrokerTest, CreateOfAnExistingNameIsAlreadyExists) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->Create(alice, Params("a")).ok());
  auto again = broker_->Create(alice, Params("a"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("'a'"));
  // The losing create's memory went back.
  EXPECT_EQ(pools_->Stats()[0].used_bytes, kMiB);
}

TEST_F(BrokerTest, CreateValidatesNameSizeModeAndLocation) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  EXPECT_EQ(broker_->Create(alice, Params("")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_->Create(alice, Params("a/../b")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_->Create(alice, Params(std::string(256, 'n'))).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto zero = broker_->Create(alice, Params("z", 0));
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero.status().message(), HasSubstr("size is 0"));

  auto huge = broker_->Create(alice, Params("h", BrokerLimits{}.max_buffer_bytes + 1));
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(), HasSubstr("68719476737"));
  EXPECT_THAT(huge.status().message(), HasSubstr("maximum of 68719476736"));

  auto mode = broker_->Create(alice, Params("m", kMiB, 04755));
  EXPECT_EQ(mode.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mode.status().message(), HasSubstr("04755"));

  CreateParams pinned = Params("p");
  pinned.location = Location::Pinned();
  auto location = broker_->Create(alice, pinned);
  EXPECT_EQ(location.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(location.status().message(), HasSubstr("pinned is not available"));
  EXPECT_THAT(location.status().message(), HasSubstr("available: host"));
  EXPECT_EQ(broker_->Counts().buffers, 0u);
  EXPECT_EQ(pools_->Stats()[0].used_bytes, 0u);
}

TEST_F(BrokerTest, PoolExhaustionIsResourceExhaustedAndCreatesNothing) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  backend_.FailNextReserve(absl::ResourceExhaustedError("fake: out of memory"));
  auto grant = broker_->Create(alice, Params("a"));
  EXPECT_EQ(grant.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(broker_->Stat(alice, "a").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(BrokerTest, TooManyBuffersIsResourceExhaustedWithTheLimit) {
  BrokerLimits limits;
  limits.max_buffers = 2;
  MakeBroker(limits);
  SessionId alice = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->Create(alice, Params("a", 10)).ok());
  ASSERT_TRUE(broker_->Create(alice, Params("b", 10)).ok());
  auto third = broker_->Create(alice, Params("c", 10));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("the limit is 2"));
}

TEST_F(BrokerTest, TooManyLeasesIsResourceExhaustedWithTheLimit) {
  BrokerLimits limits;
  limits.max_leases_per_session = 2;
  MakeBroker(limits);
  SessionId alice = Start(Peer(kAlice, kStaff));
  Publish(alice, "a", "x");  // The writer's lease is the first.
  ASSERT_TRUE(broker_->Open(alice, {"a", Access::kRead}).ok());
  auto third = broker_->Open(alice, {"a", Access::kRead});
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("holds 2 leases; the limit is 2"));
}

TEST_F(BrokerTest, TooManySessionsIsResourceExhausted) {
  BrokerLimits limits;
  limits.max_sessions = 1;
  MakeBroker(limits);
  Start(Peer(kAlice, kStaff));
  auto second = broker_->StartSession(Peer(kBob, kStaff), "b");
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(second.status().message(), HasSubstr("the limit is 1"));
}
// ---- Open, Seal ----

TEST_F(BrokerTest, ReaderSeesTheWrittenBytesAfterSeal) {
  SessionId producer = Start(Peer(kAlice, kStaff));
  SessionId consumer = Start(Peer(kAlice, kStaff));
  Publish(producer, "greeting", "hello, memd");
  auto grant = broker_->Open(consumer, {"greeting", Access::kRead});
  ASSERT_TRUE(grant.ok()) << grant.status();
  EXPECT_EQ(grant->access, Access::kRead);
  EXPECT_FALSE(grant->created);
  EXPECT_EQ(grant->buffer.state, BufferState::kSealed);
  EXPECT_EQ(grant->buffer.lease_count, 2u);
  EXPECT_EQ(Read(*grant, 11), "hello, memd");
  // The reader's descriptor cannot be mapped writable.
  EXPECT_EQ(::mmap(nullptr, grant->mapped_bytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED, grant->handle.fd, 0),
            MAP_FAILED);
}

TEST_F(BrokerTest, OpenOfAnUnknownNameIsNotFound) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  auto grant = broker_->Open(alice, {"nope", Access::kRead});
  EXPECT_EQ(grant.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(grant.status().message(), HasSubstr("no buffer named 'nope'"));
}

TEST_F(BrokerTest, ReadOpenOfAnUnsealedBufferIsFailedPrecondition) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->Create(alice, Params("wip")).ok());
  auto grant = broker_->Open(alice, {"wip", Access::kRead});
  EXPECT_EQ(grant.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(grant.status().message(), HasSubstr("not sealed"));
}

TEST_F(BrokerTest, WritableOpenJoinsAnUnsealedBufferButNotASealedOne) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  auto created = broker_->Create(alice, Params("wip", 4));
  ASSERT_TRUE(created.ok());
  auto joined = broker_->Open(alice, {"wip", Access::kReadWrite});
  ASSERT_TRUE(joined.ok()) << joined.status();
  Write(*joined, "abcd");
  EXPECT_EQ(Read(*created, 4), "abcd");
  ASSERT_TRUE(broker_->Seal(alice, joined->lease).ok());
  auto late = broker_->Open(alice, {"wip", Access::kReadWrite});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(late.status().message(), HasSubstr("sealed buffers open read-only"));
}

TEST_F(BrokerTest, SealTwiceOrWithAReadLeaseIsFailedPrecondition) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  Grant writer = Publish(alice, "a", "x");
  auto again = broker_->Seal(alice, writer.lease);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("sealed already"));

  auto reader = broker_->Open(alice, {"a", Access::kRead});
  ASSERT_TRUE(reader.ok());
  auto by_reader = broker_->Seal(alice, reader->lease);
  EXPECT_EQ(by_reader.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(by_reader.status().message(), HasSubstr("read-only"));
}

TEST_F(BrokerTest, SealRecordsTheTime) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  auto grant = broker_->Create(alice, Params("a"));
  clock_.Advance(absl::Seconds(5));
  auto sealed = broker_->Seal(alice, grant->lease);
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(sealed->state, BufferState::kSealed);
  ASSERT_TRUE(sealed->sealed.has_value());
  EXPECT_EQ(*sealed->sealed, clock_.Now());
}

// ---- Release, Unlink, lifetimes ----

TEST_F(BrokerTest, ReleasingTwiceIsNotFound) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  Grant grant = Publish(alice, "a", "x");
  ASSERT_TRUE(broker_->Release(alice, grant.lease).ok());
  absl::Status twice = broker_->Release(alice, grant.lease);
  EXPECT_EQ(twice.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(twice.message(), HasSubstr("released already"));
}

TEST_F(BrokerTest, ASessionCannotReleaseOrSealAnotherSessionsLease) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId mallory = Start(Peer(kAlice, kStaff));
  auto grant = broker_->Create(alice, Params("a"));
  ASSERT_TRUE(grant.ok());
  EXPECT_EQ(broker_->Release(mallory, grant->lease).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(broker_->Seal(mallory, grant->lease).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(broker_->Counts().leases, 1u);
}

TEST_F(BrokerTest, PersistentSealedBufferOutlivesItsLeases) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  Grant grant = Publish(alice, "keep", "data");
  ASSERT_TRUE(broker_->Release(alice, grant.lease).ok());
  auto info = broker_->Stat(alice, "keep");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->lease_count, 0u);
  EXPECT_EQ(pools_->Stats()[0].used_bytes, 4096u);
  auto again = broker_->Open(alice, {"keep", Access::kRead});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Read(*again, 4), "data");
}

TEST_F(BrokerTest, EphemeralBufferGoesWithItsLastLease) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  auto grant = broker_->Create(
      alice, Params("tmp", kMiB, kDefaultMode, Persistence::kEphemeral));
  ASSERT_TRUE(grant.ok());
  ASSERT_TRUE(broker_->Seal(alice, grant->lease).ok());
  auto reader = broker_->Open(alice, {"tmp", Access::kRead});
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(broker_->Release(alice, grant->lease).ok());
  EXPECT_TRUE(broker_->Stat(alice, "tmp").ok());  // The reader still holds it.
  ASSERT_TRUE(broker_->Release(alice, reader->lease).ok());
  EXPECT_EQ(broker_->Stat(alice, "tmp").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(broker_->Counts().buffers, 0u);
  EXPECT_EQ(pools_->Stats()[0].used_bytes, 0u);
}

TEST_F(BrokerTest, UnsealedBufferWhoseLastLeaseEndsIsRemoved) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  auto grant = broker_->Create(alice, Params("abandoned"));
  ASSERT_TRUE(grant.ok());
  ASSERT_TRUE(broker_->Release(alice, grant->lease).ok());
  EXPECT_EQ(broker_->Stat(alice, "abandoned").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(pools_->Stats()[0].used_bytes, 0u);
  // The name is free again.
  EXPECT_TRUE(broker_->Create(alice, Params("abandoned")).ok());
}

TEST_F(BrokerTest, UnlinkRemovesTheNameAndLeasedMemoryLivesUntilReleased) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  Grant writer = Publish(alice, "a", "live");
  auto reader = broker_->Open(alice, {"a", Access::kRead});
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(broker_->Unlink(alice, "a").ok());

  // Calls after unlink.
  EXPECT_EQ(broker_->Open(alice, {"a", Access::kRead}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(broker_->Stat(alice, "a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(broker_->Unlink(alice, "a").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(broker_->List(alice, "")->empty());

  EXPECT_EQ(Read(*reader, 4), "live");
  EXPECT_EQ(broker_->Counts().buffers, 1u);
  // The name can be taken by a new buffer while the old memory lives on.
  ASSERT_TRUE(broker_->Create(alice, Params("a")).ok());
  ASSERT_TRUE(broker_->Release(alice, writer.lease).ok());
  ASSERT_TRUE(broker_->Release(alice, reader->lease).ok());
  EXPECT_EQ(broker_->Counts().buffers, 1u);  // Only the new one.
  EXPECT_EQ(pools_->Stats()[0].used_bytes, kMiB);
}

TEST_F(BrokerTest, SealAfterUnlinkIsFailedPrecondition) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  auto grant = broker_->Create(alice, Params("a"));
  ASSERT_TRUE(grant.ok());
  ASSERT_TRUE(broker_->Unlink(alice, "a").ok());
  auto sealed = broker_->Seal(alice, grant->lease);
  EXPECT_EQ(sealed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sealed.status().message(), HasSubstr("unlinked"));
  EXPECT_TRUE(broker_->Release(alice, grant->lease).ok());
  EXPECT_EQ(broker_->Counts().buffers, 0u);
}

TEST_F(BrokerTest, EndSessionReleasesEveryLeaseOfIt) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId client = Start(Peer(kAlice, kStaff));
  Publish(alice, "a", "x");
  auto tmp = broker_->Create(client, Params("tmp", 10, kDefaultMode,
                                            Persistence::kEphemeral));
  ASSERT_TRUE(tmp.ok());
  ASSERT_TRUE(broker_->Open(client, {"a", Access::kRead}).ok());
  ASSERT_TRUE(broker_->Open(client, {"a", Access::kRead}).ok());
  EXPECT_EQ(broker_->Counts().leases, 4u);

  broker_->EndSession(client);
  EXPECT_EQ(broker_->Counts().leases, 1u);
  EXPECT_EQ(broker_->Counts().sessions, 1u);
  EXPECT_EQ(broker_->Stat(alice, "a")->lease_count, 1u);
  EXPECT_EQ(broker_->Stat(alice, "tmp").status().code(), absl::StatusCode::kNotFound);
  // Whatever the ended session tries now is refused.
  EXPECT_EQ(broker_->Open(client, {"a", Access::kRead}).status().code(),
            absl::StatusCode::kUnauthenticated);
  broker_->EndSession(client);  // Idempotent.
}

// ---- Legacy CUDA IPC handles ----
// A CUipcMemHandle is bytes: whoever received one may open it whenever it
// likes, lease or no lease, and it reaches whatever memory then lives at its
// allocation. Its segment stays (not freed, not given to another domain)
// while any session that received it lasts.

// A device buffer, whose handle is the pretend IPC handle of FakeBackend.
CreateParams OnDevice(std::string name, std::uint64_t size, std::uint32_t mode) {
  return CreateParams{std::move(name), size, Location::Device(0), mode,
                      Persistence::kPersistent};
}

TEST_F(BrokerTest, ASegmentWhoseIpcHandleASessionReceivedStaysUntilTheSessionEnds) {
  backend_.set_device_ipc_handles(true);
  MakeBroker(BrokerLimits{}, /*device=*/true);
  pool::Pool& device = *pools_->Find(Location::Device(0));
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  std::string handle;
  {
    auto created = broker_->Create(alice, OnDevice("weights", kMiB, 0644));
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_EQ(created->handle.type, backend::HandleType::kCudaIpc);
    ASSERT_TRUE(broker_->Seal(alice, created->lease).ok());
    ASSERT_TRUE(broker_->Release(alice, created->lease).ok());
    auto opened = broker_->Open(bob, {"weights", Access::kRead});
    ASSERT_TRUE(opened.ok()) << opened.status();
    handle = opened->handle.opaque;
    EXPECT_EQ(handle, created->handle.opaque);
    ASSERT_TRUE(broker_->Release(bob, opened->lease).ok());
  }  // The grants, which hold the segment until sent, are gone.
  ASSERT_TRUE(broker_->Unlink(alice, "weights").ok());
  EXPECT_EQ(broker_->Counts().buffers, 0u);
  const std::uint64_t reserved = device.Stats().reserved_bytes;
  ASSERT_GT(reserved, 0u);

  // Both sessions received the handle and may open it still.
  EXPECT_EQ(device.Trim(absl::ZeroDuration()), 0u);
  EXPECT_EQ(device.Stats().reserved_bytes, reserved);
  EXPECT_TRUE(backend_.IpcHandleOpens(handle));
  broker_->EndSession(bob);
  EXPECT_EQ(device.Trim(absl::ZeroDuration()), 0u) << "alice received it too";
  EXPECT_TRUE(backend_.IpcHandleOpens(handle));
  broker_->EndSession(alice);
  EXPECT_EQ(device.Trim(absl::ZeroDuration()), reserved);
  EXPECT_EQ(device.Stats().reserved_bytes, 0u);
  EXPECT_FALSE(backend_.IpcHandleOpens(handle));
}

TEST_F(BrokerTest, ASessionHoldsEachIpcSegmentOnceHoweverOftenItOpens) {
  backend_.set_device_ipc_handles(true);
  MakeBroker(BrokerLimits{}, /*device=*/true);
  pool::Pool& device = *pools_->Find(Location::Device(0));
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  pool::SegmentHold segment;
  {
    auto created = broker_->Create(alice, OnDevice("w", kMiB, 0644));
    ASSERT_TRUE(created.ok());
    ASSERT_TRUE(broker_->Seal(alice, created->lease).ok());
    ASSERT_TRUE(broker_->Release(alice, created->lease).ok());
    segment = created->segment;
  }
  broker_->EndSession(alice);
  const long before = segment.use_count();  // The pool's, the buffer's, ours.
  for (int i = 0; i < 100; ++i) {
    auto opened = broker_->Open(bob, {"w", Access::kRead});
    ASSERT_TRUE(opened.ok());
    ASSERT_TRUE(broker_->Release(bob, opened->lease).ok());
  }
  EXPECT_EQ(segment.use_count(), before + 1);
  segment = pool::SegmentHold();
  broker_->EndSession(bob);
  SessionId root = Start(Peer(0, 0));
  ASSERT_TRUE(broker_->Unlink(root, "w").ok());
  EXPECT_GT(device.Trim(absl::ZeroDuration()), 0u);
}

TEST_F(BrokerTest, DescriptorHandlesKeepNoSegmentAfterTheirLease) {
  // A descriptor is the client's own reference: the memory it names lives
  // as long as the descriptor, so nothing needs to stay in the pool.
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  {
    Grant grant = Publish(alice, "a", "x", 0644);
    ASSERT_TRUE(broker_->Release(alice, grant.lease).ok());
    auto opened = broker_->Open(bob, {"a", Access::kRead});
    ASSERT_TRUE(opened.ok());
    ASSERT_TRUE(broker_->Release(bob, opened->lease).ok());
  }
  ASSERT_TRUE(broker_->Unlink(alice, "a").ok());
  EXPECT_GT(pools_->Trim(absl::ZeroDuration()), 0u);
  EXPECT_EQ(backend_.alive(), 0);
}

}  // namespace
}  // namespace memd::broker
