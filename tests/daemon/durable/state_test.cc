#include "daemon/durable/state.h"

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/durable/sample_state.h"

namespace memd::durable {
namespace {

using ::testing::HasSubstr;
using ::testing::ElementsAre;
using ::testing::Key;
using test::SampleBuffer;
using test::SampleSegment;
using test::SampleSession;
using test::SampleState;

TEST(StateTest, SampleStateIsValid) { EXPECT_TRUE(Validate(SampleState()).ok()); }

TEST(StateTest, ApplyPutsReplacesAndDrops) {
  DurableState state;
  Apply(SampleSegment(1), state);
  Apply(SampleBuffer(10, 1, 0), state);
  BufferEntry renamed = SampleBuffer(10, 1, 0);
  renamed.name = "renamed";
  Apply(renamed, state);
  Apply(SetGeneration{7}, state);
  EXPECT_EQ(state.buffers.at(10).name, "renamed");
  EXPECT_EQ(state.generation, 7u);
  Apply(DropBuffer{10}, state);
  Apply(DropBuffer{99}, state);  // Not there: a no-op.
  Apply(DropSegment{1}, state);
  EXPECT_TRUE(state.buffers.empty());
  EXPECT_TRUE(state.segments.empty());
}

TEST(StateTest, ApplyPutsReplacesAndDropsSessionsAndLeases) {
  DurableState state;
  Apply(SampleSession(5, 'a'), state);
  Apply(LeaseEntry{.id = 50, .session_id = 5, .buffer_id = 10}, state);
  Apply(LeaseEntry{.id = 51, .session_id = 5, .buffer_id = 11}, state);
  SessionEntry other_uid = SampleSession(5, 'b');
  other_uid.uid = 7;
  Apply(other_uid, state);
  Apply(LeaseEntry{.id = 50, .session_id = 5, .buffer_id = 10, .writable = true}, state);
  EXPECT_EQ(state.sessions.at(5), other_uid);
  EXPECT_TRUE(state.leases.at(50).writable);
  // Replacing a session keeps its leases.
  EXPECT_THAT(state.leases, ElementsAre(Key(50), Key(51)));
  Apply(DropLease{50}, state);
  Apply(DropLease{99}, state);    // Not there: a no-op.
  Apply(DropSession{99}, state);  // Likewise, and no lease goes.
  EXPECT_THAT(state.leases, ElementsAre(Key(51)));
  EXPECT_THAT(state.sessions, ElementsAre(Key(5)));
}

TEST(StateTest, DropSessionDropsItsLeasesOnly) {
  DurableState state = SampleState();
  Apply(DropSession{100}, state);
  EXPECT_THAT(state.sessions, ElementsAre(Key(101), Key(102)));
  EXPECT_THAT(state.leases, ElementsAre(Key(1002), Key(1003)));
  EXPECT_TRUE(Validate(state).ok()) << Validate(state);
}

TEST(StateTest, DropBufferDropsTheLeasesOnIt) {
  DurableState state = SampleState();
  Apply(DropBuffer{10}, state);
  EXPECT_THAT(state.buffers, ElementsAre(Key(11), Key(12)));
  EXPECT_THAT(state.leases, ElementsAre(Key(1001), Key(1002)));
  // The sessions stay, with or without leases.
  EXPECT_THAT(state.sessions, ElementsAre(Key(100), Key(101), Key(102)));
  EXPECT_TRUE(Validate(state).ok()) << Validate(state);
}

TEST(StateTest, ASessionHoldingNoLeaseIsValid) {
  DurableState state = SampleState();
  Apply(DropLease{1000}, state);
  Apply(DropLease{1001}, state);
  EXPECT_TRUE(state.sessions.contains(100));
  EXPECT_TRUE(Validate(state).ok()) << Validate(state);
}

// IndexedState against plain Apply: random puts and drops of buffers,
// sessions and leases (a lease moved to another buffer, a buffer dropped under
// its leases), from a state with leases already, the same after each change.
TEST(IndexedStateTest, AppliesAsApplyDoes) {
  std::mt19937 random(4711);
  DurableState plain = SampleState();
  IndexedState indexed(SampleState());
  auto pick = [&](std::uint64_t first, std::uint64_t count) {
    return first + random() % count;
  };
  int leases_dropped_with_a_buffer = 0;
  for (int step = 0; step < 20000; ++step) {
    Change change;
    switch (random() % 6) {
      case 0:
        change = SampleBuffer(pick(10, 8), 1, 0);
        break;
      case 1:
        change = DropBuffer{pick(10, 8)};
        break;
      case 2:
        change = SampleSession(pick(100, 5), 's');
        break;
      case 3:
        change = DropSession{pick(100, 5)};
        break;
      case 4:
      case 5:
        change = random() % 3 == 0 ? Change(DropLease{pick(1000, 12)})
                                   : Change(LeaseEntry{.id = pick(1000, 12),
                                                       .session_id = pick(100, 5),
                                                       .buffer_id = pick(10, 8),
                                                       .writable = random() % 2 == 0});
        break;
    }
    const std::size_t leases_before = plain.leases.size();
    Apply(change, plain);
    if (std::holds_alternative<DropBuffer>(change)) {
      leases_dropped_with_a_buffer += static_cast<int>(leases_before - plain.leases.size());
    }
    indexed.Apply(change);
    ASSERT_EQ(indexed.state(), plain) << "step " << step;
  }
  EXPECT_GT(leases_dropped_with_a_buffer, 100);
  EXPECT_EQ(IndexedState(plain).state(), plain);
  EXPECT_EQ(std::move(indexed).Take(), plain);
}

TEST(IndexedStateTest, DropsTheLeasesOfEachBufferAmongManyOthers) {
  DurableState state;
  state.sessions[1] = SampleSession(1, 'a');
  state.sessions[2] = SampleSession(2, 'b');
  for (std::uint64_t id = 1; id <= 10000; ++id) {
    state.buffers[id] = SampleBuffer(id, 1, 0);
    state.leases[id] = LeaseEntry{.id = id, .session_id = 1 + id % 2, .buffer_id = id};
    state.leases[id + 10000] = LeaseEntry{.id = id + 10000, .session_id = 1, .buffer_id = id};
  }
  IndexedState indexed(std::move(state));
  for (std::uint64_t id = 2; id <= 10000; id += 2) indexed.Apply(DropBuffer{id});
  EXPECT_EQ(indexed.state().buffers.size(), 5000u);
  EXPECT_EQ(indexed.state().leases.size(), 10000u);
  for (const auto& [id, lease] : indexed.state().leases) {
    ASSERT_EQ(lease.buffer_id % 2, 1u) << "lease " << id;
  }
  // Of each odd buffer, its lease of session 2 is left.
  indexed.Apply(DropSession{1});
  EXPECT_EQ(indexed.state().leases.size(), 5000u);
  for (const auto& [id, lease] : indexed.state().leases) {
    ASSERT_EQ(lease.session_id, 2u) << "lease " << id;
  }
}

TEST(StateTest, FdNames) {
  EXPECT_EQ(SegmentFdName(17), "memd.segment.17");
  EXPECT_EQ(StateFdName(3), "memd.state.3");
}

struct BadCase {
  std::string label;
  std::function<void(DurableState&)> spoil;
  std::string expected;  // In the message.
};

void PrintTo(const BadCase& bad, std::ostream* os) { *os << bad.label; }

class ValidateRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(ValidateRejects, WithDataLossNamingTheEntry) {
  DurableState state = SampleState();
  GetParam().spoil(state);
  absl::Status status = Validate(state);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(GetParam().expected));
}

BufferEntry& B(DurableState& state, std::uint64_t id) { return state.buffers.at(id); }
SessionEntry& S(DurableState& state, std::uint64_t id) { return state.sessions.at(id); }
LeaseEntry& L(DurableState& state, std::uint64_t id) { return state.leases.at(id); }

INSTANTIATE_TEST_SUITE_P(
    EachKind, ValidateRejects,
    ::testing::Values(
        BadCase{"UnknownSegment", [](auto& s) { B(s, 10).segment_id = 9; },
                "buffer 10 ('models/w10') is in unknown segment 9"},
        BadCase{"LocationMismatch", [](auto& s) { B(s, 10).location = "pinned"; },
                "is at pinned but its segment 1 is at host"},
        BadCase{"UidMismatch", [](auto& s) { B(s, 10).owner_uid = 1; },
                "is uid 1 gid 100 mode 0640 but its segment 1 serves uid 1000"},
        BadCase{"GidMismatch", [](auto& s) { B(s, 11).owner_gid = 5; }, "buffer 11"},
        BadCase{"ModeMismatch", [](auto& s) { B(s, 11).mode = 0600; }, "mode 0600 but"},
        BadCase{"OutsideSegment", [](auto& s) { B(s, 11).offset = (1 << 20) - 100; },
                "spans [1048476, +4096) outside segment 1 of 1048576 bytes"},
        BadCase{"OffsetPastSegment", [](auto& s) { B(s, 11).offset = 2 << 20; },
                "outside segment 1"},
        BadCase{"Overflowing",
                [](auto& s) {
                  B(s, 11).offset = 8;
                  B(s, 11).allocation_bytes = ~std::uint64_t{0};
                },
                "outside segment 1"},
        BadCase{"Overlap", [](auto& s) { B(s, 11).offset = 4000; },
                "at [4000, +4096) overlaps buffer 10 at [0, +4096) in segment 1"},
        BadCase{"SizeZero", [](auto& s) { B(s, 10).size = 0; }, "has size 0"},
        BadCase{"SizeBeyondAllocation", [](auto& s) { B(s, 10).size = 4097; },
                "has size 4097 in an allocation of 4096 bytes"},
        BadCase{"BufferIdZero",
                [](auto& s) {
                  BufferEntry b = SampleBuffer(0, 1, 20000);
                  s.buffers[0] = b;
                },
                "buffer 0 ('models/w0') has id 0"},
        BadCase{"BufferKeyNotId", [](auto& s) { B(s, 10).id = 13; }, "is stored under id 10"},
        BadCase{"SegmentIdZero", [](auto& s) { s.segments[0] = SampleSegment(0); },
                "segment 0 has id 0"},
        BadCase{"DuplicateLinkedName", [](auto& s) { B(s, 11).name = B(s, 10).name; },
                "buffer 11 ('models/w10') has the name of another linked buffer"},
        BadCase{"InvalidName", [](auto& s) { B(s, 10).name = "a/../b"; }, "has a bad name"},
        BadCase{"EmptyName", [](auto& s) { B(s, 10).name = ""; }, "buffer 10"},
        BadCase{"InvalidAttrKey", [](auto& s) { B(s, 10).attrs["bad key"] = "x"; },
                "buffer 10 ('models/w10') has bad attributes"},
        BadCase{"TooManyAttrs",
                [](auto& s) {
                  for (int i = 0; i < 20; ++i) B(s, 10).attrs[absl::StrCat("k", i)] = "v";
                },
                "buffer 10"},
        BadCase{"BufferModeTooLarge",
                [](auto& s) {
                  s.segments.at(1).mode = 010000;
                  B(s, 10).mode = 010000;
                },
                "segment 1 has mode 010000, beyond 07777"},
        BadCase{"BufferModeAloneTooLarge", [](auto& s) { B(s, 10).mode = 017777; },
                "buffer 10 ('models/w10') has mode 017777"},
        BadCase{"SealedWithoutTime", [](auto& s) { B(s, 11).sealed_unix_ns = 0; },
                "is sealed but its seal time is 0"},
        BadCase{"SealTimeWhileUnsealed", [](auto& s) { B(s, 10).sealed_unix_ns = 5; },
                "is not sealed but its seal time is 5"},
        BadCase{"SegmentBytesZero", [](auto& s) { s.segments.at(1).bytes = 0; },
                "segment 1 has 0 bytes"},
        BadCase{"SegmentLocation", [](auto& s) { s.segments.at(2).location = "gpu0"; },
                "segment 2 has a bad location: unknown location 'gpu0'"},
        BadCase{"BufferLocation", [](auto& s) { B(s, 10).location = "device:x"; },
                "buffer 10 ('models/w10') has a bad location"},
        BadCase{"SessionIdZero", [](auto& s) { s.sessions[0] = SampleSession(0, 'z'); },
                "session 0 has id 0"},
        BadCase{"SessionKeyNotId", [](auto& s) { S(s, 100).id = 103; },
                "session 103 is stored under id 100"},
        BadCase{"DigestOf31Bytes", [](auto& s) { S(s, 101).token_digest.pop_back(); },
                "session 101 has a token digest of 31 bytes, not 32"},
        BadCase{"DigestOf33Bytes", [](auto& s) { S(s, 102).token_digest += 'x'; },
                "session 102 has a token digest of 33 bytes"},
        BadCase{"NoDigest", [](auto& s) { S(s, 102).token_digest.clear(); },
                "session 102 has a token digest of 0 bytes"},
        BadCase{"LeaseIdZero",
                [](auto& s) { s.leases[0] = LeaseEntry{.session_id = 100, .buffer_id = 10}; },
                "lease 0 has id 0"},
        BadCase{"LeaseKeyNotId", [](auto& s) { L(s, 1000).id = 7; },
                "lease 7 is stored under id 1000"},
        BadCase{"LeaseOfUnknownSession", [](auto& s) { L(s, 1002).session_id = 5; },
                "lease 1002 is of unknown session 5"},
        BadCase{"LeaseOfAGoneSession", [](auto& s) { s.sessions.erase(101); },
                "lease 1002 is of unknown session 101"},
        BadCase{"LeaseOnUnknownBuffer", [](auto& s) { L(s, 1001).buffer_id = 13; },
                "lease 1001 is on unknown buffer 13"},
        BadCase{"LeaseOnAGoneBuffer", [](auto& s) { s.buffers.erase(12); },
                "lease 1001 is on unknown buffer 12"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.label; });

}  // namespace
}  // namespace memd::durable
