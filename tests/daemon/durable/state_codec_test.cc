#include "daemon/durable/state_codec.h"

#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "memd/durable/v1/state.pb.h"
#include "tests/daemon/durable/sample_state.h"

namespace memd::durable {
namespace {

using test::SampleState;

TEST(StateCodecTest, SnapshotRoundTrips) {
  const DurableState state = SampleState();
  ASSERT_FALSE(state.sessions.empty());
  ASSERT_FALSE(state.leases.empty());
  absl::StatusOr<DurableState> decoded = DecodeSnapshot(EncodeSnapshot(state));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, state);
}

TEST(StateCodecTest, EmptySnapshotRoundTrips) {
  absl::StatusOr<DurableState> decoded = DecodeSnapshot(EncodeSnapshot(DurableState{}));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, DurableState{});
}

TEST(StateCodecTest, BatchOfEveryKindRoundTrips) {
  const DurableState state = SampleState();
  const std::vector<Change> batch = {
      state.segments.at(2), DropSegment{5},   state.buffers.at(11), DropBuffer{6},
      SetGeneration{9},     state.sessions.at(101), DropSession{7}, state.leases.at(1001),
      DropLease{8}};
  std::set<std::size_t> kinds;
  for (const Change& change : batch) kinds.insert(change.index());
  ASSERT_EQ(kinds.size(), std::variant_size_v<Change>) << "a kind of change is not tried";
  absl::StatusOr<std::vector<Change>> decoded = DecodeBatch(EncodeBatch(batch));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, batch);
}

TEST(StateCodecTest, ExtremeNumbersRoundTrip) {
  BufferEntry buffer = SampleState().buffers.at(10);
  buffer.id = ~std::uint64_t{0};
  buffer.owner_uid = ~std::uint32_t{0};
  buffer.created_unix_ns = INT64_MIN;
  buffer.creator_pid = -1;
  SessionEntry session{.id = ~std::uint64_t{0}, .uid = ~std::uint32_t{0}, .token_digest = ""};
  for (int byte = 0; byte < 256; byte += 8) session.token_digest += static_cast<char>(byte);
  const LeaseEntry lease{.id = ~std::uint64_t{0},
                         .session_id = ~std::uint64_t{0},
                         .buffer_id = ~std::uint64_t{0},
                         .writable = true};
  const std::vector<Change> batch = {buffer, session, lease, DropSession{~std::uint64_t{0}},
                                     DropLease{~std::uint64_t{0}}};
  absl::StatusOr<std::vector<Change>> decoded = DecodeBatch(EncodeBatch(batch));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, batch);
}

// A batch of one lease put or dropped (every open and release journals
// one) is written by hand: byte for byte what protobuf writes, and it reads
// back.
TEST(StateCodecTest, ALeaseBatchIsWrittenAsProtobufWritesIt) {
  const std::uint64_t max = ~std::uint64_t{0};
  std::vector<Change> changes = {LeaseEntry{1, 2, 3, true}, LeaseEntry{1, 0, 0, false},
                                 LeaseEntry{max, max, max, true}, LeaseEntry{300, 1 << 20, 7, false},
                                 LeaseEntry{}, DropLease{1}, DropLease{max}, DropLease{}};
  for (const Change& change : changes) {
    v1::Batch proto;
    v1::Change* written = proto.add_changes();
    if (const auto* put = std::get_if<LeaseEntry>(&change)) {
      written->mutable_put_lease()->set_id(put->id);
      written->mutable_put_lease()->set_session_id(put->session_id);
      written->mutable_put_lease()->set_buffer_id(put->buffer_id);
      written->mutable_put_lease()->set_writable(put->writable);
    } else {
      written->mutable_drop_lease()->set_id(std::get<DropLease>(change).id);
    }
    const std::string bytes = EncodeBatch(std::vector<Change>{change});
    EXPECT_EQ(bytes, proto.SerializeAsString()) << change.index();
    absl::StatusOr<std::vector<Change>> decoded = DecodeBatch(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, std::vector<Change>{change});
  }
}

TEST(StateCodecTest, ChangeOfNoKindIsDataLoss) {
  // Field 1 (changes), length 0: one Change with nothing set.
  const std::string bytes("\x0a\x00", 2);
  EXPECT_EQ(DecodeBatch(bytes).status().code(), absl::StatusCode::kDataLoss);
}

TEST(StateCodecTest, DuplicateIdInSnapshotIsDataLoss) {
  DurableState state = SampleState();
  std::string bytes = EncodeSnapshot(state);
  // Concatenated messages merge, repeated fields append: the same buffers twice.
  DurableState buffers_only;
  buffers_only.buffers = state.buffers;
  bytes += EncodeSnapshot(buffers_only);
  absl::StatusOr<DurableState> decoded = DecodeSnapshot(bytes);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(decoded.status().message()), ::testing::HasSubstr("buffer 10 twice"));
}

TEST(StateCodecTest, DuplicateSessionInSnapshotIsDataLoss) {
  DurableState state = SampleState();
  DurableState sessions_only;
  sessions_only.sessions = state.sessions;
  absl::StatusOr<DurableState> decoded =
      DecodeSnapshot(EncodeSnapshot(state) + EncodeSnapshot(sessions_only));
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(decoded.status().message()),
              ::testing::HasSubstr("session 100 twice"));
}

TEST(StateCodecTest, DuplicateLeaseInSnapshotIsDataLoss) {
  DurableState state = SampleState();
  DurableState one_lease;
  one_lease.leases.emplace(1002, state.leases.at(1002));
  absl::StatusOr<DurableState> decoded =
      DecodeSnapshot(EncodeSnapshot(state) + EncodeSnapshot(one_lease));
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(decoded.status().message()), ::testing::HasSubstr("lease 1002 twice"));
}

TEST(StateCodecTest, GarbageNeverDecodesToACrash) {
  std::mt19937 random(23);
  const DurableState state = SampleState();
  const std::string batch = EncodeBatch(std::vector<Change>{
      state.buffers.at(10), state.sessions.at(100), state.leases.at(1001), DropSession{101}});
  for (int i = 0; i < 20000; ++i) {
    std::string bytes = batch;
    const int flips = 1 + static_cast<int>(random() % 4);
    for (int f = 0; f < flips; ++f) {
      bytes[random() % bytes.size()] = static_cast<char>(random());
    }
    if (random() % 4 == 0) bytes.resize(random() % bytes.size());
    absl::StatusOr<std::vector<Change>> decoded = DecodeBatch(bytes);
    if (!decoded.ok()) {
      EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
    }
    absl::StatusOr<DurableState> snapshot = DecodeSnapshot(bytes);
    if (!snapshot.ok()) {
      EXPECT_EQ(snapshot.status().code(), absl::StatusCode::kDataLoss);
    }
  }
}

}  // namespace
}  // namespace memd::durable
