// Broker::ResolveCopy and the checks of copy_regions.h: what a session may
// copy from and to, refused synchronously with the numbers.

#include <sys/mman.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/broker/broker.h"
#include "daemon/pool/carving_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/fake_backend.h"
#include "tests/daemon/peer.h"
#include "tests/support/fake_clock.h"

namespace memd::broker {
namespace {

using ::memd::test::Peer;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = 1 << 20;
constexpr uid_t kAlice = 1000;
constexpr uid_t kBob = 1001;

std::string Message(const absl::Status& status) { return std::string(status.message()); }

class CopyTest : public ::testing::Test {
 protected:
  CopyTest() {
    pool::CarvingPoolOptions options;
    options.limit_bytes = 64 * kMiB;
    pools_.Add(std::make_unique<pool::CarvingPool>(backend_, Location::Host(), options,
                                                   clock_));
    broker_ = std::make_unique<Broker>(pools_, BrokerLimits{}, clock_);
    alice_ = Start(kAlice);
  }

  SessionId Start(uid_t uid) {
    auto session = broker_->StartSession(Peer(uid), "test");
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }

  Grant Create(SessionId session, const std::string& name, std::uint64_t size,
               std::uint32_t mode = 0600) {
    auto grant = broker_->Create(session, CreateParams{name, size, Location::Host(), mode});
    EXPECT_TRUE(grant.ok()) << grant.status();
    return std::move(*grant);
  }

  test::FakeBackend backend_;
  test::FakeClock clock_;
  pool::PoolSet pools_;
  std::unique_ptr<Broker> broker_;
  SessionId alice_ = 0;
};

TEST_F(CopyTest, ResolvesBothRegionsToMemoryAtTheirOffsets) {
  Grant source = Create(alice_, "src", 8192);
  Grant destination = Create(alice_, "dst", 8192);
  auto ends = broker_->ResolveCopy(alice_, {source.lease, 100, 4000},
                                   {destination.lease, 4096, 4000});
  ASSERT_TRUE(ends.ok()) << ends.status();
  EXPECT_EQ(ends->source.buffer.name, "src");
  EXPECT_EQ(ends->destination.buffer.name, "dst");
  EXPECT_EQ(ends->source.offset, 100u);
  EXPECT_EQ(ends->destination.offset, 4096u);
  EXPECT_EQ(ends->source.length, 4000u);
  EXPECT_EQ(ends->destination.access, Access::kReadWrite);
  EXPECT_FALSE(ends->source.memory.on_device());
  ASSERT_NE(ends->source.memory.host, nullptr);
  EXPECT_TRUE(ends->source.hold);
  EXPECT_TRUE(ends->destination.hold);

  // The memory is the buffer's: bytes written through the lease's mapping
  // show at the resolved address.
  auto whole = broker_->ResolveCopy(alice_, {source.lease, 0, 8192},
                                    {destination.lease, 0, 8192});
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(ends->source.memory.host, whole->source.memory.host + 100);
  void* map = ::mmap(nullptr, source.mapped_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                     source.handle.fd, source.offset);
  ASSERT_NE(map, MAP_FAILED);
  std::memcpy(static_cast<char*>(map) + 100, "bytes", 5);
  EXPECT_EQ(std::memcmp(ends->source.memory.host, "bytes", 5), 0);
  ::munmap(map, source.mapped_bytes);
}

TEST_F(CopyTest, TheHoldKeepsTheSegmentAfterTheLeasesGo) {
  Grant source = Create(alice_, "src", 4096);
  Grant destination = Create(alice_, "dst", 4096);
  auto ends = broker_->ResolveCopy(alice_, {source.lease, 0, 4096},
                                   {destination.lease, 0, 4096});
  ASSERT_TRUE(ends.ok()) << ends.status();
  broker_->EndSession(alice_);  // Never sealed: both buffers go.
  EXPECT_GT(ends->source.hold.use_count(), 1) << "the pool still counts the segment";
  EXPECT_GT(backend_.alive(), 0);
}

// The engine may write a copy's destination after its buffer was freed
// (the client released its last lease mid-copy). The bytes must not go to
// the next buffer of the same domain meanwhile: the allocation waits in the
// copy's pin and goes back to the pool only when the copy lets go.
TEST_F(CopyTest, AFreedBufferStaysOutOfItsPoolUntilItsCopiesLetGo) {
  constexpr std::uint64_t kSize = 64 << 10;
  pool::Pool& pool = *pools_.Find(Location::Host());
  Grant source = Create(alice_, "src", kSize);
  Grant destination = Create(alice_, "dst", kSize);
  auto ends = broker_->ResolveCopy(alice_, {source.lease, 0, kSize},
                                   {destination.lease, 0, kSize});
  ASSERT_TRUE(ends.ok()) << ends.status();
  ASSERT_TRUE(ends->destination.pin);
  const std::byte* freed = ends->destination.memory.host;
  const std::uint64_t used = pool.Stats().used_bytes;
  ASSERT_TRUE(broker_->Release(alice_, destination.lease).ok());  // Never sealed: it goes.
  EXPECT_EQ(pool.Stats().used_bytes, used) << "the allocation went back with a copy on it";

  // Its domain's next buffer of the same size gets other bytes.
  Grant next = Create(alice_, "next", kSize);
  auto next_ends = broker_->ResolveCopy(alice_, {source.lease, 0, kSize},
                                        {next.lease, 0, kSize});
  ASSERT_TRUE(next_ends.ok()) << next_ends.status();
  const std::byte* given = next_ends->destination.memory.host;
  EXPECT_TRUE(given + kSize <= freed || freed + kSize <= given)
      << "the new buffer shares bytes with the freed one";

  const std::uint64_t with_next = pool.Stats().used_bytes;
  ends->destination.pin.reset();
  EXPECT_EQ(pool.Stats().used_bytes, with_next - pool.AllocationBytes(kSize)) << "the last pin gives it back";
}

// Copies of one buffer share its pin: the allocation waits for the last.
TEST_F(CopyTest, ABufferFreedUnderTwoCopiesWaitsForTheLast) {
  constexpr std::uint64_t kSize = 64 << 10;
  pool::Pool& pool = *pools_.Find(Location::Host());
  Grant source = Create(alice_, "src", kSize);
  Grant destination = Create(alice_, "dst", kSize);
  auto first = broker_->ResolveCopy(alice_, {source.lease, 0, kSize / 2},
                                    {destination.lease, 0, kSize / 2});
  auto second = broker_->ResolveCopy(alice_, {source.lease, 0, kSize / 2},
                                     {destination.lease, kSize / 2, kSize / 2});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(&first->destination.pin->pin(), &second->destination.pin->pin());
  const std::uint64_t used = pool.Stats().used_bytes;
  ASSERT_TRUE(broker_->Release(alice_, destination.lease).ok());
  first->destination.pin.reset();
  EXPECT_EQ(pool.Stats().used_bytes, used);
  second->destination.pin.reset();
  EXPECT_EQ(pool.Stats().used_bytes, used - pool.AllocationBytes(kSize));
}

// Issue 22, finding 1: a 1-byte copy kept a freed buffer's whole allocation
// out of its pool while its quota and buffer count came back at once, so a
// uid could park memory of any size outside every quota. The buffer now
// stays charged to its owner, and counted, until its copies let go.
TEST_F(CopyTest, AFreedBufferStaysChargedToItsOwnerUntilItsCopiesLetGo) {
  constexpr std::uint64_t kSize = 256 << 10;
  pool::Pool& pool = *pools_.Find(Location::Host());
  const std::uint64_t taken = pool.AllocationBytes(kSize);
  BrokerLimits limits;
  limits.max_uid_bytes = *Quota::Parse(absl::StrCat(3 * taken));
  broker_->SetLimits(limits);
  Grant parked = Create(alice_, "parked", kSize);
  Grant destination = Create(alice_, "dst", kSize);
  auto ends = broker_->ResolveCopy(alice_, {parked.lease, 0, 1}, {destination.lease, 0, 1});
  ASSERT_TRUE(ends.ok()) << ends.status();
  ASSERT_TRUE(broker_->Release(alice_, parked.lease).ok());  // Never sealed: it goes.

  auto usage = broker_->Usage(alice_);
  ASSERT_TRUE(usage.ok() && usage->size() == 1) << usage.status();
  EXPECT_EQ((*usage)[0].bytes, 2 * taken) << "the parked buffer is still its owner's";
  EXPECT_EQ((*usage)[0].buffers, 2u);
  EXPECT_EQ(broker_->Counts().buffers, 2u);
  EXPECT_EQ(broker_->Counts().unlinked, 1u);
  EXPECT_TRUE(broker_->Create(alice_, CreateParams{"third", kSize, Location::Host()}).ok());
  auto fourth = broker_->Create(alice_, CreateParams{"fourth", kSize, Location::Host()});
  EXPECT_TRUE(absl::IsResourceExhausted(fourth.status())) << fourth.status();
  EXPECT_THAT(Message(fourth.status()), HasSubstr("max_uid_bytes"));

  ends->source.pin.reset();  // The copy lets go of the parked buffer.
  usage = broker_->Usage(alice_);
  ASSERT_TRUE(usage.ok() && usage->size() == 1) << usage.status();
  EXPECT_EQ((*usage)[0].bytes, 2 * taken);
  EXPECT_EQ(broker_->Counts().unlinked, 0u);
  EXPECT_TRUE(broker_->Create(alice_, CreateParams{"fourth", kSize, Location::Host()}).ok());
}

// Nobody can read a buffer freed while a copy writes it, so the daemon
// cancels such copies: the broker names each such buffer once. A buffer
// that copies only read is kept, not reported.
TEST_F(CopyTest, ABufferFreedWhileACopyWritesItIsReportedOnce) {
  std::vector<BufferId> reported;
  broker_->SetFreedWhileWritten([&](BufferId id) { reported.push_back(id); });
  Grant source = Create(alice_, "src", 4096);
  Grant destination = Create(alice_, "dst", 4096);
  auto ends = broker_->ResolveCopy(alice_, {source.lease, 0, 4096},
                                   {destination.lease, 0, 4096});
  ASSERT_TRUE(ends.ok()) << ends.status();
  ASSERT_TRUE(broker_->Release(alice_, source.lease).ok());
  EXPECT_TRUE(reported.empty()) << "a copy that reads a freed buffer goes on";
  ASSERT_TRUE(broker_->Release(alice_, destination.lease).ok());
  EXPECT_EQ(reported, std::vector<BufferId>{destination.buffer.id});
  ends->destination.pin->Written();
  ends->source.pin.reset();
  ends->destination.pin.reset();
  EXPECT_EQ(reported.size(), 1u);
  EXPECT_EQ(broker_->Counts().buffers, 0u);
}

// Issue 22, finding 2: Seal neither waited for nor refused copies still
// writing the buffer, so a sealed buffer kept changing. A buffer a copy may
// still write cannot be sealed; one copies only read can.
TEST_F(CopyTest, ABufferACopyMayStillWriteCannotBeSealed) {
  Grant source = Create(alice_, "src", 4096);
  Grant destination = Create(alice_, "dst", 4096);
  auto ends = broker_->ResolveCopy(alice_, {source.lease, 0, 4096},
                                   {destination.lease, 0, 4096});
  ASSERT_TRUE(ends.ok()) << ends.status();
  auto refused = broker_->Seal(alice_, destination.lease);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_EQ(Message(refused.status()),
            "buffer 'dst' cannot be sealed: 1 copy may still write it; wait for them to "
            "end (or cancel them), then seal");
  EXPECT_EQ(BufferCopiesStillWrite(refused.status()), destination.buffer.id)
      << "the refusal names the buffer, for the service to name the caller's copies";
  EXPECT_EQ(BufferCopiesStillWrite(broker_->Seal(alice_, 987654321).status()), std::nullopt);
  EXPECT_TRUE(broker_->Seal(alice_, source.lease).ok()) << "reading changes nothing";
  ends->destination.pin->Written();  // Its last chunk left the device.
  EXPECT_TRUE(broker_->Seal(alice_, destination.lease).ok());
}

TEST_F(CopyTest, ARefusedCopyLeavesNoWriterBehind) {
  Grant buffer = Create(alice_, "one", 8192);
  auto overlap = broker_->ResolveCopy(alice_, {buffer.lease, 0, 4096},
                                      {buffer.lease, 2048, 4096});
  ASSERT_TRUE(absl::IsInvalidArgument(overlap.status())) << overlap.status();
  EXPECT_TRUE(broker_->Seal(alice_, buffer.lease).ok());
}

// The daemon ends its copies before its broker; should claims outlive the
// broker anyway, what they hold goes back to the pool with the last.
TEST_F(CopyTest, ClaimsThatOutliveTheBrokerGiveTheMemoryBackWhenTheyGo) {
  constexpr std::uint64_t kSize = 64 << 10;
  pool::Pool& pool = *pools_.Find(Location::Host());
  Grant source = Create(alice_, "src", kSize);
  Grant destination = Create(alice_, "dst", kSize);
  Create(alice_, "unclaimed", kSize);
  auto ends = broker_->ResolveCopy(alice_, {source.lease, 0, kSize},
                                   {destination.lease, 0, kSize});
  ASSERT_TRUE(ends.ok()) << ends.status();
  broker_.reset();
  EXPECT_EQ(pool.Stats().used_bytes, 2 * pool.AllocationBytes(kSize));
  ends->source.pin.reset();
  EXPECT_EQ(pool.Stats().used_bytes, pool.AllocationBytes(kSize));
  ends->destination.pin.reset();
  EXPECT_EQ(pool.Stats().used_bytes, 0u);
}

TEST_F(CopyTest, ZeroOrDifferentLengthsAreRefusedWithTheNumbers) {
  Grant source = Create(alice_, "src", 8192);
  Grant destination = Create(alice_, "dst", 8192);
  auto zero = broker_->ResolveCopy(alice_, {source.lease, 0, 0}, {destination.lease, 0, 0});
  EXPECT_TRUE(absl::IsInvalidArgument(zero.status())) << zero.status();
  EXPECT_THAT(Message(zero.status()), HasSubstr("at least one byte"));
  auto differ = broker_->ResolveCopy(alice_, {source.lease, 0, 100},
                                     {destination.lease, 0, 200});
  EXPECT_TRUE(absl::IsInvalidArgument(differ.status())) << differ.status();
  EXPECT_THAT(Message(differ.status()), AllOf(HasSubstr("100"), HasSubstr("200")));
}

TEST_F(CopyTest, RegionsPastTheEndAreRefusedWithOffsetLengthAndSize) {
  Grant source = Create(alice_, "src", 8192);
  Grant destination = Create(alice_, "dst", 4096);
  auto past = broker_->ResolveCopy(alice_, {source.lease, 0, 5000},
                                   {destination.lease, 0, 5000});
  EXPECT_TRUE(absl::IsInvalidArgument(past.status())) << past.status();
  EXPECT_THAT(Message(past.status()),
              AllOf(HasSubstr("destination"), HasSubstr("5000"), HasSubstr("4096"),
                    HasSubstr("'dst'")));
  auto offset = broker_->ResolveCopy(alice_, {source.lease, 8192, 1},
                                     {destination.lease, 0, 1});
  EXPECT_TRUE(absl::IsInvalidArgument(offset.status())) << offset.status();
  EXPECT_THAT(Message(offset.status()), AllOf(HasSubstr("source"), HasSubstr("8192")));
}

TEST_F(CopyTest, AnOverflowingRegionIsRefusedNotWrapped) {
  Grant source = Create(alice_, "src", 8192);
  Grant destination = Create(alice_, "dst", 8192);
  const std::uint64_t huge = ~std::uint64_t{0} - 10;  // offset + length wraps to 5.
  auto wrapped = broker_->ResolveCopy(alice_, {source.lease, 16, huge},
                                      {destination.lease, 0, huge});
  EXPECT_TRUE(absl::IsInvalidArgument(wrapped.status())) << wrapped.status();
  EXPECT_THAT(Message(wrapped.status()), HasSubstr(std::to_string(huge)));
}

TEST_F(CopyTest, AnotherSessionsLeaseIsNotFoundLikeAMadeUpOne) {
  const SessionId bob = Start(kBob);
  Grant bobs = Create(bob, "bobs", 4096, 0666);
  Grant mine = Create(alice_, "mine", 4096);
  auto theirs = broker_->ResolveCopy(alice_, {bobs.lease, 0, 4096}, {mine.lease, 0, 4096});
  EXPECT_TRUE(absl::IsNotFound(theirs.status())) << theirs.status();
  auto made_up = broker_->ResolveCopy(alice_, {mine.lease, 0, 4096}, {9999, 0, 4096});
  EXPECT_TRUE(absl::IsNotFound(made_up.status())) << made_up.status();
  EXPECT_THAT(Message(made_up.status()), HasSubstr("9999"));
  // Both the same words: nothing tells a lease of bob's from no lease.
  auto bobs_as_destination =
      broker_->ResolveCopy(alice_, {mine.lease, 0, 4096}, {bobs.lease, 0, 4096});
  EXPECT_EQ(Message(bobs_as_destination.status()),
            absl::StrCat("lease ", bobs.lease,
                         " is not held by this session (released already, or never "
                         "granted)"));
}

TEST_F(CopyTest, AReadOnlyLeaseIsNoDestination) {
  Grant written = Create(alice_, "sealed", 4096);
  ASSERT_TRUE(broker_->Seal(alice_, written.lease).ok());
  auto reader = broker_->Open(alice_, OpenParams{"sealed", Access::kRead});
  ASSERT_TRUE(reader.ok()) << reader.status();
  Grant source = Create(alice_, "src", 4096);
  auto refused = broker_->ResolveCopy(alice_, {source.lease, 0, 4096},
                                      {reader->lease, 0, 4096});
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(Message(refused.status()), HasSubstr("read-only"));
  // As a source it serves.
  Grant destination = Create(alice_, "dst", 4096);
  EXPECT_TRUE(broker_->ResolveCopy(alice_, {reader->lease, 0, 4096},
                                   {destination.lease, 0, 4096})
                  .ok());
}

TEST_F(CopyTest, ASealedBufferIsNoDestinationEvenWithAWritableLease) {
  Grant source = Create(alice_, "src", 4096);
  Grant destination = Create(alice_, "dst", 4096);
  ASSERT_TRUE(broker_->Seal(alice_, destination.lease).ok());
  auto refused = broker_->ResolveCopy(alice_, {source.lease, 0, 4096},
                                      {destination.lease, 0, 4096});
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(Message(refused.status()), AllOf(HasSubstr("'dst'"), HasSubstr("sealed")));
}

TEST_F(CopyTest, OverlappingRegionsOfOneBufferAreRefusedApartOnesServe) {
  Grant buffer = Create(alice_, "one", 8192);
  auto overlap = broker_->ResolveCopy(alice_, {buffer.lease, 0, 4096},
                                      {buffer.lease, 2048, 4096});
  EXPECT_TRUE(absl::IsInvalidArgument(overlap.status())) << overlap.status();
  EXPECT_THAT(Message(overlap.status()),
              AllOf(HasSubstr("0..4096"), HasSubstr("2048..6144"), HasSubstr("overlap")));
  EXPECT_TRUE(broker_->ResolveCopy(alice_, {buffer.lease, 0, 4096},
                                   {buffer.lease, 4096, 4096})
                  .ok());
}

TEST_F(CopyTest, AnEndedSessionResolvesNothing) {
  Grant source = Create(alice_, "src", 4096);
  Grant destination = Create(alice_, "dst", 4096);
  broker_->EndSession(alice_);
  auto ended = broker_->ResolveCopy(alice_, {source.lease, 0, 4096},
                                    {destination.lease, 0, 4096});
  EXPECT_TRUE(absl::IsUnauthenticated(ended.status())) << ended.status();
}

TEST_F(CopyTest, MemoryTheBackendCannotReachIsRefusedNamingTheBuffer) {
  Grant source = Create(alice_, "src", 4096);
  Grant destination = Create(alice_, "dst", 4096);
  backend_.set_memory_reachable(false);
  auto refused = broker_->ResolveCopy(alice_, {source.lease, 0, 4096},
                                      {destination.lease, 0, 4096});
  EXPECT_TRUE(absl::IsUnimplemented(refused.status())) << refused.status();
  EXPECT_THAT(Message(refused.status()), AllOf(HasSubstr("'src'"), HasSubstr("host")));
}

}  // namespace
}  // namespace memd::broker
