#include "daemon/broker/broker.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "daemon/pool/carving_pool.h"
#include "tests/daemon/fake_backend.h"
#include "tests/daemon/peer.h"
#include "tests/support/fake_clock.h"

namespace memd::broker {
namespace {

using ::memd::test::Peer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::uint64_t kMiB = 1 << 20;
constexpr uid_t kAlice = 1000;
constexpr uid_t kBob = 1001;
constexpr gid_t kStaff = 50;
constexpr gid_t kOther = 60;

CreateParams Params(std::string name, std::uint64_t size = kMiB,
                    std::uint32_t mode = kDefaultMode,
                    Persistence persistence = Persistence::kPersistent) {
  return CreateParams{std::move(name), size, Location::Host(), mode, persistence};
}

class BrokerTest : public ::testing::Test {
 protected:
  BrokerTest() { MakeBroker(BrokerLimits{}); }

  // `device`: a device:0 pool beside host.
  void MakeBroker(BrokerLimits limits, bool device = false) {
    broker_.reset();
    pools_ = std::make_unique<pool::PoolSet>();
    pool::CarvingPoolOptions options;
    options.limit_bytes = 256 * kMiB;
    options.idle_budget = -1;  // Reuse shows in hit counts; keep idle memory.
    pools_->Add(std::make_unique<pool::CarvingPool>(backend_, Location::Host(),
                                                    options, clock_));
    if (device) {
      pools_->Add(std::make_unique<pool::CarvingPool>(backend_, Location::Device(0),
                                                      options, clock_));
    }
    broker_ = std::make_unique<Broker>(*pools_, limits, clock_);
  }

  SessionId Start(PeerCredentials peer) {
    auto session = broker_->StartSession(peer, "test");
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }

  // Creates, writes `text` and seals.
  Grant Publish(SessionId session, const std::string& name,
                const std::string& text, std::uint32_t mode = kDefaultMode) {
    auto grant = broker_->Create(session, Params(name, text.size(), mode));
    EXPECT_TRUE(grant.ok()) << grant.status();
    Write(*grant, text);
    EXPECT_TRUE(broker_->Seal(session, grant->lease).ok());
    return std::move(*grant);
  }

  static void Write(const Grant& grant, const std::string& text) {
    void* map = ::mmap(nullptr, grant.mapped_bytes, PROT_READ | PROT_WRITE,
                       MAP_SHARED, grant.handle.fd, grant.offset);
    ASSERT_NE(map, MAP_FAILED);
    std::memcpy(map, text.data(), text.size());
    ::munmap(map, grant.mapped_bytes);
  }

  static std::string Read(const Grant& grant, std::size_t size) {
    void* map = ::mmap(nullptr, grant.mapped_bytes, PROT_READ, MAP_SHARED,
                       grant.handle.fd, grant.offset);
    EXPECT_NE(map, MAP_FAILED);
    std::string text(static_cast<const char*>(map), size);
    ::munmap(map, grant.mapped_bytes);
    return text;
  }

  test::FakeClock clock_;
  test::FakeBackend backend_;
  std::unique_ptr<pool::PoolSet> pools_;
  std::unique_ptr<Broker> broker_;
};

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

// ---- Per-uid limits ----

TEST_F(BrokerTest, SessionsPerUidAreLimitedWithTheNumbersAndTheKey) {
  BrokerLimits limits;
  limits.max_sessions_per_uid = 2;
  MakeBroker(limits);
  SessionId first = Start(Peer(kAlice, kStaff));
  Start(Peer(kAlice, kStaff));
  auto third = broker_->StartSession(Peer(kAlice, kStaff), "c");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(),
            "uid 1000 holds 2 sessions; the limit is 2 (max_sessions_per_uid)");
  EXPECT_TRUE(broker_->StartSession(Peer(kBob, kStaff), "b").ok()) << "bob has his own";
  broker_->EndSession(first);
  EXPECT_TRUE(broker_->StartSession(Peer(kAlice, kStaff), "c").ok());
  EXPECT_EQ(broker_->Counts().rejections.sessions_per_uid, 1u);
}

TEST_F(BrokerTest, RootIsNotExemptFromPerUidLimits) {
  BrokerLimits limits;
  limits.max_sessions_per_uid = 1;
  MakeBroker(limits);
  Start(Peer(0, 0));
  EXPECT_EQ(broker_->StartSession(Peer(0, 0), "again").status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(BrokerTest, BuffersPerUidCountOwnedBuffersUntilTheirMemoryIsFreed) {
  BrokerLimits limits;
  limits.max_buffers_per_uid = 2;
  MakeBroker(limits);
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  auto a = broker_->Create(alice, Params("a", 10));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(broker_->Create(alice, Params("b", 10)).ok());
  auto third = broker_->Create(alice, Params("c", 10));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(third.status().message(),
            "uid 1000 owns 2 buffers; the limit is 2 (max_buffers_per_uid)");
  auto either = broker_->OpenOrCreate(alice, Params("d", 10), broker_->NewWatchId(), {});
  EXPECT_EQ(either.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(broker_->Create(bob, Params("e", 10)).ok()) << "bob has his own";
  // Unlinked but leased, a buffer still holds its memory and counts.
  ASSERT_TRUE(broker_->Unlink(alice, "a").ok());
  EXPECT_FALSE(broker_->Create(alice, Params("c", 10)).ok());
  ASSERT_TRUE(broker_->Release(alice, a->lease).ok());
  EXPECT_TRUE(broker_->Create(alice, Params("c", 10)).ok());
  EXPECT_EQ(broker_->Counts().rejections.buffers_per_uid, 3u);
}

TEST_F(BrokerTest, LeasesPerUidAreLimitedAcrossItsSessions) {
  BrokerLimits limits;
  limits.max_leases_per_uid = 3;
  MakeBroker(limits);
  SessionId first = Start(Peer(kAlice, kStaff));
  SessionId second = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(first, "a", "x", 0644);  // The writer's lease is the first.
  auto opened = broker_->Open(first, {"a", Access::kRead});
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE(broker_->Open(second, {"a", Access::kRead}).ok());
  auto fourth = broker_->Open(second, {"a", Access::kRead});
  EXPECT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(fourth.status().message(),
            "uid 1000 holds 3 leases; the limit is 3 (max_leases_per_uid)");
  EXPECT_TRUE(broker_->Open(bob, {"a", Access::kRead}).ok()) << "bob has his own";
  ASSERT_TRUE(broker_->Release(first, opened->lease).ok());
  EXPECT_TRUE(broker_->Open(second, {"a", Access::kRead}).ok());
  broker_->EndSession(second);  // Its two leases go with it.
  EXPECT_TRUE(broker_->Open(first, {"a", Access::kRead}).ok());
  EXPECT_TRUE(broker_->Open(first, {"a", Access::kRead}).ok());
  EXPECT_EQ(broker_->Counts().rejections.leases_per_uid, 1u);
}

TEST_F(BrokerTest, WaitsArePerUidAndDaemonWideLimited) {
  BrokerLimits limits;
  limits.max_waits_per_uid = 2;
  limits.max_waits = 3;
  MakeBroker(limits);
  SessionId first = Start(Peer(kAlice, kStaff));
  SessionId second = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  SessionId carol = Start(Peer(1003, kStaff));
  auto wait = [&](SessionId session, const char* name, WatchId watch = 0) {
    return broker_->OpenOrWatch(session, {name, Access::kRead},
                                watch != 0 ? watch : broker_->NewWatchId(), [] {});
  };
  const WatchId cancelled = broker_->NewWatchId();
  ASSERT_TRUE(wait(first, "x", cancelled).ok());
  ASSERT_TRUE(wait(second, "y").ok());
  auto over_uid = wait(first, "z");
  EXPECT_EQ(over_uid.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over_uid.status().message(),
            "uid 1000 has 2 calls waiting (Open, Create, WaitTransfer); the limit is 2 "
            "(max_waits_per_uid)");
  ASSERT_TRUE(wait(bob, "x").ok());
  auto over_all = wait(carol, "x");
  EXPECT_EQ(over_all.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(over_all.status().message(),
            "3 calls are waiting (Open, Create, WaitTransfer); the limit is 3 (max_waits)");
  // A cancelled, a woken and an ended wait each give their room back.
  EXPECT_TRUE(broker_->CancelWatch(cancelled));
  EXPECT_TRUE(wait(carol, "x").ok());
  Publish(bob, "y", "1", 0644);  // Wakes second's.
  EXPECT_TRUE(wait(first, "z").ok());
  broker_->EndSession(bob);
  EXPECT_TRUE(wait(second, "w").ok()) << "alice: first's z and second's w";
  const LimitRejections rejections = broker_->Counts().rejections;
  EXPECT_EQ(rejections.waits_per_uid, 1u);
  EXPECT_EQ(rejections.waits, 1u);
}

// ---- Byte quotas ----

BrokerLimits Quotas(const char* uid, const char* session) {
  BrokerLimits limits;
  limits.max_uid_bytes = *Quota::Parse(uid);
  limits.max_session_bytes = *Quota::Parse(session);
  return limits;
}

TEST_F(BrokerTest, AUidQuotaRefusesWithTheNumbersAndFreesWithTheMemory) {
  MakeBroker(Quotas("3MiB", ""));
  SessionId alice = Start(Peer(kAlice, kStaff));
  auto a = broker_->Create(alice, Params("a", 2 * kMiB));
  ASSERT_TRUE(a.ok()) << a.status();
  auto over = broker_->Create(alice, Params("b", 2 * kMiB));
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(),
              HasSubstr("buffer 'b' (2 MiB (2097152 bytes) at host) would take uid 1000 "
                        "over its quota of 3 MiB (3145728 bytes) at host (max_uid_bytes): "
                        "its buffers there take 2 MiB (2097152 bytes)"));
  EXPECT_EQ(broker_->Stat(alice, "b").status().code(), absl::StatusCode::kNotFound);
  // Up to the quota exactly is fine.
  ASSERT_TRUE(broker_->Create(alice, Params("c", kMiB)).ok());
  EXPECT_FALSE(broker_->Create(alice, Params("d", 1)).ok());
  // Unlinked, a buffer counts while its memory lives: until its last lease.
  ASSERT_TRUE(broker_->Unlink(alice, "a").ok());
  EXPECT_FALSE(broker_->Create(alice, Params("e", 2 * kMiB)).ok());
  ASSERT_TRUE(broker_->Release(alice, a->lease).ok());
  EXPECT_TRUE(broker_->Create(alice, Params("e", 2 * kMiB)).ok());
  const LimitRejections rejections = broker_->Counts().rejections;
  EXPECT_EQ(rejections.quotas.at({"max_uid_bytes", "host"}), 3u);
}

TEST_F(BrokerTest, AUidQuotaCountsEveryOwnedBufferAndOnlyThoseOfItsUid) {
  MakeBroker(Quotas("3MiB", ""));
  SessionId first = Start(Peer(kAlice, kStaff));
  SessionId second = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(first, "a", std::string(2 * kMiB, 'a'));
  // Another session of the same uid shares the quota...
  EXPECT_EQ(broker_->Create(second, Params("b", 2 * kMiB)).status().code(),
            absl::StatusCode::kResourceExhausted);
  // ...another uid has its own.
  EXPECT_TRUE(broker_->Create(bob, Params("c", 3 * kMiB)).ok());
  // A persistent buffer outlives its session and still counts for its uid.
  broker_->EndSession(first);
  EXPECT_EQ(broker_->Create(second, Params("d", 2 * kMiB)).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(BrokerTest, ASessionQuotaHoldsPerSessionWhileItLasts) {
  MakeBroker(Quotas("", "2MiB"));
  SessionId first = Start(Peer(kAlice, kStaff));
  SessionId second = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->Create(first, Params("a", 2 * kMiB)).ok());
  auto over = broker_->Create(first, Params("b", 1));
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("would take session "));
  EXPECT_THAT(over.status().message(), HasSubstr("(pid 5000) over its quota of 2 MiB"));
  EXPECT_THAT(over.status().message(), HasSubstr("(max_session_bytes)"));
  EXPECT_TRUE(broker_->Create(second, Params("c", 2 * kMiB)).ok());
  EXPECT_EQ(broker_->Counts().rejections.quotas.at({"max_session_bytes", "host"}), 1u);
}

TEST_F(BrokerTest, QuotasArePerLocation) {
  MakeBroker(Quotas("host=1MiB,device=4MiB", ""), /*device=*/true);
  SessionId alice = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->Create(alice, Params("h", kMiB)).ok());
  CreateParams on_device = Params("d", 4 * kMiB);
  on_device.location = Location::Device(0);
  EXPECT_TRUE(broker_->Create(alice, on_device).ok()) << "host's use does not count";
  on_device.name = "d2";
  auto over = broker_->Create(alice, on_device);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("at device:0 (max_uid_bytes)"));
}

TEST_F(BrokerTest, OpenOrCreateIsRefusedOnlyWhenItWouldCreate) {
  MakeBroker(Quotas("1MiB", ""));
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(alice, "shared", std::string(kMiB, 's'), 0644);
  auto refused = broker_->OpenOrCreate(alice, Params("mine", 1), broker_->NewWatchId(), {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  // Opening what exists takes nothing of a quota.
  auto opened = broker_->OpenOrCreate(bob, Params("shared", kMiB), broker_->NewWatchId(), {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(opened->has_value());
  EXPECT_FALSE((*opened)->created);
}

TEST_F(BrokerTest, QuotasChargeWhatThePoolSetsAsideNotTheSizeAsked) {
  MakeBroker(Quotas("1MiB", ""));
  SessionId alice = Start(Peer(kAlice, kStaff));
  // One byte takes a page: 256 of them fill 1 MiB.
  for (int i = 0; i < 256; ++i) {
    ASSERT_TRUE(broker_->Create(alice, Params(absl::StrCat("tiny/", i), 1)).ok()) << i;
  }
  auto over = broker_->Create(alice, Params("tiny/256", 1));
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(),
              HasSubstr("buffer 'tiny/256' (1 B (1 bytes) at host, taking 4 KiB "
                        "(4096 bytes)) would take uid 1000 over its quota of 1 MiB "
                        "(1048576 bytes) at host (max_uid_bytes): its buffers there "
                        "take 1 MiB (1048576 bytes)"));
  auto usage = broker_->Usage(alice);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ((*usage)[0].bytes, kMiB);
  EXPECT_EQ((*usage)[0].bytes, pools_->Stats()[0].used_bytes);
  EXPECT_EQ(broker_->Sessions(alice)->at(0).created_bytes, kMiB);
}

TEST_F(BrokerTest, DeviceBuffersAreChargedWholeGranules) {
  backend_.set_device_alignment(2 * kMiB);
  MakeBroker(Quotas("device=8MiB", ""), /*device=*/true);
  SessionId alice = Start(Peer(kAlice, kStaff));
  CreateParams tiny = Params("g/0", 1);
  tiny.location = Location::Device(0);
  for (int i = 0; i < 4; ++i) {
    tiny.name = absl::StrCat("g/", i);
    ASSERT_TRUE(broker_->Create(alice, tiny).ok()) << i;
  }
  tiny.name = "g/4";
  auto over = broker_->Create(alice, tiny);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("taking 2 MiB (2097152 bytes)"));
  EXPECT_THAT(over.status().message(), HasSubstr("take 8 MiB (8388608 bytes)"));
  // Refused before allocating: the pool holds the four granules only.
  EXPECT_EQ(pools_->Stats()[1].used_bytes, 8 * kMiB);
}

TEST_F(BrokerTest, UsageShowsEachUidItsOwnAndRootEveryone) {
  MakeBroker(Quotas("host=8MiB", ""), /*device=*/true);
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  SessionId root = Start(Peer(0, 0));
  Publish(alice, "a1", std::string(kMiB, '1'));
  Publish(alice, "a2", std::string(2 * kMiB, '2'));
  CreateParams on_device = Params("ad", 3 * kMiB);
  on_device.location = Location::Device(0);
  ASSERT_TRUE(broker_->Create(alice, on_device).ok());
  Publish(bob, "b", std::string(kMiB, 'b'));

  auto mine = broker_->Usage(alice);
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_EQ(mine->size(), 2u) << "alice sees only her own, per location";
  EXPECT_EQ((*mine)[0].location, Location::Host());
  EXPECT_EQ((*mine)[0].bytes, 3 * kMiB);
  EXPECT_EQ((*mine)[0].buffers, 2u);
  EXPECT_EQ((*mine)[0].quota_bytes, 8 * kMiB);
  EXPECT_EQ((*mine)[1].location, Location::Device(0));
  EXPECT_EQ((*mine)[1].bytes, 3 * kMiB);
  EXPECT_EQ((*mine)[1].quota_bytes, 0u) << "no quota there";

  auto everyone = broker_->Usage(root);
  ASSERT_TRUE(everyone.ok());
  ASSERT_EQ(everyone->size(), 3u);
  EXPECT_EQ((*everyone)[2].uid, kBob);
  EXPECT_EQ(broker_->Usage(0)->size(), 3u) << "session 0: metrics see all";
  // Sessions say what each created, all locations together.
  auto listed = broker_->Sessions(root);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 3u);
  std::map<uid_t, std::uint64_t> created;
  for (const SessionInfo& session : *listed) created[session.uid] = session.created_bytes;
  EXPECT_EQ(created[kAlice], 6 * kMiB);  // 3 host + 3 device
  EXPECT_EQ(created[kBob], kMiB);
  EXPECT_EQ(created[0], 0u);

  // Unlinked, and its writer's lease gone with the session: freed, and off
  // the list.
  ASSERT_TRUE(broker_->Unlink(bob, "b").ok());
  EXPECT_EQ(broker_->Usage(root)->size(), 3u) << "still leased";
  broker_->EndSession(bob);
  EXPECT_EQ(broker_->Usage(root)->size(), 2u);
  EXPECT_EQ(broker_->Usage(bob).status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(BrokerTest, ASnapshotsCountsAndUsageAgreeOnEveryBuffer) {
  MakeBroker(Quotas("", ""), /*device=*/true);
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(alice, "a1", std::string(kMiB, '1'));
  Publish(alice, "a2", std::string(2 * kMiB, '2'));
  Publish(bob, "b", std::string(kMiB, 'b'));
  ASSERT_TRUE(broker_->Unlink(bob, "b").ok());

  const BrokerSnapshot snapshot = broker_->Snapshot();
  EXPECT_EQ(snapshot.counts.buffers, 3u);
  EXPECT_EQ(snapshot.counts.sessions, 2u);
  std::uint64_t buffers = 0;
  for (const UidUsage& usage : snapshot.usage) buffers += usage.buffers;
  EXPECT_EQ(buffers, snapshot.counts.buffers)
      << "every buffer counted is in some uid's usage, and no other";
  ASSERT_EQ(snapshot.usage.size(), 2u) << "every uid, as root would see it";
  EXPECT_EQ(snapshot.usage[0].uid, kAlice);
  EXPECT_EQ(snapshot.usage[1].uid, kBob);
}

TEST_F(BrokerTest, NewQuotasApplyToTheNextRequest) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->Create(alice, Params("a", 2 * kMiB)).ok());
  broker_->SetLimits(Quotas("1MiB", ""));
  // What exists stays; nothing more fits.
  EXPECT_TRUE(broker_->Stat(alice, "a").ok());
  EXPECT_EQ(broker_->Create(alice, Params("b", 1)).status().code(),
            absl::StatusCode::kResourceExhausted);
  broker_->SetLimits(BrokerLimits{});
  EXPECT_TRUE(broker_->Create(alice, Params("b", 1)).ok());
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

// ---- Permissions ----

// The refusal says what was refused, and nothing of the buffer: neither its
// owner, group, mode nor size goes to a uid that may not read it.
TEST_F(BrokerTest, OwnerOnlyBufferIsRefusedToOtherUsersWithoutItsDetails) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(alice, "private", "secret");
  auto grant = broker_->Open(bob, {"private", Access::kRead});
  EXPECT_EQ(grant.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(grant.status().message(), "uid 1001 may not read buffer 'private'");
  auto stat = broker_->Stat(bob, "private");
  EXPECT_EQ(stat.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(stat.status().message(), "uid 1001 may not inspect buffer 'private'");
  EXPECT_TRUE(broker_->List(bob, "")->empty());
  absl::Status unlink = broker_->Unlink(bob, "private");
  EXPECT_EQ(unlink.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(unlink.message(),
            "uid 1001 may not unlink buffer 'private': only its owner and root may");
}

// A caller who may read the buffer may Stat it anyway: a refusal to write
// or unlink tells it owner, group and mode, to say why.
TEST_F(BrokerTest, AReaderIsToldWhoOwnsTheBufferItMayNotWrite) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  auto created =
      broker_->Create(alice, CreateParams{"shared", 64, Location::Host(), 0644});
  ASSERT_TRUE(created.ok()) << created.status();
  auto grant = broker_->Open(bob, {"shared", Access::kReadWrite});
  EXPECT_EQ(grant.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(grant.status().message(),
            "uid 1001 may not write buffer 'shared' (owner uid 1000, gid 50, mode 0644)");
}

TEST_F(BrokerTest, GroupModeAdmitsMembersOfTheOwnersGroupOnly) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob_staff = Start(Peer(kBob, kOther, {kOther, kStaff}));
  SessionId bob_other = Start(Peer(kBob, kOther, {kOther}));
  Publish(alice, "team", "shared", 0640);
  EXPECT_TRUE(broker_->Open(bob_staff, {"team", Access::kRead}).ok());
  EXPECT_EQ(broker_->Open(bob_other, {"team", Access::kRead}).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Group members may read but not unlink: only the owner and root may.
  EXPECT_EQ(broker_->Unlink(bob_staff, "team").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(BrokerTest, WriteNeedsTheWriteBit) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  ASSERT_TRUE(broker_->Create(alice, Params("ro-for-group", kMiB, 0640)).ok());
  ASSERT_TRUE(broker_->Create(alice, Params("rw-for-group", kMiB, 0660)).ok());
  EXPECT_EQ(broker_->Open(bob, {"ro-for-group", Access::kReadWrite}).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(broker_->Open(bob, {"rw-for-group", Access::kReadWrite}).ok());
}

TEST_F(BrokerTest, RootMayReadAndUnlinkAnything) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId root = Start(Peer(0, 0));
  Publish(alice, "private", "secret");
  EXPECT_TRUE(broker_->Open(root, {"private", Access::kRead}).ok());
  EXPECT_THAT(*broker_->List(root, ""), ::testing::SizeIs(1));
  EXPECT_TRUE(broker_->Unlink(root, "private").ok());
}

TEST_F(BrokerTest, MemoryIsReusedOnlyByBuffersOfTheSameOwnerGroupAndMode) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  auto release_and_unlink = [&](Grant grant, const std::string& name) {
    ASSERT_TRUE(broker_->Release(alice, grant.lease).ok());
    ASSERT_TRUE(broker_->Unlink(alice, name).ok());
  };
  release_and_unlink(Publish(alice, "private", "x", 0600), "private");
  // Another mode is another set of readers: it must not get that memory.
  Publish(alice, "public", "y", 0644);
  EXPECT_EQ(pools_->Stats()[0].hit_count, 0u);
  Publish(alice, "private2", "z", 0600);
  EXPECT_EQ(pools_->Stats()[0].hit_count, 1u);
}

// ---- List, Stat, Sessions ----

TEST_F(BrokerTest, ListFiltersByPrefixAndSortsByName) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  for (const char* name : {"job/b", "job/a", "other", "job2"}) {
    Publish(alice, name, "x");
  }
  auto listed = broker_->List(alice, "job/");
  ASSERT_TRUE(listed.ok());
  std::vector<std::string> names;
  for (const auto& info : *listed) names.push_back(info.name);
  EXPECT_THAT(names, ElementsAre("job/a", "job/b"));
  EXPECT_EQ(broker_->List(alice, "")->size(), 4u);
  EXPECT_EQ(broker_->List(alice, "bad prefix").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(broker_->List(alice, std::string(256, 'x')).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// An unlinked buffer still leased takes memory: an operator's List may
// show it (issue 29), marked unlinked, after the buffer that took its name
// since, to whoever could read it while it was named, and to nobody else.
TEST_F(BrokerTest, ListShowsUnlinkedLeasedBuffersOnlyWhenAskedAndOnlyToReaders) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  SessionId root = Start(Peer(0, 0));
  Grant held = Publish(alice, "job/a", "old");
  ASSERT_TRUE(broker_->Unlink(alice, "job/a").ok());
  Publish(alice, "job/a", "new");
  Publish(alice, "other", "x");

  EXPECT_EQ(broker_->List(alice, "job/")->size(), 1u) << "not unless asked";
  auto listed = broker_->List(alice, "job/", /*include_unlinked=*/true);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_FALSE((*listed)[0].unlinked);
  EXPECT_TRUE((*listed)[1].unlinked);
  EXPECT_EQ((*listed)[1].id, held.buffer.id);
  EXPECT_EQ((*listed)[1].lease_count, 1u);
  EXPECT_EQ(broker_->List(root, "", true)->size(), 3u);
  // Bob could not read it while it was named (0600): nor now.
  EXPECT_TRUE(broker_->List(bob, "", true)->empty());

  ASSERT_TRUE(broker_->Release(alice, held.lease).ok());
  EXPECT_EQ(broker_->List(alice, "job/", true)->size(), 1u) << "freed: nothing to show";
}

// Who holds a buffer's leases (issue 29): a uid sees its own sessions' in
// full, and of other uids' leases only how many (lease_count says as much);
// root sees every holder.
TEST_F(BrokerTest, StatShowsOwnUidsHoldersAndOnlyCountsOthers) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId alice_reader = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  SessionId root = Start(Peer(0, 0));
  Publish(alice, "shared", "x", 0644);  // Sealed: Publish's lease stays.
  clock_.Advance(absl::Seconds(1));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(broker_->Open(alice_reader, {"shared"}).ok());
  auto bobs_lease = broker_->Open(bob, {"shared"});
  ASSERT_TRUE(bobs_lease.ok()) << bobs_lease.status();

  auto seen = broker_->Stat(alice, "shared");
  ASSERT_TRUE(seen.ok()) << seen.status();
  ASSERT_EQ(seen->holders.listed.size(), 2u);
  const LeaseHolder& writer = seen->holders.listed[0];  // The oldest first.
  EXPECT_EQ(writer.session, alice);
  EXPECT_EQ(writer.pid, 4000 + static_cast<pid_t>(kAlice));
  EXPECT_EQ(writer.uid, kAlice);
  EXPECT_EQ(writer.command, "test");
  EXPECT_EQ(writer.access, Access::kReadWrite);
  EXPECT_EQ(writer.leases, 1u);
  EXPECT_EQ(writer.location, Location::Host());
  const LeaseHolder& reader = seen->holders.listed[1];
  EXPECT_EQ(reader.session, alice_reader);
  EXPECT_EQ(reader.access, Access::kRead);
  EXPECT_EQ(reader.leases, 2u) << "one line per session, location and access";
  EXPECT_EQ(seen->holders.other_users_leases, 1u);
  EXPECT_EQ(seen->holders.unlisted_leases, 0u);

  auto bobs = broker_->Stat(bob, "shared");
  ASSERT_TRUE(bobs.ok()) << bobs.status();
  ASSERT_EQ(bobs->holders.listed.size(), 1u);
  EXPECT_EQ(bobs->holders.listed[0].session, bob);
  EXPECT_EQ(bobs->holders.other_users_leases, 3u);

  auto roots = broker_->Stat(root, "shared");
  ASSERT_TRUE(roots.ok()) << roots.status();
  EXPECT_EQ(roots->holders.listed.size(), 3u);
  EXPECT_EQ(roots->holders.other_users_leases, 0u);
  // Holders are Stat's: a listing carries none.
  EXPECT_TRUE(broker_->List(root, "shared")->at(0).holders.listed.empty());
  // A lease released holds nothing any more.
  ASSERT_TRUE(broker_->Release(bob, bobs_lease->lease).ok());
  EXPECT_EQ(broker_->Stat(root, "shared")->holders.listed.size(), 2u);
}

TEST_F(BrokerTest, StatListsAtMostTheCapOfHoldersAndCountsTheRest) {
  Publish(Start(Peer(kAlice, kStaff)), "popular", "x", 0644);
  SessionId root = Start(Peer(0, 0));
  const std::size_t extra = 6;
  for (std::size_t i = 0; i < kMaxListedHolders + extra; ++i) {
    ASSERT_TRUE(broker_->Open(Start(Peer(kBob, kOther)), {"popular"}).ok());
  }
  auto seen = broker_->Stat(root, "popular");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->holders.listed.size(), kMaxListedHolders);
  // The holders past the cap, one lease each.
  EXPECT_EQ(seen->holders.unlisted_leases, 1 + extra);
  EXPECT_EQ(seen->lease_count, kMaxListedHolders + extra + 1);
}

TEST_F(BrokerTest, SessionsShowsOwnUidToUsersAndEverythingToRoot) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  Start(Peer(kBob, kStaff));
  SessionId root = Start(Peer(0, 0));
  Publish(alice, "a", "x");
  auto mine = broker_->Sessions(alice);
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].id, alice);
  EXPECT_EQ((*mine)[0].uid, kAlice);
  EXPECT_EQ((*mine)[0].lease_count, 1u);
  EXPECT_EQ((*mine)[0].command, "test");
  EXPECT_EQ(broker_->Sessions(root)->size(), 3u);
}

TEST_F(BrokerTest, CallsOfAnUnknownSessionAreUnauthenticated) {
  EXPECT_EQ(broker_->Create(42, Params("a")).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(broker_->Release(42, 1).code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(broker_->List(42, "").status().code(),
            absl::StatusCode::kUnauthenticated);
}

// ---- Waiting opens ----

TEST_F(BrokerTest, WatchWakesOnSealAndTheRetryGetsTheBuffer) {
  SessionId producer = Start(Peer(kAlice, kStaff));
  SessionId consumer = Start(Peer(kAlice, kStaff));
  std::atomic<int> woken{0};
  WatchId watch = broker_->NewWatchId();
  auto first = broker_->OpenOrWatch(consumer, {"late", Access::kRead}, watch,
                                    [&] { ++woken; });
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->has_value());  // Not there yet: waiting.

  auto grant = broker_->Create(producer, Params("late", 2));
  ASSERT_TRUE(grant.ok());
  EXPECT_EQ(woken.load(), 0);  // Created is not enough.
  ASSERT_TRUE(broker_->Seal(producer, grant->lease).ok());
  EXPECT_EQ(woken.load(), 1);

  auto retry = broker_->OpenOrWatch(consumer, {"late", Access::kRead},
                                    broker_->NewWatchId(), [&] { ++woken; });
  ASSERT_TRUE(retry.ok());
  ASSERT_TRUE(retry->has_value());
  EXPECT_EQ((*retry)->buffer.state, BufferState::kSealed);
  EXPECT_FALSE(broker_->CancelWatch(watch));  // Already woken.
}

TEST_F(BrokerTest, CancelledWatchDoesNotWake) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  bool woken = false;
  WatchId watch = broker_->NewWatchId();
  ASSERT_TRUE(broker_->OpenOrWatch(alice, {"x", Access::kRead}, watch,
                                   [&] { woken = true; }).ok());
  EXPECT_TRUE(broker_->CancelWatch(watch));
  Publish(alice, "x", "1");
  EXPECT_FALSE(woken);
}

TEST_F(BrokerTest, EndingTheSessionWakesItsWatchesToFail) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  bool woken = false;
  ASSERT_TRUE(broker_->OpenOrWatch(alice, {"x", Access::kRead},
                                   broker_->NewWatchId(), [&] { woken = true; })
                  .ok());
  broker_->EndSession(alice);
  EXPECT_TRUE(woken);
}

// Wakes run once the broker's mutex is released: a wake that retries at once
// (as the service's does) would otherwise deadlock.
TEST_F(BrokerTest, AWakeRetriesInsideTheSealThatWokeIt) {
  SessionId producer = Start(Peer(kAlice, kStaff));
  SessionId consumer = Start(Peer(kAlice, kStaff));
  absl::StatusOr<std::optional<Grant>> retried;
  ASSERT_TRUE(broker_->OpenOrWatch(consumer, {"late", Access::kRead},
                                   broker_->NewWatchId(), [&] {
                                     retried = broker_->OpenOrWatch(
                                         consumer, {"late", Access::kRead},
                                         broker_->NewWatchId(), nullptr);
                                   })
                  .ok());
  Publish(producer, "late", "x");
  ASSERT_TRUE(retried.ok()) << retried.status();
  ASSERT_TRUE(retried->has_value());
  EXPECT_EQ((*retried)->buffer.name, "late");
}

TEST_F(BrokerTest, AWakeRetriesInsideTheSessionEndThatWokeItAndIsRefused) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  absl::Status retried;
  ASSERT_TRUE(broker_->OpenOrWatch(alice, {"x", Access::kRead}, broker_->NewWatchId(),
                                   [&] {
                                     retried = broker_->Open(alice, {"x", Access::kRead})
                                                   .status();
                                   })
                  .ok());
  broker_->EndSession(alice);
  EXPECT_TRUE(absl::IsUnauthenticated(retried)) << retried;
}

TEST_F(BrokerTest, AWaitRefusedByALimitIsCountedAndAnEndedWaitGivesItsPlaceBack) {
  BrokerLimits limits;
  limits.max_waits_per_uid = 1;
  MakeBroker(limits);
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId again = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->OpenOrWatch(alice, {"x", Access::kRead},
                                   broker_->NewWatchId(), [] {}).ok());
  EXPECT_EQ(broker_->OpenOrWatch(again, {"y", Access::kRead}, broker_->NewWatchId(),
                                 [] {}).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(broker_->Counts().rejections.waits_per_uid, 1u);
  broker_->EndSession(alice);
  auto waits = broker_->OpenOrWatch(again, {"y", Access::kRead}, broker_->NewWatchId(),
                                    [] {});
  ASSERT_TRUE(waits.ok()) << waits.status();
  EXPECT_FALSE(waits->has_value());
}

TEST_F(BrokerTest, WatchesPerSessionAreLimited) {
  BrokerLimits limits;
  limits.max_waits_per_session = 1;
  MakeBroker(limits);
  SessionId alice = Start(Peer(kAlice, kStaff));
  ASSERT_TRUE(broker_->OpenOrWatch(alice, {"x", Access::kRead},
                                   broker_->NewWatchId(), [] {}).ok());
  auto second = broker_->OpenOrWatch(alice, {"y", Access::kRead},
                                     broker_->NewWatchId(), [] {});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(second.status().message(), HasSubstr("the limit is 1"));
}

TEST_F(BrokerTest, WatchDoesNotHidePermissionDenied) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kStaff));
  Publish(alice, "private", "x");
  auto attempt = broker_->OpenOrWatch(bob, {"private", Access::kRead},
                                      broker_->NewWatchId(), [] {});
  EXPECT_EQ(attempt.status().code(), absl::StatusCode::kPermissionDenied);
}

// ---- OpenOrCreate ----

TEST_F(BrokerTest, OpenOrCreateCreatesOnceThenOpens) {
  SessionId first = Start(Peer(kAlice, kStaff));
  SessionId second = Start(Peer(kAlice, kStaff));
  auto created = broker_->OpenOrCreate(first, Params("shared", 8),
                                       broker_->NewWatchId(), nullptr);
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(created->has_value());
  EXPECT_TRUE((*created)->created);
  EXPECT_EQ((*created)->access, Access::kReadWrite);

  // Unsealed and no wake: the second caller hears why it cannot read yet.
  auto early = broker_->OpenOrCreate(second, Params("shared", 8),
                                     broker_->NewWatchId(), nullptr);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition);

  ASSERT_TRUE(broker_->Seal(first, (*created)->lease).ok());
  auto opened = broker_->OpenOrCreate(second, Params("shared", 8),
                                      broker_->NewWatchId(), nullptr);
  ASSERT_TRUE(opened.ok());
  ASSERT_TRUE(opened->has_value());
  EXPECT_FALSE((*opened)->created);
  EXPECT_EQ((*opened)->access, Access::kRead);
}

TEST_F(BrokerTest, OpenOrCreateWithADifferentSizeIsFailedPrecondition) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  Publish(alice, "a", "1234");
  auto mismatch = broker_->OpenOrCreate(alice, Params("a", 5),
                                        broker_->NewWatchId(), nullptr);
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(mismatch.status().message(), HasSubstr("exists with size 4"));
}

// ---- Demanding the producer; what OpenOrCreate tells ----

TEST_F(BrokerTest, AnExpectedOwnerRefusesBuffersOfAnyOtherOwner) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  SessionId root = Start(Peer(0, 0));
  Publish(alice, "result", "x", 0644);
  OpenParams demand{"result", Access::kRead, kAlice};
  EXPECT_TRUE(broker_->Open(bob, demand).ok());
  demand.expected_owner = kBob;
  auto denied = broker_->Open(bob, demand);
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.status().message(),
            "buffer 'result' is owned by uid 1000, not by the demanded uid 1001 "
            "(a name belongs to whoever creates it first)");
  demand.expected_owner = 0;
  EXPECT_EQ(broker_->Open(root, demand).status().code(),
            absl::StatusCode::kPermissionDenied)
      << "root may read anything, but it is not the owner";
}

TEST_F(BrokerTest, TheOwnerIsCheckedOnlyAfterTheReadPermission) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  Publish(alice, "private", "x", 0600);
  auto denied = broker_->Open(bob, {"private", Access::kRead, kBob});
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.status().message(), HasSubstr("may not read"));
  EXPECT_THAT(denied.status().message(), Not(HasSubstr("demanded")));
}

TEST_F(BrokerTest, AWaitWokenByAForgedSealIsDenied) {
  SessionId consumer = Start(Peer(kBob, kOther));
  SessionId forger = Start(Peer(1003, 1003));
  const OpenParams demand{"late", Access::kRead, kAlice};
  std::atomic<int> woken{0};
  auto first = broker_->OpenOrWatch(consumer, demand, broker_->NewWatchId(),
                                    [&] { ++woken; });
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->has_value());
  Publish(forger, "late", "forged", 0644);
  EXPECT_EQ(woken.load(), 1);
  // The retry the wake calls for (service/waiting_open) is refused.
  auto retry = broker_->OpenOrWatch(consumer, demand, broker_->NewWatchId(), [] {});
  EXPECT_EQ(retry.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(retry.status().message(), HasSubstr("owned by uid 1003"));
  // Without the demand, the forgery would have been handed out.
  EXPECT_TRUE(broker_->Open(consumer, {"late", Access::kRead}).ok());
}

TEST_F(BrokerTest, OpenOrCreateChecksTheExpectedOwnerOfAnExistingBuffer) {
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  Publish(alice, "shared", "12345678", 0644);
  CreateParams params = Params("shared", 8);
  params.expected_owner = kAlice;
  auto opened = broker_->OpenOrCreate(bob, params, broker_->NewWatchId(), {});
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_FALSE((*opened)->created);
  params.expected_owner = kBob;
  EXPECT_EQ(broker_->OpenOrCreate(bob, params, broker_->NewWatchId(), {}).status().code(),
            absl::StatusCode::kPermissionDenied);
  // A free name is created, and the creator owns it whatever it expected.
  params.name = "fresh";
  params.expected_owner = kAlice;
  auto created = broker_->OpenOrCreate(bob, params, broker_->NewWatchId(), {});
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE((*created)->created);
  EXPECT_EQ((*created)->buffer.owner_uid, kBob);
}

TEST_F(BrokerTest, OpenOrCreateOfAnUnreadableBufferTellsNeitherSizeNorLocation) {
  MakeBroker(BrokerLimits{}, /*device=*/true);
  SessionId alice = Start(Peer(kAlice, kStaff));
  SessionId bob = Start(Peer(kBob, kOther));
  CreateParams secret = Params("secret", 12345);
  secret.location = Location::Device(0);
  ASSERT_TRUE(broker_->Create(alice, secret).ok());
  for (CreateParams guess : {Params("secret", 1), secret}) {
    auto denied = broker_->OpenOrCreate(bob, guess, broker_->NewWatchId(), {});
    EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(denied.status().message(), Not(HasSubstr("12345")));
    EXPECT_THAT(denied.status().message(), Not(HasSubstr("device")));
    EXPECT_THAT(denied.status().message(), Not(HasSubstr("size")));
  }
}

}  // namespace
}  // namespace memd::broker
