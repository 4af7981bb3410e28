// memctl's InputReader: put's input read slice by slice into aligned
// memory, and every way the input can disagree with the size memctl
// expected.

#include "tools/memctl/input_reader.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"
#include "tools/memctl/failure.h"

namespace memd::memctl {
namespace {

using ::memd::test::RandomBytes;
using ::memd::test::TempDir;
using ::memd::test::WriteWholeFile;
using ::testing::HasSubstr;

constexpr std::size_t kAlign = 4096;

// Page-aligned memory, as memctl's staging mapping is.
struct Aligned {
  explicit Aligned(std::size_t size) : size(size) {
    void* memory = nullptr;
    EXPECT_EQ(::posix_memalign(&memory, kAlign, std::max(size, kAlign)), 0);
    data.reset(static_cast<std::byte*>(memory));
  }
  std::span<std::byte> span(std::size_t offset, std::size_t length) {
    return {data.get() + offset, length};
  }
  std::string str() const { return std::string(reinterpret_cast<const char*>(data.get()), size); }
  struct Free {
    void operator()(std::byte* memory) const { ::free(memory); }
  };
  std::unique_ptr<std::byte, Free> data;
  std::size_t size;
};

class InputReaderTest : public ::testing::Test {
 protected:
  // The file is evicted from the page cache where the filesystem can (not
  // tmpfs): reads come from the disk.
  Input Open(const std::string& bytes) {
    const std::string path = dir_.Join("in");
    WriteWholeFile(path, bytes);
    absl::StatusOr<Input> input = OpenInput(path);
    EXPECT_TRUE(input.ok()) << input.status();
    Evict(input->fd.get());
    return *std::move(input);
  }

  static void Evict(int fd) {
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  }

  // Reads `size` bytes in slices of `slice` bytes into aligned memory.
  absl::Status ReadAll(InputReader& reader, Aligned& into, std::size_t slice) {
    for (std::size_t offset = 0; offset < into.size; offset += slice) {
      absl::Status status = reader.Read(into.span(offset, std::min(slice, into.size - offset)));
      if (!status.ok()) return status;
    }
    return reader.CheckEnd();
  }

  TempDir dir_;
};

TEST_F(InputReaderTest, ReadsAlignedSlicesAndAnUnalignedTail) {
  for (std::size_t size : {std::size_t{1}, kAlign - 1, kAlign, 3 * kAlign + 5,
                           (std::size_t{1} << 20) + 17}) {
    SCOPED_TRACE(testing::Message() << size);
    const std::string bytes = RandomBytes(size, static_cast<unsigned>(size));
    Input input = Open(bytes);
    InputReader reader(input, nullptr, false, size);
    Aligned into(size);
    ASSERT_TRUE(ReadAll(reader, into, 2 * kAlign).ok());
    EXPECT_TRUE(into.str() == bytes);
  }
}

TEST_F(InputReaderTest, AFileReadPartWayIsReadOnFromWhereItIs) {
  // stdin may be a file something read 3 bytes of.
  const std::string bytes = RandomBytes(5 * kAlign, 4);
  Input input = Open(bytes);
  ASSERT_EQ(::lseek(input.fd.get(), 3, SEEK_SET), 3);
  InputReader reader(input, nullptr, false, bytes.size() - 3);
  Aligned into(bytes.size() - 3);
  ASSERT_TRUE(ReadAll(reader, into, 2 * kAlign).ok());
  EXPECT_TRUE(into.str() == bytes.substr(3));
}

TEST_F(InputReaderTest, AFileShorterThanExpectedIsAFailedPrecondition) {
  Input input = Open(RandomBytes(kAlign + 10, 5));
  InputReader reader(input, nullptr, false, 2 * kAlign);
  Aligned into(2 * kAlign);
  absl::Status status = ReadAll(reader, into, 2 * kAlign);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("ended after 4106 of 8192 bytes"));
  EXPECT_THAT(FailedStep(status), HasSubstr("read "));
}

TEST_F(InputReaderTest, AFileLongerThanExpectedIsAFailedPrecondition) {
  Input input = Open(RandomBytes(2 * kAlign + 1, 6));
  InputReader reader(input, nullptr, false, 2 * kAlign);
  Aligned into(2 * kAlign);
  absl::Status status = ReadAll(reader, into, kAlign);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("grew past 8192 bytes"));
}

TEST_F(InputReaderTest, SizeFlagMessagesSayWhatSizePromised) {
  Input shorter = Open("12345");
  InputReader short_reader(shorter, nullptr, /*sized_by_flag=*/true, 6);
  Aligned six(6);
  EXPECT_THAT(ReadAll(short_reader, six, 6).message(),
              HasSubstr("ended after 5 of the 6 bytes --size promised"));
  Input longer = Open("1234567");
  InputReader long_reader(longer, nullptr, /*sized_by_flag=*/true, 6);
  EXPECT_THAT(ReadAll(long_reader, six, 6).message(),
              HasSubstr("more than the 6 bytes --size promised"));
}

TEST_F(InputReaderTest, CollectedPiecesFillSlicesAcrossTheirBoundaries) {
  Collected collected;
  collected.pieces = {"abc", "", "defgh", "ij"};
  collected.size = 10;
  Input unused;
  InputReader reader(unused, &collected, false, collected.size);
  Aligned into(10);
  ASSERT_TRUE(ReadAll(reader, into, 4).ok());
  EXPECT_EQ(into.str(), "abcdefghij");
}

TEST_F(InputReaderTest, ReadErrorsNameTheInput) {
  // A directory opened for reading fails at read(2) with EISDIR.
  Input input;
  input.label = dir_.path();
  input.kind = Input::Kind::kFile;
  input.fd.reset(::open(dir_.path().c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(input.fd);
  InputReader reader(input, nullptr, false, 10);
  Aligned into(10);
  absl::Status status = reader.Read(into.span(0, 10));
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(FailedStep(status), "read " + dir_.path());
}

}  // namespace
}  // namespace memd::memctl
