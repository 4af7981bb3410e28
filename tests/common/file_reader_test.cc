// ParallelFileReader: ranges of a file read on several threads land byte for
// byte where they belong, tails and odd sizes included; O_DIRECT where the
// filesystem allows it and a clear refusal (or the page cache) where it does
// not; the drop policy leaves the file out of the page cache.

#include "common/file_reader.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace memd {
namespace {

using ::memd::test::CachedBytes;
using ::memd::test::RandomBytes;
using ::memd::test::TempDir;
using ::memd::test::WriteWholeFile;
using ::testing::HasSubstr;

constexpr std::size_t kAlign = ParallelFileReader::kDirectAlignment;
// Small pieces, so that a few KiB make many of them.
constexpr std::uint64_t kPiece = 2 * kAlign;

// Page-aligned memory, as a staging buffer's mapping is.
struct Aligned {
  explicit Aligned(std::size_t size) : size(size) {
    void* memory = nullptr;
    EXPECT_EQ(::posix_memalign(&memory, kAlign, std::max(size, kAlign) + kAlign), 0);
    data.reset(static_cast<std::byte*>(memory));
    std::memset(memory, 0xEE, std::max(size, kAlign) + kAlign);
  }
  std::span<std::byte> span(std::size_t offset, std::size_t length) {
    return {data.get() + offset, length};
  }
  std::string str(std::size_t offset, std::size_t length) const {
    return std::string(reinterpret_cast<const char*>(data.get()) + offset, length);
  }
  struct Free {
    void operator()(std::byte* memory) const { ::free(memory); }
  };
  std::unique_ptr<std::byte, Free> data;
  std::size_t size;
};

bool OnFilesystem(const std::string& path, long magic) {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == magic;
}


void Evict(int fd) {
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
}

class FileReaderTest : public ::testing::Test {
 protected:
  int Open(const std::string& bytes) {
    const std::string path = dir_.Join(absl::StrCat("in-", files_++));
    WriteWholeFile(path, bytes);
    fd_ = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    EXPECT_TRUE(fd_.valid()) << path;
    return fd_.get();
  }

  std::unique_ptr<ParallelFileReader> Reader(FileReadOptions options) {
    absl::StatusOr<std::unique_ptr<ParallelFileReader>> reader =
        ParallelFileReader::Create(fd_.get(), options);
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? *std::move(reader) : nullptr;
  }

  // Reads the whole file (of `bytes`) in ranges of `range` bytes, all
  // submitted before the first wait, and compares.
  void ReadAllAndCompare(ParallelFileReader& reader, const std::string& bytes,
                         std::size_t range, std::size_t memory_offset = 0) {
    Aligned into(bytes.size() + memory_offset);
    std::vector<ParallelFileReader::Ticket> tickets;
    for (std::size_t at = 0; at < bytes.size(); at += range) {
      tickets.push_back(reader.Submit(
          at, into.span(memory_offset + at, std::min(range, bytes.size() - at))));
    }
    for (ParallelFileReader::Ticket ticket : tickets) {
      ASSERT_TRUE(reader.Wait(ticket).ok());
    }
    EXPECT_TRUE(into.str(memory_offset, bytes.size()) == bytes) << bytes.size() << " bytes";
    // Nothing past the range was written.
    EXPECT_EQ(into.str(memory_offset + bytes.size(), 1), std::string(1, '\xEE'));
  }

  TempDir dir_;
  UniqueFd fd_;
  int files_ = 0;
};

TEST_F(FileReaderTest, ParallelReadsReproduceFilesOfOddSizesExactly) {
  for (std::size_t size : {std::size_t{1}, kAlign - 1, kAlign, kAlign + 1, 7 * kPiece + 123,
                           std::size_t{1} << 20}) {
    const std::string bytes = RandomBytes(size, static_cast<unsigned>(size));
    Open(bytes);
    for (int threads : {1, 2, 5}) {
      SCOPED_TRACE(absl::StrCat(size, " bytes, ", threads, " threads"));
      std::unique_ptr<ParallelFileReader> reader =
          Reader({.threads = threads, .piece_bytes = kPiece});
      ASSERT_NE(reader, nullptr);
      EXPECT_EQ(reader->threads(), threads);
      ReadAllAndCompare(*reader, bytes, 3 * kPiece);
      // Ranges that are not aligned, into memory that is not either.
      ReadAllAndCompare(*reader, bytes, 3 * kPiece + 7, 5);
    }
  }
}

TEST_F(FileReaderTest, DefaultThreadsFollowTheCpus) {
  Open("x");
  std::unique_ptr<ParallelFileReader> reader = Reader({});
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(reader->threads(), ParallelFileReader::DefaultReadThreads());
  EXPECT_GE(reader->threads(), 1);
  EXPECT_LE(reader->threads(), 8);
}

TEST_F(FileReaderTest, BadOptionsAreInvalidArgument) {
  Open("x");
  for (int threads : {-1, ParallelFileReader::kMaxReadThreads + 1, 1 << 30}) {
    absl::StatusOr<std::unique_ptr<ParallelFileReader>> reader =
        ParallelFileReader::Create(fd_.get(), {.threads = threads});
    EXPECT_EQ(reader.status().code(), absl::StatusCode::kInvalidArgument) << threads;
    EXPECT_THAT(reader.status().message(), HasSubstr("1 to 16"));
  }
  for (std::uint64_t piece : {std::uint64_t{0}, std::uint64_t{1000}}) {
    EXPECT_EQ(ParallelFileReader::Create(fd_.get(), {.piece_bytes = piece}).status().code(),
              absl::StatusCode::kInvalidArgument)
        << piece;
  }
  EXPECT_EQ(ParallelFileReader::Create(-1, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(FileReaderTest, AFileShorterThanTheRangeIsOutOfRangeWithTheByteItEndedAt) {
  const std::string bytes = RandomBytes(3 * kPiece + 10, 1);
  Open(bytes);
  std::unique_ptr<ParallelFileReader> reader = Reader({.threads = 3, .piece_bytes = kPiece});
  Aligned into(bytes.size() + kPiece);
  absl::Status status = reader->Wait(reader->Submit(0, into.span(0, bytes.size() + kPiece)));
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("ended at byte ", bytes.size())));
  // The reader goes on serving other ranges.
  ReadAllAndCompare(*reader, bytes, bytes.size());
}

TEST_F(FileReaderTest, DirectReadsAlignedRangesAndTheirTailsWhereTheFilesystemAllows) {
  const std::string bytes = RandomBytes(5 * kPiece + 77, 2);
  Open(bytes);
  absl::StatusOr<std::unique_ptr<ParallelFileReader>> reader = ParallelFileReader::Create(
      fd_.get(), {.threads = 3, .piece_bytes = kPiece, .direct = DirectIo::kRequire});
  if (!reader.ok() && absl::IsFailedPrecondition(reader.status())) {
    GTEST_SKIP() << dir_.path() << " refuses O_DIRECT: " << reader.status();
  }
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->direct());
  Evict(fd_.get());
  ReadAllAndCompare(**reader, bytes, 2 * kPiece);
  // All but the last 77 bytes (the tail) went direct.
  EXPECT_EQ((*reader)->direct_bytes(), bytes.size() - 77);
  ReadAllAndCompare(**reader, bytes, 2 * kPiece + 1, 3);  // Unaligned: the page cache.
  EXPECT_TRUE((*reader)->direct());
  EXPECT_EQ((*reader)->direct_bytes(), bytes.size() - 77);
  // The caller's descriptor keeps its flags.
  EXPECT_EQ(::fcntl(fd_.get(), F_GETFL) & O_DIRECT, 0);
}

TEST_F(FileReaderTest, TheDropPolicyLeavesNothingOfTheFileInThePageCache) {
  if (OnFilesystem(dir_.path(), TMPFS_MAGIC)) {
    GTEST_SKIP() << "tmpfs pages are the file itself: nothing to drop";
  }
  // Pieces of 2 MiB: the page cache drops a large folio (up to 2 MiB on
  // x86) only when the advice covers all of it.
  constexpr std::uint64_t kLargePiece = std::uint64_t{2} << 20;
  const std::size_t size = 4 * kLargePiece;
  const std::string bytes = RandomBytes(size, 3);
  Open(bytes);
  Evict(fd_.get());
  ASSERT_LT(CachedBytes(fd_.get(), size), size / 2) << "cannot evict the file here";
  {
    std::unique_ptr<ParallelFileReader> keep =
        Reader({.threads = 2, .piece_bytes = kLargePiece});
    ReadAllAndCompare(*keep, bytes, size);
  }
  EXPECT_EQ(CachedBytes(fd_.get(), size), size) << "a buffered read caches the file";
  {
    std::unique_ptr<ParallelFileReader> drop =
        Reader({.threads = 2, .piece_bytes = kLargePiece, .cache = CachePolicy::kDrop});
    ReadAllAndCompare(*drop, bytes, size);
  }
  EXPECT_EQ(CachedBytes(fd_.get(), size), 0u);
}

// In a child: a file on ramfs, which has no O_DIRECT, in a mount namespace
// of its own. Exit codes: 0 as expected, 2 no namespace or mount here
// (skipped), others the failed check.
int OnRamfs(const std::string& dir, int (*check)(int fd)) {
  const pid_t child = ::fork();
  if (child == 0) {
    const int flags = CLONE_NEWNS | (::geteuid() == 0 ? 0 : CLONE_NEWUSER);
    if (::unshare(flags) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("memd-test", dir.c_str(), "ramfs", 0, nullptr) != 0) {
      ::_exit(2);
    }
    const std::string path = dir + "/file";
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    const std::string bytes = RandomBytes(3 * kAlign + 5, 4);
    if (fd < 0 || ::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
      ::_exit(3);
    }
    ::_exit(check(fd));
  }
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// O_DIRECT goes to the disk: a reader reads a range the page cache holds
// from the cache instead (memctl put, Buffer::WriteFromFile).
TEST_F(FileReaderTest, MostlyCachedTellsACachedRangeFromAnEvictedOne) {
  const std::string bytes = RandomBytes(1 << 20, 9);
  const int fd = Open(bytes);
  EXPECT_TRUE(FileMostlyCached(fd, 0, bytes.size()));
  // A range that starts inside a page probes from that page.
  EXPECT_TRUE(FileMostlyCached(fd, 5000, bytes.size() - 5000));
  if (!OnFilesystem(dir_.path(), TMPFS_MAGIC)) {  // tmpfs keeps every page.
    Evict(fd);
    EXPECT_FALSE(FileMostlyCached(fd, 0, bytes.size()));
    // Half of it read again: its second half is cached, its first is not.
    Aligned into(bytes.size() / 2);
    std::unique_ptr<ParallelFileReader> reader = Reader({.threads = 1});
    ASSERT_TRUE(reader->Wait(reader->Submit(bytes.size() / 2, into.span(0, bytes.size() / 2)))
                    .ok());
    EXPECT_TRUE(FileMostlyCached(fd, bytes.size() / 2, bytes.size() / 2));
    EXPECT_FALSE(FileMostlyCached(fd, 0, bytes.size() / 2));
  }
  EXPECT_FALSE(FileMostlyCached(fd, 0, 0));
}

TEST_F(FileReaderTest, RequiredDirectOnAFilesystemWithoutItIsFailedPrecondition) {
  const int result = OnRamfs(dir_.path(), [](int fd) {
    absl::StatusOr<std::unique_ptr<ParallelFileReader>> reader =
        ParallelFileReader::Create(fd, {.direct = DirectIo::kRequire});
    if (reader.ok()) return 10;
    if (!absl::IsFailedPrecondition(reader.status())) return 11;
    if (reader.status().message().find("refuses O_DIRECT") == std::string_view::npos) {
      return 12;
    }
    return 0;
  });
  if (result == 2) GTEST_SKIP() << "no mount namespace with ramfs here";
  EXPECT_EQ(result, 0);
}

TEST_F(FileReaderTest, PreferredDirectOnAFilesystemWithoutItReadsThroughThePageCache) {
  const int result = OnRamfs(dir_.path(), [](int fd) {
    absl::StatusOr<std::unique_ptr<ParallelFileReader>> reader = ParallelFileReader::Create(
        fd, {.threads = 2, .piece_bytes = kPiece, .direct = DirectIo::kPrefer});
    if (!reader.ok()) return 10;
    if ((*reader)->direct()) return 11;
    if ((*reader)->direct_bytes() != 0) return 14;
    const std::string bytes = RandomBytes(3 * kAlign + 5, 4);
    Aligned into(bytes.size());
    if (!(*reader)->Wait((*reader)->Submit(0, into.span(0, bytes.size()))).ok()) return 12;
    return into.str(0, bytes.size()) == bytes ? 0 : 13;
  });
  if (result == 2) GTEST_SKIP() << "no mount namespace with ramfs here";
  EXPECT_EQ(result, 0);
}

}  // namespace
}  // namespace memd
