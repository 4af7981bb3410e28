#include "daemon/durable/state_codec.h"

#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/durable/sample_state.h"

namespace memd::durable {
namespace {

using test::SampleState;

TEST(StateCodecTest, SnapshotRoundTrips) {
  const DurableState state = SampleState();
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
  const std::vector<Change> batch = {state.segments.at(2), DropSegment{5},
                                     state.buffers.at(11), DropBuffer{6}, SetGeneration{9}};
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
  const std::vector<Change> batch = {buffer};
  absl::StatusOr<std::vector<Change>> decoded = DecodeBatch(EncodeBatch(batch));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, batch);
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

TEST(StateCodecTest, GarbageNeverDecodesToACrash) {
  std::mt19937 random(23);
  const std::string batch = EncodeBatch(std::vector<Change>{SampleState().buffers.at(10)});
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
