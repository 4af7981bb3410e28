#include "daemon/durable/state_file.h"

#include "daemon/durable/crc32c.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/daemon/durable/sample_state.h"

namespace memd::durable {
namespace {

using ::testing::HasSubstr;
using test::SampleBuffer;
using test::SampleState;

void Overwrite(int fd, std::uint64_t at, const void* bytes, std::size_t count) {
  ASSERT_EQ(::pwrite(fd, bytes, count, static_cast<off_t>(at)), static_cast<ssize_t>(count));
}

std::uint8_t ByteAt(int fd, std::uint64_t at) {
  std::uint8_t byte = 0;
  EXPECT_EQ(::pread(fd, &byte, 1, static_cast<off_t>(at)), 1);
  return byte;
}

void FlipByte(int fd, std::uint64_t at) {
  const std::uint8_t byte = ByteAt(fd, at) ^ 0x5a;
  Overwrite(fd, at, &byte, 1);
}

std::string Message(const absl::Status& status) { return std::string(status.message()); }

// The CPU's instruction and the table agree on the standard check value and
// on every length 0-100 at every alignment 0-7 (the tail and the 8-byte
// words), so a state file one computation wrote the other reads.
TEST(Crc32cTest, TheCpusInstructionAndTheTableAgree) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(internal::Crc32cByTable("123456789", 9), 0xe3069283u);
  std::vector<unsigned char> bytes(128);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 131 + 7);
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t length = 0; length <= 100; ++length) {
      ASSERT_EQ(Crc32c(bytes.data() + offset, length),
                internal::Crc32cByTable(bytes.data() + offset, length))
          << "offset " << offset << ", length " << length;
    }
  }
  RecordProperty("crc32c_by_cpu", internal::Crc32cUsesTheCpu() ? "yes" : "no (both the table)");
}

TEST(StateFileTest, SnapshotLoadsBack) {
  absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 5);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<LoadedState> loaded = StateFile::Load(file->fd());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state, SampleState());
  EXPECT_EQ(loaded->epoch, 5u);
  EXPECT_EQ(loaded->batches, 0u);
  EXPECT_FALSE(loaded->torn_tail);
}

// What memd's first start stores: nothing yet, generation 0. Its snapshot
// must still be a frame (one of length 0 marks the end of the frames).
TEST(StateFileTest, AnEmptyStateLoadsBackAndTakesAppends) {
  absl::StatusOr<StateFile> file = StateFile::Create(DurableState{}, 1);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<LoadedState> loaded = StateFile::Load(file->fd());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state, DurableState{});
  const std::vector<Change> batch = {SetGeneration{1}};
  ASSERT_TRUE(file->Append(batch).ok());
  loaded = StateFile::Load(file->fd());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state.generation, 1u);
}

TEST(StateFileTest, AppendedBatchesLoadBackInOrder) {
  DurableState expected = SampleState();
  absl::StatusOr<StateFile> file = StateFile::Create(expected, 1);
  ASSERT_TRUE(file.ok()) << file.status();
  const std::vector<std::vector<Change>> batches = {
      {SampleBuffer(20, 1, 8192), test::SampleSession(103, 'c'),
       LeaseEntry{.id = 1004, .session_id = 103, .buffer_id = 20, .writable = true}},
      {DropBuffer{10}, SetGeneration{4}},
      {SampleBuffer(10, 1, 0), LeaseEntry{.id = 1005, .session_id = 102, .buffer_id = 10}},
      {},  // Writes nothing.
      {DropLease{1002}, DropSession{103}},
      {DropBuffer{12}, DropSegment{2}}};
  for (const auto& batch : batches) {
    ASSERT_TRUE(file->Append(batch).ok());
    for (const Change& change : batch) Apply(change, expected);
  }
  absl::StatusOr<LoadedState> loaded = StateFile::Load(file->fd());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state, expected);
  EXPECT_EQ(loaded->batches, 5u);
  EXPECT_FALSE(loaded->torn_tail);
}

// Appends one batch, then a second whose frame starts at the returned offset.
class TornTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 2);
    ASSERT_TRUE(file.ok()) << file.status();
    file_ = std::make_unique<StateFile>(*std::move(file));
    const std::vector<Change> first = {SampleBuffer(20, 1, 8192)};
    ASSERT_TRUE(file_->Append(first).ok());
    after_first_ = SampleState();
    Apply(first[0], after_first_);
    second_at_ = file_->snapshot_bytes() + file_->journal_bytes();
    const std::vector<Change> second = {DropBuffer{10}, SampleBuffer(21, 1, 12288)};
    ASSERT_TRUE(file_->Append(second).ok());
  }

  void ExpectFirstOnlyAndTorn() {
    absl::StatusOr<LoadedState> loaded = StateFile::Load(file_->fd());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(loaded->state, after_first_);
    EXPECT_EQ(loaded->batches, 1u);
    EXPECT_TRUE(loaded->torn_tail);
  }

  std::unique_ptr<StateFile> file_;
  DurableState after_first_;
  std::uint64_t second_at_ = 0;
};

TEST_F(TornTest, CrashBeforeTheLengthWordLeavesTheOldState) {
  const std::uint32_t zero = 0;
  Overwrite(file_->fd(), second_at_, &zero, sizeof zero);
  ExpectFirstOnlyAndTorn();
}

TEST_F(TornTest, PayloadFailingItsChecksumLeavesTheOldState) {
  FlipByte(file_->fd(), second_at_ + kFrameHeaderBytes + 3);
  ExpectFirstOnlyAndTorn();
}

TEST_F(TornTest, LengthPastTheEndLeavesTheOldState) {
  const std::uint32_t huge = 0xfffffff0u;
  Overwrite(file_->fd(), second_at_, &huge, sizeof huge);
  ExpectFirstOnlyAndTorn();
}

TEST(StateFileTest, BadMagicIsDataLoss) {
  absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 1);
  ASSERT_TRUE(file.ok());
  FlipByte(file->fd(), 0);
  absl::Status status = StateFile::Load(file->fd()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(status), HasSubstr("not a state file"));
}

TEST(StateFileTest, HeaderFailingItsChecksumIsDataLoss) {
  absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 1);
  ASSERT_TRUE(file.ok());
  FlipByte(file->fd(), 16);  // The epoch.
  absl::Status status = StateFile::Load(file->fd()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(status), HasSubstr("header fails its checksum"));
}

TEST(StateFileTest, OtherFormatVersionIsFailedPrecondition) {
  absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 1);
  ASSERT_TRUE(file.ok());
  const std::uint32_t version = 2;
  Overwrite(file->fd(), 8, &version, sizeof version);
  absl::Status status = StateFile::Load(file->fd()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(status), HasSubstr("format version 2; this build reads version 1 only"));
}

TEST(StateFileTest, DamagedSnapshotIsDataLoss) {
  absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 1);
  ASSERT_TRUE(file.ok());
  FlipByte(file->fd(), kStateHeaderBytes + kFrameHeaderBytes + 10);
  absl::Status status = StateFile::Load(file->fd()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(status), HasSubstr("no whole snapshot"));
}

TEST(StateFileTest, ShortFileIsDataLoss) {
  absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 1);
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(::ftruncate(file->fd(), 20), 0);
  // The writer's mapping would now fault past 20 bytes; only Load runs.
  absl::Status status = StateFile::Load(file->fd()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(status), HasSubstr("fewer than a header"));
}

TEST(StateFileTest, JournalMakingAnInvalidStateIsDataLoss) {
  absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 1);
  ASSERT_TRUE(file.ok());
  const std::vector<Change> batch = {SampleBuffer(30, 77, 0)};
  ASSERT_TRUE(file->Append(batch).ok());
  absl::Status status = StateFile::Load(file->fd()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(status), HasSubstr("buffer 30 ('models/w30') is in unknown segment 77"));
}

TEST(StateFileTest, JournalLeasingForAnUnknownSessionIsDataLoss) {
  absl::StatusOr<StateFile> file = StateFile::Create(SampleState(), 1);
  ASSERT_TRUE(file.ok());
  const std::vector<Change> batch = {LeaseEntry{.id = 7, .session_id = 104, .buffer_id = 10}};
  ASSERT_TRUE(file->Append(batch).ok());
  absl::Status status = StateFile::Load(file->fd()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(Message(status), HasSubstr("lease 7 is of unknown session 104"));
}

TEST(StateFileTest, FullFileRefusesWithResourceExhaustedAndWritesNothing) {
  DurableState expected = SampleState();
  absl::StatusOr<StateFile> file = StateFile::Create(expected, 1, /*journal_room=*/0);
  ASSERT_TRUE(file.ok());
  absl::Status status;
  int appended = 0;
  for (; appended < 100000; ++appended) {
    BufferEntry buffer = SampleBuffer(10, 1, 0);
    buffer.size = 1 + appended % 4096;
    const std::vector<Change> batch = {buffer};
    status = file->Append(batch);
    if (!status.ok()) break;
    Apply(buffer, expected);
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_GT(appended, 0);
  EXPECT_LE(file->snapshot_bytes() + file->journal_bytes(), file->capacity());
  absl::StatusOr<LoadedState> loaded = StateFile::Load(file->fd());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->state, expected);
  EXPECT_EQ(loaded->batches, static_cast<std::uint64_t>(appended));
  EXPECT_FALSE(loaded->torn_tail);
}

TEST(StateFileTest, NotARegularFileIsDataLoss) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_EQ(StateFile::Load(pipe_fds[0]).status().code(), absl::StatusCode::kDataLoss);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

}  // namespace
}  // namespace memd::durable
