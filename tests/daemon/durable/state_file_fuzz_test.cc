// Real state files damaged at random (bytes changed, the file cut short or
// grown with noise), thousands of times from a fixed seed: Load must never
// crash, and must answer a state that passes Validate, or DATA_LOSS, or
// FAILED_PRECONDITION (a damaged version word). Runs under ASan/UBSan in CI.

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "daemon/durable/state_file.h"
#include "gtest/gtest.h"
#include "tests/daemon/durable/sample_state.h"

namespace memd::durable {
namespace {

constexpr int kIterations = 5000;

// The file's bytes up to its last frame, and a few zeros after.
std::string Contents(const StateFile& file) {
  std::string bytes(file.snapshot_bytes() + file.journal_bytes() + 64, '\0');
  EXPECT_EQ(::pread(file.fd(), bytes.data(), bytes.size(), 0),
            static_cast<ssize_t>(bytes.size()));
  return bytes;
}

TEST(StateFileFuzzTest, DamagedFilesLoadValidOrRefuse) {
  absl::StatusOr<StateFile> file = StateFile::Create(test::SampleState(), 9);
  ASSERT_TRUE(file.ok()) << file.status();
  for (std::uint64_t id = 20; id < 28; ++id) {
    std::vector<Change> batch = {test::SampleBuffer(id, 1, 8192 + (id - 20) * 4096)};
    if (id % 3 == 0) batch.push_back(DropBuffer{id - 1});  // With its lease, if any.
    if (id % 2 == 0) {
      batch.push_back(LeaseEntry{
          .id = 2000 + id, .session_id = 100 + id % 4, .buffer_id = id, .writable = id % 4 == 0});
    }
    if (id == 23) batch.push_back(test::SampleSession(103, 'c'));
    if (id == 25) batch.push_back(DropSession{100});
    ASSERT_TRUE(file->Append(batch).ok());
  }
  const std::string original = Contents(*file);
  ASSERT_TRUE(StateFile::Load(file->fd()).ok());

  UniqueFd fd(::memfd_create("fuzz", MFD_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  std::mt19937 random(20230623);
  int loaded = 0, torn = 0, refused = 0;
  for (int i = 0; i < kIterations; ++i) {
    std::string bytes = original;
    switch (random() % 4) {
      case 0: {  // A few bytes changed.
        const int changes = 1 + static_cast<int>(random() % 3);
        for (int c = 0; c < changes; ++c) {
          bytes[random() % bytes.size()] = static_cast<char>(random());
        }
        break;
      }
      case 1:  // Cut short.
        bytes.resize(random() % bytes.size());
        break;
      case 2: {  // Noise after the last frame, or over it.
        const std::size_t at = bytes.size() - 64 - random() % 200;
        const std::size_t count = 1 + random() % 300;
        bytes.resize(std::max(bytes.size(), at + count));
        for (std::size_t b = 0; b < count; ++b) bytes[at + b] = static_cast<char>(random());
        break;
      }
      case 3:  // A bit flipped in the header or the snapshot.
        bytes[random() % std::min<std::size_t>(bytes.size(), 400)] ^=
            static_cast<char>(1 << (random() % 8));
        break;
    }
    ASSERT_EQ(::ftruncate(fd.get(), 0), 0);
    ASSERT_EQ(::pwrite(fd.get(), bytes.data(), bytes.size(), 0),
              static_cast<ssize_t>(bytes.size()));
    absl::StatusOr<LoadedState> result = StateFile::Load(fd.get());
    if (result.ok()) {
      ++loaded;
      torn += result->torn_tail;
      EXPECT_TRUE(Validate(result->state).ok()) << "iteration " << i;
    } else {
      ++refused;
      EXPECT_TRUE(result.status().code() == absl::StatusCode::kDataLoss ||
                  result.status().code() == absl::StatusCode::kFailedPrecondition)
          << "iteration " << i << ": " << result.status();
    }
  }
  // Both outcomes happen, so the damage reaches past the header.
  EXPECT_GT(loaded, 0);
  EXPECT_GT(torn, 0);
  EXPECT_GT(refused, 0);
  std::printf("%d loaded (%d with a torn tail), %d refused\n", loaded, torn, refused);
}

}  // namespace
}  // namespace memd::durable
