// CopyThreads and the streaming copy: every byte lands, at any alignment and
// length, with cached and with non-temporal stores, on 1..4 threads; and the
// bytes around the destination stay untouched.

#include "daemon/transfer/copy_threads.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/transfer/engine_types.h"
#include "daemon/transfer/streaming_copy.h"
#include "gtest/gtest.h"

namespace memd::transfer {
namespace {

constexpr std::byte kGuard{0xee};
constexpr std::uint64_t kSlack = 128;  // Guard bytes on both sides.

// A source of distinct bytes and a guarded destination, offset from a 64-byte
// boundary by `misalign` on both sides (so that source and destination
// alignments differ).
struct Buffers {
  Buffers(std::uint64_t bytes, std::uint64_t source_misalign, std::uint64_t destination_misalign)
      : source_storage(bytes + 2 * kSlack), destination_storage(bytes + 2 * kSlack, kGuard) {
    source = Aligned(source_storage.data()) + source_misalign;
    destination = Aligned(destination_storage.data()) + destination_misalign;
    for (std::uint64_t i = 0; i < bytes; ++i) source[i] = std::byte(i * 131 + (i >> 8));
  }
  static std::byte* Aligned(std::byte* at) {
    const auto address = reinterpret_cast<std::uintptr_t>(at);
    return at + (64 - address % 64) % 64;
  }
  std::vector<std::byte> source_storage;
  std::vector<std::byte> destination_storage;
  std::byte* source = nullptr;
  std::byte* destination = nullptr;
};

// The first difference, or "" when the copy is exact and the guards intact.
std::string CheckCopy(const Buffers& buffers, std::uint64_t bytes) {
  for (std::uint64_t i = 0; i < bytes; ++i) {
    if (buffers.destination[i] != buffers.source[i]) return absl::StrCat("byte ", i, " differs");
  }
  for (const std::byte* at = buffers.destination_storage.data(); at < buffers.destination; ++at) {
    if (*at != kGuard) return absl::StrCat("guard before the copy overwritten");
  }
  const std::byte* end = buffers.destination_storage.data() + buffers.destination_storage.size();
  for (const std::byte* at = buffers.destination + bytes; at < end; ++at) {
    if (*at != kGuard) return absl::StrCat("guard after the copy overwritten");
  }
  return "";
}

TEST(StreamingCopyTest, CopiesEveryLengthAndAlignmentExactly) {
  for (std::uint64_t bytes : {0, 1, 15, 16, 17, 63, 64, 65, 127, 200, 4096 + 3}) {
    for (std::uint64_t source_misalign : {0, 1, 8, 33}) {
      for (std::uint64_t destination_misalign : {0, 1, 15, 16, 40}) {
        Buffers buffers(bytes, source_misalign, destination_misalign);
        StreamingCopy(buffers.destination, buffers.source, bytes);
        EXPECT_EQ(CheckCopy(buffers, bytes), "")
            << bytes << " bytes, source +" << source_misalign << ", destination +"
            << destination_misalign;
      }
    }
  }
}

// (threads, stores as int, bytes, destination misalignment)
class CopyThreadsTest
    : public testing::TestWithParam<std::tuple<int, int, std::uint64_t, std::uint64_t>> {};

TEST_P(CopyThreadsTest, CopiesExactlyAndKeepsTheBytesAround) {
  const auto [threads, stores, bytes, misalign] = GetParam();
  CopyThreads copy(threads);
  Buffers buffers(bytes, 3, misalign);
  // Twice: the helpers are reused for the second copy.
  for (int round = 0; round < 2; ++round) {
    std::fill(buffers.destination_storage.begin(), buffers.destination_storage.end(), kGuard);
    copy.Copy(buffers.destination, buffers.source, bytes, static_cast<Stores>(stores));
    ASSERT_EQ(CheckCopy(buffers, bytes), "") << "round " << round;
  }
}

INSTANTIATE_TEST_SUITE_P(
    SplitAndUnsplit, CopyThreadsTest,
    testing::Combine(testing::Values(1, 2, 3, 4, 7, kMaxCopyThreads),
                     testing::Values(static_cast<int>(Stores::kCached),
                                     static_cast<int>(Stores::kStreaming)),
                     // Below the split threshold, at it, and a length whose
                     // parts do not divide evenly.
                     testing::Values(std::uint64_t{4096}, std::uint64_t{512} << 10,
                                     (std::uint64_t{4} << 20) + 12345),
                     testing::Values(std::uint64_t{0}, std::uint64_t{5})));

// Whole pages and a byte or three, split across 2..4 threads: a share of
// bytes / parts rounded up to a cache line fell short of the length whenever
// bytes / parts was already a whole number of lines (1 MiB + 1 on 2 or 4
// threads: 4 * 262144 = 1 MiB), and the last bytes were never copied.
TEST(CopyThreadsSplitTest, CopiesTheLastBytesOfLengthsJustPastEvenShares) {
  constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;
  constexpr std::uint64_t kLines = std::uint64_t{64} * 4096;  // Shares of whole lines on 3 threads.
  for (int threads : {2, 3, 4, 7, kMaxCopyThreads}) {
    CopyThreads copy(threads);
    for (std::uint64_t bytes :
         {(std::uint64_t{512} << 10) + 1, kMiB + 1, kMiB + 2, kMiB + 3, 2 * kMiB + 4097,
          3 * kMiB + 1, 4 * kMiB - 4095, 4 * kMiB + 1, 3 * kLines + 1, 3 * kLines + 2}) {
      for (Stores stores : {Stores::kCached, Stores::kStreaming}) {
        Buffers buffers(bytes, 0, 0);
        copy.Copy(buffers.destination, buffers.source, bytes, stores);
        EXPECT_EQ(CheckCopy(buffers, bytes), "")
            << threads << " threads, " << bytes << " bytes, stores "
            << static_cast<int>(stores);
      }
    }
  }
}

// `between` runs on the caller's thread after each piece of its own share,
// with that piece in place (the lane lets critical chunks in there), and the
// copy is still exact. On one thread the caller's share is everything.
TEST(CopyThreadsBetweenTest, RunsAfterEachPieceOfTheCallersShareAndKeepsTheCopyExact) {
  constexpr std::uint64_t kBytes = (std::uint64_t{4} << 20) + 12345;
  for (int threads : {1, 2, 4}) {
    for (Stores stores : {Stores::kCached, Stores::kStreaming}) {
      CopyThreads copy(threads);
      Buffers buffers(kBytes, 3, 5);
      std::uint64_t calls = 0;
      std::string early;  // The first piece found missing when `between` ran.
      copy.Copy(buffers.destination, buffers.source, kBytes, stores, [&] {
        ++calls;
        const std::uint64_t copied = std::min(calls * CopyThreads::kCallerPiece, kBytes);
        if (threads == 1 && early.empty() &&
            !std::equal(buffers.source, buffers.source + copied, buffers.destination)) {
          early = absl::StrCat("call ", calls, ": the first ", copied, " bytes are not in place");
        }
      });
      EXPECT_EQ(CheckCopy(buffers, kBytes), "") << threads << " threads";
      EXPECT_EQ(early, "");
      const std::uint64_t share = threads == 1 ? kBytes : (kBytes + threads - 1) / threads;
      const std::uint64_t pieces =
          (share + CopyThreads::kCallerPiece - 1) / CopyThreads::kCallerPiece;
      // A share is rounded up to a cache line: at most one piece more.
      EXPECT_GE(calls, pieces) << threads << " threads";
      EXPECT_LE(calls, pieces + 1) << threads << " threads";
    }
  }
}

TEST(CopyThreadsCountTest, RunsWhatItIsAskedWithinOneToTheMost) {
  EXPECT_EQ(CopyThreads(1).threads(), 1);
  EXPECT_EQ(CopyThreads(kMaxCopyThreads).threads(), kMaxCopyThreads);
  EXPECT_EQ(CopyThreads(kMaxCopyThreads + 5).threads(), kMaxCopyThreads);
  EXPECT_EQ(CopyThreads(0).threads(), 1);
}

// Half the CPUs, 2 to 8: a 2-CPU VM keeps 2, a 16-CPU GPU node gets the 8
// that keep a Gen5 link busy at 8-9 GB/s a thread, a 128-CPU node no more.
TEST(CopyThreadsCountTest, TheDefaultIsHalfTheCpusFromTwoToEight) {
  EXPECT_EQ(DefaultCopyThreads(1), 2);
  EXPECT_EQ(DefaultCopyThreads(2), 2);
  EXPECT_EQ(DefaultCopyThreads(6), 3);
  EXPECT_EQ(DefaultCopyThreads(11), 5);
  EXPECT_EQ(DefaultCopyThreads(16), 8);
  EXPECT_EQ(DefaultCopyThreads(128), 8);
}

}  // namespace
}  // namespace memd::transfer
