// Buffer::WriteFromFile: a file into a host buffer through the buffer's
// descriptor, against memd in this process.

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/in_process_daemon.h"

namespace memd::test {
namespace {

using ::testing::HasSubstr;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

int OpenDescriptors() {
  int count = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  while (::readdir(dir) != nullptr) ++count;
  ::closedir(dir);
  return count;
}

class FileFillTest : public InProcessDaemonTest {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(StartDaemon()); }

  // A file of `size` bytes of the pattern of `seed`, open for reading.
  int PatternFile(std::uint64_t size, std::uint32_t seed) {
    std::vector<std::byte> bytes(size);
    FillPattern(bytes, seed);
    const std::string path = dir_.Join("input-" + std::to_string(seed));
    const int out = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    EXPECT_GE(out, 0);
    EXPECT_EQ(::write(out, bytes.data(), bytes.size()), static_cast<ssize_t>(size));
    ::close(out);
    const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(in, 0);
    files_.push_back(in);
    return in;
  }

  ~FileFillTest() override {
    for (int fd : files_) ::close(fd);
  }

  std::vector<int> files_;
};

// Every thread's range lands where it belongs: 96 MiB and a few bytes cut
// in three uneven ranges, and on one thread, into host and pinned memory.
TEST_F(FileFillTest, AFileArrivesWholeOnOneThreadOrSeveral) {
  const std::uint64_t size = 96 * kMiB + 12345;
  const int file = PatternFile(size, 7);
  int round = 0;
  for (const char* location : {"host", "pinned"}) {
    for (int threads : {1, 3}) {
      const std::string name = "fill/" + std::to_string(round++);
      auto buffer = client_->Create(name, size,
                                    {.location = location, .keep_descriptor = true});
      ASSERT_TRUE(buffer.ok()) << buffer.status();
      ASSERT_TRUE(buffer->WriteFromFile(file, 0, size, 0, threads).ok())
          << location << ", " << threads << " threads";
      EXPECT_TRUE(MatchesPattern(buffer->data(), 7)) << location << ", " << threads << " threads";
      EXPECT_EQ(::lseek(file, 0, SEEK_CUR), 0) << "the file's position does not move";
      EXPECT_TRUE(buffer->Seal().ok());
    }
  }
}

// Two small buffers of one owner may share a segment, and so a descriptor:
// a write stays within its buffer's bytes and is refused past its end.
TEST_F(FileFillTest, WritesStayWithinTheBufferAndPastItsEndAreRefused) {
  const int file = PatternFile(64 * 1024, 3);
  auto first = client_->Create("fill/first", 16384, {.keep_descriptor = true});
  auto second = client_->Create("fill/second", 16384, {.keep_descriptor = true});
  ASSERT_TRUE(first.ok() && second.ok());
  std::fill(first->mutable_data().begin(), first->mutable_data().end(), std::byte{0xAA});
  std::fill(second->mutable_data().begin(), second->mutable_data().end(), std::byte{0xBB});

  ASSERT_TRUE(first->WriteFromFile(file, 100, 8192, 4096).ok());
  const auto bytes = first->data();
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const std::byte want = i >= 4096 && i < 4096 + 8192 ? PatternByte(i - 4096 + 100, 3)
                                                         : std::byte{0xAA};
    ASSERT_EQ(bytes[i], want) << "byte " << i;
  }
  absl::Status past = first->WriteFromFile(file, 0, 16384, 1);
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past.message(), HasSubstr("16384 bytes at offset 1 run past the end of buffer "
                                        "'fill/first' (16384 bytes)"));
  EXPECT_EQ(first->WriteFromFile(file, 0, 1, 16385).code(), absl::StatusCode::kInvalidArgument);
  for (std::byte b : second->data()) ASSERT_EQ(b, std::byte{0xBB});
}

TEST_F(FileFillTest, ItWritesOnlyWhatItMayAndSaysWhyNot) {
  const int file = PatternFile(kMiB, 5);
  auto plain = client_->Create("fill/plain", kMiB);
  ASSERT_TRUE(plain.ok());
  absl::Status no_descriptor = plain->WriteFromFile(file, 0, kMiB);
  EXPECT_EQ(no_descriptor.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_descriptor.message(), HasSubstr("keep_descriptor"));

  // The file ends first.
  auto kept = client_->Create("fill/kept", 2 * kMiB, {.keep_descriptor = true});
  ASSERT_TRUE(kept.ok());
  absl::Status short_file = kept->WriteFromFile(file, 0, 2 * kMiB);
  EXPECT_EQ(short_file.code(), absl::StatusCode::kOutOfRange) << short_file;
  EXPECT_THAT(short_file.message(), HasSubstr("the file ended at byte 1048576"));
  // A pipe is not a file sendfile reads from.
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  EXPECT_EQ(kept->WriteFromFile(pipe_ends[0], 0, 16).code(), absl::StatusCode::kInvalidArgument);
  ::close(pipe_ends[0]);
  ::close(pipe_ends[1]);

  // Sealed: refused, and the descriptor kept for it is closed.
  ASSERT_TRUE(kept->Seal().ok());
  absl::Status sealed = kept->WriteFromFile(file, 0, 16);
  EXPECT_EQ(sealed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sealed.message(), HasSubstr("sealed"));
  // A read lease, even one that asked to keep the descriptor.
  auto reader = client_->Open("fill/kept", {.keep_descriptor = true});
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(reader->WriteFromFile(file, 0, 16).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(kept->Release().ok());
  EXPECT_EQ(kept->WriteFromFile(file, 0, 16).code(), absl::StatusCode::kFailedPrecondition);
}

// One descriptor more while a writable Buffer keeps it, none after its seal
// or release.
TEST_F(FileFillTest, AKeptDescriptorLastsUntilTheSealOrTheRelease) {
  {
    // The client's first lease opens what every later one shares (its
    // reconnect thread's wake, the channel's sockets).
    auto first = client_->Create("fill/first", kMiB);
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE(first->Release().ok());
  }
  const int before = OpenDescriptors();
  ASSERT_GT(before, 0);
  auto sealed = client_->Create("fill/sealed", kMiB, {.keep_descriptor = true});
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(OpenDescriptors(), before + 1);
  ASSERT_TRUE(sealed->Seal().ok());
  EXPECT_EQ(OpenDescriptors(), before);
  auto released = client_->Create("fill/released", kMiB, {.keep_descriptor = true});
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(OpenDescriptors(), before + 1);
  ASSERT_TRUE(released->Release().ok());
  EXPECT_EQ(OpenDescriptors(), before);
}

}  // namespace
}  // namespace memd::test
