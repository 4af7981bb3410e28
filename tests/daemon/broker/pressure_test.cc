// The broker under memory pressure: a location that is full takes back
// unleased data its retention lets go (demoted copies first, then whole
// evictable buffers, from the uid most over its share, least recently used
// first), never a leased or pinned buffer, and says why a name is gone.

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/broker/broker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/broker/replica_fixture.h"

namespace memd::broker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Each location holds four 2 MiB buffers (each a segment of its own).
constexpr std::uint64_t kSize = 2 * kMiB;

class PressureTest : public ReplicaFixture {
 protected:
  PressureTest() {
    pool_limit_ = 4 * kSize;
    MakeBroker(BrokerLimits{});
  }

  // Creates `name` at `at` for `session`, writes `text` at its start and
  // seals it, then releases the writer's lease: nobody holds it after.
  absl::Status Put(SessionId session, const std::string& name, const Location& at,
                   Retention retention, const std::string& text = "bytes",
                   std::uint32_t mode = 0600) {
    CreateParams params{name, kSize, at, mode};
    params.retention = retention;
    auto grant = broker_->Create(session, params);
    if (!grant.ok()) return grant.status();
    Write(*grant, text);
    if (auto sealed = broker_->Seal(session, grant->lease); !sealed.ok()) return sealed.status();
    clock_.Advance(absl::Seconds(1));  // Later puts are used more recently.
    return broker_->Release(session, grant->lease);
  }

  // Opens `name` (a use, for the LRU order) and lets go of it again.
  void Use(SessionId session, const std::string& name) {
    auto grant = broker_->Open(session, OpenParams{name, Access::kRead});
    ASSERT_TRUE(grant.ok()) << grant.status();
    ASSERT_TRUE(broker_->Release(session, grant->lease).ok());
    clock_.Advance(absl::Seconds(1));
  }

  bool Exists(const std::string& name) { return broker_->Stat(alice_, name).ok() ||
                                                 broker_->Stat(bob_, name).ok(); }

  PressureCounts At(const Location& at) {
    const BrokerCounts counts = broker_->Counts();
    auto it = counts.pressure.find(at.ToString());
    return it == counts.pressure.end() ? PressureCounts{} : it->second;
  }
};

TEST_F(PressureTest, AFullLocationEvictsTheLeastRecentlyUsedUnleasedEvictableBuffer) {
  std::vector<std::string> logged;
  broker_->SetPressureLog([&](const std::string& line) { logged.push_back(line); });
  for (const char* name : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(Put(alice_, name, kHost, Retention::kEvictable).ok());
  }
  auto b = broker_->Stat(alice_, "b");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(journal_.Of(b->id).has_value());
  Use(alice_, "a");  // Now "b" is the least recently used.

  ASSERT_TRUE(Put(alice_, "e", kHost, Retention::kEvictable).ok());
  EXPECT_TRUE(Exists("a"));
  EXPECT_FALSE(Exists("b"));
  for (const char* name : {"c", "d", "e"}) EXPECT_TRUE(Exists(name)) << name;
  EXPECT_EQ(At(kHost).evictions, 1u);
  EXPECT_EQ(At(kHost).evicted_bytes, kSize);
  EXPECT_EQ(At(kHost).demotions, 0u);
  // Its owner learns why it is gone, from an open and from Stat.
  auto stat = broker_->Stat(alice_, "b");
  EXPECT_TRUE(absl::IsNotFound(stat.status()));
  EXPECT_THAT(stat.status().message(), HasSubstr("evicted at"));
  EXPECT_THAT(stat.status().message(), HasSubstr("under memory pressure on host"));
  auto open = broker_->Open(alice_, OpenParams{"b", Access::kRead});
  EXPECT_THAT(open.status().message(), HasSubstr("evicted at"));
  // The journal forgot it: a restart does not bring it back.
  EXPECT_FALSE(journal_.Of(b->id).has_value());
  EXPECT_EQ(UsageOf(kAlice, kHost), 4 * kSize);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_EQ(logged[0],
            "memory pressure on host: evicted buffer 'b' (2 MiB, uid 1000, unused for 4s) to "
            "make room for 2 MiB");
}

TEST_F(PressureTest, LeasedUnsealedAndPinnedBuffersAreNeverTaken) {
  ASSERT_TRUE(Put(alice_, "pinned", kHost, Retention::kPinned).ok());
  ASSERT_TRUE(Put(alice_, "read", kHost, Retention::kEvictable, "bytes", 0644).ok());
  auto reader = broker_->Open(bob_, OpenParams{"read", Access::kRead});
  ASSERT_TRUE(reader.ok()) << reader.status();
  CreateParams writing{"writing", kSize, kHost, 0644};
  writing.retention = Retention::kEvictable;
  ASSERT_TRUE(broker_->Create(alice_, writing).ok());  // Held, never sealed.
  ASSERT_TRUE(Put(alice_, "idle", kHost, Retention::kEvictable).ok());

  ASSERT_TRUE(Put(alice_, "new", kHost, Retention::kEvictable).ok());
  EXPECT_FALSE(Exists("idle"));
  for (const char* name : {"pinned", "read", "writing", "new"}) {
    EXPECT_TRUE(Exists(name)) << name;
  }
  // "new" is unleased now; one more takes it, then nothing is left to take.
  ASSERT_TRUE(Put(alice_, "newer", kHost, Retention::kPinned).ok());
  EXPECT_FALSE(Exists("new"));
  auto refused = broker_->Create(alice_, CreateParams{"refused", kSize, kHost, 0600});
  ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("nothing could give way"));
  EXPECT_THAT(refused.status().message(), HasSubstr("leased"));
  for (const char* name : {"pinned", "read", "writing", "newer"}) {
    EXPECT_TRUE(Exists(name)) << name;
  }
  EXPECT_EQ(At(kHost).evictions, 2u);
}

TEST_F(PressureTest, TheUidMostOverItsShareGivesWayFirstHoweverOftenItAsks) {
  // Bob's buffer is the oldest of all; Alice floods the host with hers.
  ASSERT_TRUE(Put(bob_, "bobs", kHost, Retention::kEvictable).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Put(alice_, "alice" + std::to_string(i), kHost, Retention::kEvictable).ok());
  }
  for (int i = 3; i < 20; ++i) {
    ASSERT_TRUE(Put(alice_, "alice" + std::to_string(i), kHost, Retention::kEvictable).ok())
        << i;
    ASSERT_TRUE(Exists("bobs")) << "after Alice's create " << i;
  }
  EXPECT_EQ(At(kHost).evictions, 17u);
  EXPECT_EQ(UsageOf(kBob, kHost), kSize);
}

TEST_F(PressureTest, ANameEvictedSaysSoOnlyToThoseWhoCouldReadItAndUntilItIsMadeAgain) {
  for (const char* name : {"secret", "b", "c", "d"}) {
    ASSERT_TRUE(Put(alice_, name, kHost, Retention::kEvictable).ok());
  }
  ASSERT_TRUE(Put(alice_, "e", kHost, Retention::kEvictable).ok());  // Evicts "secret".
  auto alices = broker_->Stat(alice_, "secret");
  EXPECT_THAT(alices.status().message(), HasSubstr("evicted at"));
  auto bobs = broker_->Stat(bob_, "secret");  // Mode 0600: Bob could not read it.
  EXPECT_TRUE(absl::IsNotFound(bobs.status()));
  EXPECT_THAT(bobs.status().message(), Not(HasSubstr("evicted")));

  ASSERT_TRUE(Put(alice_, "secret", kHost, Retention::kPinned).ok());  // Evicts "b".
  auto again = broker_->Stat(alice_, "secret");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->retention, Retention::kPinned);
  ASSERT_TRUE(broker_->Unlink(alice_, "secret").ok());
  EXPECT_THAT(broker_->Stat(alice_, "secret").status().message(), Not(HasSubstr("evicted")));

  // After an hour the broker forgets why.
  clock_.Advance(absl::Hours(2));
  EXPECT_THAT(broker_->Stat(alice_, "b").status().message(), Not(HasSubstr("evicted")));
}

TEST_F(PressureTest, DemotableCopiesGiveWayBeforeBuffersAndComeBackOnOpenWithTheSameBytes) {
  ASSERT_TRUE(Put(alice_, "weights", kHost, Retention::kDemotable, "the weights").ok());
  // An evictable buffer on the device, used longer ago than the copy.
  ASSERT_TRUE(Put(alice_, "old", kDev0, Retention::kEvictable).ok());
  Grant copy = OpenThere(alice_, "weights", kDev0);
  EXPECT_EQ(Read(copy, 11), "the weights");
  ASSERT_TRUE(broker_->Release(alice_, copy.lease).ok());
  ASSERT_TRUE(Put(alice_, "x", kDev0, Retention::kPinned).ok());
  ASSERT_TRUE(Put(alice_, "y", kDev0, Retention::kPinned).ok());

  ASSERT_TRUE(Put(alice_, "z", kDev0, Retention::kPinned).ok());
  // A demotion before an eviction, though "old" was used less recently.
  EXPECT_EQ(At(kDev0).demotions, 1u);
  EXPECT_EQ(At(kDev0).demoted_bytes, kSize);
  EXPECT_EQ(At(kDev0).evictions, 0u);
  EXPECT_TRUE(Exists("old"));
  auto weights = broker_->Stat(alice_, "weights");
  ASSERT_TRUE(weights.ok());
  EXPECT_EQ(weights->replicas.size(), 1u);  // Home only.

  // The next open there makes the copy again, and "old" gives way for it.
  Grant back = OpenThere(alice_, "weights", kDev0);
  EXPECT_EQ(Read(back, 11), "the weights");
  EXPECT_FALSE(Exists("old"));
  EXPECT_EQ(At(kDev0).evictions, 1u);
}

TEST_F(PressureTest, APinnedBuffersCopiesAndTheOnlyCurrentCopyStay) {
  ASSERT_TRUE(Put(alice_, "weights", kHost, Retention::kPinned, "the weights").ok());
  Grant copy = OpenThere(alice_, "weights", kDev0);
  ASSERT_TRUE(broker_->Release(alice_, copy.lease).ok());
  for (const char* name : {"x", "y", "z"}) {
    ASSERT_TRUE(Put(alice_, name, kDev0, Retention::kPinned).ok());
  }
  auto refused = broker_->Create(alice_, CreateParams{"one-more", kSize, kDev0, 0600});
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  auto weights = broker_->Stat(alice_, "weights");
  ASSERT_TRUE(weights.ok());
  EXPECT_EQ(weights->replicas.size(), 2u);
  EXPECT_EQ(At(kDev0).demotions, 0u);
}

// Creates that wait for memory (CreateOrWait): a full host of pinned
// buffers, and creates that wait for one of them to go.
class WaitingCreateTest : public PressureTest {
 protected:
  void FillHost() {
    for (const char* name : {"p0", "p1", "p2", "p3"}) {
      ASSERT_TRUE(Put(alice_, name, kHost, Retention::kPinned).ok()) << name;
    }
  }
  absl::StatusOr<std::optional<Grant>> Wait(SessionId session, const std::string& name,
                                            WatchId watch, bool* woken) {
    return broker_->CreateOrWait(session, CreateParams{name, kSize, kHost, 0600}, watch,
                                 Wake(woken));
  }
};

TEST_F(WaitingCreateTest, ACreateThatDoesNotFitWaitsAndIsServedWhenMemoryIsFreed) {
  FillHost();
  bool woken = false;
  const WatchId watch = broker_->NewWatchId();
  auto first = Wait(alice_, "late", watch, &woken);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->has_value());
  EXPECT_EQ(broker_->Counts().waits, 1u);
  ASSERT_TRUE(broker_->Unlink(alice_, "p2").ok());
  EXPECT_TRUE(woken);
  auto again = Wait(alice_, "late", watch, &woken);
  ASSERT_TRUE(again.ok() && again->has_value()) << again.status();
  EXPECT_EQ((*again)->buffer.name, "late");
  EXPECT_EQ(broker_->Counts().waits, 0u);
  // A refusal that is not about room does not wait.
  bool never = false;
  auto exists = Wait(alice_, "late", broker_->NewWatchId(), &never);
  EXPECT_TRUE(absl::IsAlreadyExists(exists.status())) << exists.status();
}

TEST_F(WaitingCreateTest, UidsTakeTurnsForFreedMemory) {
  FillHost();
  bool a1 = false, a2 = false, b1 = false;
  const WatchId wa1 = broker_->NewWatchId(), wa2 = broker_->NewWatchId(),
                wb1 = broker_->NewWatchId();
  ASSERT_TRUE(Wait(alice_, "a1", wa1, &a1).ok());
  ASSERT_TRUE(Wait(alice_, "a2", wa2, &a2).ok());
  ASSERT_TRUE(Wait(bob_, "b1", wb1, &b1).ok());
  ASSERT_TRUE(broker_->Unlink(alice_, "p0").ok());  // Room for one.
  EXPECT_TRUE(a1);
  EXPECT_FALSE(a2);
  EXPECT_FALSE(b1);
  ASSERT_TRUE(Wait(alice_, "a1", wa1, &a1).ok());
  ASSERT_TRUE(broker_->Unlink(alice_, "p1").ok());
  EXPECT_TRUE(b1) << "Bob's turn, though Alice's second create came first";
  EXPECT_FALSE(a2);
  auto bobs = Wait(bob_, "b1", wb1, &b1);
  ASSERT_TRUE(bobs.ok() && bobs->has_value()) << bobs.status();
}

TEST_F(WaitingCreateTest, WaitsAreBoundedPerUidAndEndWithTheSession) {
  BrokerLimits limits;
  limits.max_waits_per_uid = 2;
  MakeBroker(limits);
  FillHost();
  bool woken[3] = {false, false, false};
  for (int i = 0; i < 2; ++i) {
    auto waiting = Wait(alice_, "w" + std::to_string(i), broker_->NewWatchId(), &woken[i]);
    ASSERT_TRUE(waiting.ok() && !waiting->has_value()) << waiting.status();
  }
  auto refused = Wait(alice_, "w2", broker_->NewWatchId(), &woken[2]);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("max_waits_per_uid"));
  bool bobs = false;
  const WatchId bob_watch = broker_->NewWatchId();
  ASSERT_TRUE(Wait(bob_, "b", bob_watch, &bobs).ok());

  broker_->EndSession(alice_);
  EXPECT_TRUE(woken[0] && woken[1]);
  EXPECT_FALSE(bobs);
  EXPECT_EQ(broker_->Counts().waits, 1u);
  // Cancelled, Bob's wait leaves nothing: freed memory wakes nobody.
  EXPECT_TRUE(broker_->CancelWatch(bob_watch));
  EXPECT_EQ(broker_->Counts().waits, 0u);
  auto root = broker_->StartSession(Peer(0), "root");
  ASSERT_TRUE(root.ok());
  ASSERT_TRUE(broker_->Unlink(*root, "p3").ok());
  EXPECT_FALSE(bobs);
}

// The flood: 10000 waiting creates from one uid. Past its bound
// (max_waits_per_uid, 1024 by default) each is refused at once with the
// numbers; another uid's one create still waits, and takes the second room
// that comes (the first goes to Alice's oldest, which came first).
TEST_F(WaitingCreateTest, TenThousandWaitersOfOneUidAreRefusedBeyondItsBound) {
  BrokerLimits limits;
  limits.max_waits_per_session = 20000;
  limits.max_waits = 20000;
  MakeBroker(limits);
  ASSERT_EQ(limits.max_waits_per_uid, 1024u);
  FillHost();
  bool woken = false;  // Shared: nothing here runs the flood's wakes.
  int waiting = 0;
  int refused = 0;
  for (int i = 0; i < 10000; ++i) {
    auto made = Wait(alice_, "flood/" + std::to_string(i), broker_->NewWatchId(), &woken);
    if (made.ok() && !made->has_value()) {
      ++waiting;
    } else {
      ASSERT_TRUE(absl::IsResourceExhausted(made.status())) << i << ": " << made.status();
      if (refused++ == 0) {
        EXPECT_THAT(made.status().message(), HasSubstr("the limit is 1024 (max_waits_per_uid)"));
      }
    }
  }
  EXPECT_EQ(waiting, 1024);
  EXPECT_EQ(refused, 10000 - 1024);
  EXPECT_EQ(broker_->Counts().memory_waits.at("host").calls, 1024u);
  bool bobs = false;
  const WatchId bob_watch = broker_->NewWatchId();
  auto bob = Wait(bob_, "bobs", bob_watch, &bobs);
  ASSERT_TRUE(bob.ok() && !bob->has_value()) << bob.status();
  ASSERT_TRUE(broker_->Unlink(alice_, "p0").ok());  // Room for one: Alice's turn.
  EXPECT_FALSE(bobs);
  ASSERT_TRUE(broker_->Unlink(alice_, "p1").ok());  // And then Bob's, not her 1023 others'.
  EXPECT_TRUE(bobs) << "Bob's turn comes before the rest of Alice's flood";
  auto served = Wait(bob_, "bobs", bob_watch, &bobs);
  ASSERT_TRUE(served.ok() && served->has_value()) << served.status();
  broker_->EndSession(alice_);
  EXPECT_EQ(broker_->Counts().waits, 0u);
}

// Copies that wait for memory (OpenOrWaitForMemory): device:0 full of
// Alice's pinned buffers, and Bob's open there of her readable host buffer.
class WaitingCopyTest : public PressureTest {
 protected:
  void SetUp() override {
    for (const char* name : {"d0", "d1", "d2", "d3"}) {
      ASSERT_TRUE(Put(alice_, name, kDev0, Retention::kPinned).ok()) << name;
    }
    ASSERT_TRUE(Put(alice_, "w", kHost, Retention::kPinned, "weights", 0644).ok());
  }
  // As a client's open at device:0 without a wait timeout: it waits for
  // memory and the copy, not for the name to be (made and) sealed again.
  absl::StatusOr<std::optional<Grant>> CopyOrWait(SessionId session, const std::string& name,
                                                  WatchId watch, bool* woken,
                                                  bool wait_for_seal = false) {
    OpenParams params{name, Access::kRead};
    params.location = kDev0;
    params.wait_for_seal = wait_for_seal;
    return broker_->OpenOrWaitForMemory(session, params, watch, Wake(woken));
  }
};

TEST_F(WaitingCopyTest, ACopyWaitsForMemoryInTheQueueThenForItsFillAndIsChargedToItsOpener) {
  // Without a wait, the full location refuses at once, as before.
  bool never = false;
  auto refused = OpenAt(bob_, "w", kDev0, broker_->NewWatchId(), &never);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();

  bool woken = false;
  const WatchId watch = broker_->NewWatchId();
  auto waiting = CopyOrWait(bob_, "w", watch, &woken);
  ASSERT_TRUE(waiting.ok() && !waiting->has_value()) << waiting.status();
  EXPECT_TRUE(broker_->WaitsForMemory(watch));
  const BrokerCounts counts = broker_->Counts();
  ASSERT_EQ(counts.memory_waits.count("device:0"), 1u);
  EXPECT_EQ(counts.memory_waits.at("device:0").calls, 1u);
  EXPECT_EQ(counts.memory_waits.at("device:0").bytes, kSize);

  ASSERT_TRUE(broker_->Unlink(alice_, "d1").ok());
  ASSERT_TRUE(woken);
  // Woken, it allocates and starts the copy; now it waits for the fill.
  woken = false;
  auto filling = CopyOrWait(bob_, "w", watch, &woken);
  ASSERT_TRUE(filling.ok() && !filling->has_value()) << filling.status();
  EXPECT_FALSE(broker_->WaitsForMemory(watch));
  EXPECT_TRUE(broker_->Counts().memory_waits.empty());
  EXPECT_EQ(UsageOf(kBob, kDev0), kSize) << "the copy is the opener's to pay";
  copier_.Finish();
  ASSERT_TRUE(woken);
  auto granted = CopyOrWait(bob_, "w", watch, &woken);
  ASSERT_TRUE(granted.ok() && granted->has_value()) << granted.status();
  EXPECT_EQ((*granted)->buffer.location, kDev0);
  EXPECT_EQ(Read(**granted, 7), "weights");
}

TEST_F(WaitingCopyTest, AnUnlinkOfItsBufferEndsTheWaitingCopy) {
  bool woken = false;
  const WatchId watch = broker_->NewWatchId();
  auto waiting = CopyOrWait(bob_, "w", watch, &woken);
  ASSERT_TRUE(waiting.ok() && !waiting->has_value()) << waiting.status();
  ASSERT_TRUE(broker_->Unlink(alice_, "w").ok());
  ASSERT_TRUE(woken) << "the unlink woke the wait, though no memory was freed at device:0";
  auto gone = CopyOrWait(bob_, "w", watch, &woken);
  EXPECT_TRUE(absl::IsNotFound(gone.status())) << gone.status();
  EXPECT_TRUE(broker_->Counts().memory_waits.empty());
  EXPECT_EQ(broker_->Counts().waits, 0u);

  // One that also waits for a seal (a wait timeout) waits on for the name,
  // as any open does, but no longer for memory.
  ASSERT_TRUE(Put(alice_, "w2", kHost, Retention::kPinned, "more", 0644).ok());
  const WatchId sealing = broker_->NewWatchId();
  auto queued = CopyOrWait(bob_, "w2", sealing, &woken, /*wait_for_seal=*/true);
  ASSERT_TRUE(queued.ok() && !queued->has_value()) << queued.status();
  EXPECT_EQ(broker_->Counts().memory_waits.size(), 1u);
  woken = false;
  ASSERT_TRUE(broker_->Unlink(alice_, "w2").ok());
  ASSERT_TRUE(woken);
  auto for_name = CopyOrWait(bob_, "w2", sealing, &woken, /*wait_for_seal=*/true);
  ASSERT_TRUE(for_name.ok() && !for_name->has_value()) << for_name.status();
  EXPECT_TRUE(broker_->Counts().memory_waits.empty());
  EXPECT_FALSE(broker_->WaitsForMemory(sealing));
  EXPECT_TRUE(broker_->CancelWatch(sealing));
}

TEST_F(WaitingCopyTest, PastItsWaitTheCopySaysWhatIsFreeOnlyOfABufferTheCallerMayRead) {
  OpenParams readable{"w", Access::kRead};
  readable.location = kDev0;
  const absl::Status told = broker_->NoRoomForCopyWithin(bob_, readable, absl::Seconds(5));
  EXPECT_TRUE(absl::IsDeadlineExceeded(told)) << told;
  EXPECT_THAT(told.message(), HasSubstr("no room for a copy of buffer 'w' (2 MiB) at device:0 "
                                        "within 5s: it takes 2 MiB; 0 B of 8 MiB free there"));
  EXPECT_THAT(told.message(), HasSubstr("you (uid 1001) hold 0 B, other users 8 MiB"));
  // Alice's private d0: Bob learns neither its size nor where it is held.
  OpenParams secret{"d0", Access::kRead};
  secret.location = kHost;
  const absl::Status hidden = broker_->NoRoomForCopyWithin(bob_, secret, absl::Seconds(5));
  EXPECT_EQ(hidden.message(), "no room for a copy of buffer 'd0' came within 5s");
}

// A quota is one uid's own limit: a create that would take Alice over hers
// takes back her own unheld evictable data (least recently used first),
// never Bob's, though his is older; the name says why it went.
class QuotaPressureTest : public PressureTest {
 protected:
  QuotaPressureTest() {
    pool_limit_ = 8 * kSize;  // The host has room; Alice's quota does not.
    BrokerLimits limits;
    limits.max_uid_bytes = *Quota::Parse("host=6MiB");
    MakeBroker(limits);
  }
};

TEST_F(QuotaPressureTest, AQuotaTakesBackOnlyTheUidsOwnEvictableData) {
  std::vector<std::string> logged;
  broker_->SetPressureLog([&](const std::string& line) { logged.push_back(line); });
  // Bob holds as much as Alice, and his buffers are older: a full
  // location would take his first.
  for (const char* name : {"bobs0", "bobs1", "bobs2"}) {
    ASSERT_TRUE(Put(bob_, name, kHost, Retention::kEvictable, "bytes", 0644).ok());
  }
  for (const char* name : {"a", "b", "c"}) {
    ASSERT_TRUE(Put(alice_, name, kHost, Retention::kEvictable, "bytes", 0644).ok());
  }
  Use(alice_, "a");  // Now b is her least recently used.
  ASSERT_TRUE(Put(alice_, "d", kHost, Retention::kEvictable).ok());
  EXPECT_FALSE(Exists("b"));
  for (const char* name : {"bobs0", "bobs1", "bobs2", "a", "c", "d"}) {
    EXPECT_TRUE(Exists(name)) << name;
  }
  auto gone = broker_->Stat(alice_, "b");
  EXPECT_THAT(std::string(gone.status().message()),
              HasSubstr(absl::StrCat("to keep uid ", kAlice, " within its quota at host")));
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_THAT(logged[0], HasSubstr(absl::StrCat("uid ", kAlice, "'s quota at host: evicted "
                                                "buffer 'b'")));
  EXPECT_EQ(At(kHost).evictions, 1u);
}

TEST_F(QuotaPressureTest, WhenTooLittleOfItsOwnMayGoNothingGoesAndTheQuotaSaysWhy) {
  ASSERT_TRUE(Put(alice_, "pinned", kHost, Retention::kPinned).ok());
  ASSERT_TRUE(Put(alice_, "held", kHost, Retention::kEvictable).ok());
  auto holder = broker_->Open(alice_, OpenParams{"held", Access::kRead});
  ASSERT_TRUE(holder.ok()) << holder.status();
  ASSERT_TRUE(Put(alice_, "free", kHost, Retention::kEvictable).ok());
  // 4 MiB more would need two of hers to go; only one may.
  CreateParams big{"big", 2 * kSize, kHost, 0600};
  auto refused = broker_->Create(alice_, big);
  ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("over its quota of 6 MiB"));
  EXPECT_TRUE(Exists("free")) << "all or nothing";
  EXPECT_EQ(At(kHost).evictions, 0u);
}

}  // namespace
}  // namespace memd::broker
