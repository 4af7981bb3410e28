#include "daemon/pool/trace_format.h"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace memd::pool {

// For failure messages; found by argument-dependent lookup.
void PrintTo(const TraceEvent& event, std::ostream* os) { *os << FormatTraceEvent(event); }

namespace {

using ::memd::test::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Every event of `text`, or the first error.
absl::StatusOr<std::vector<TraceEvent>> ReadAll(const std::string& text) {
  std::istringstream in(text);
  TraceReader reader(in);
  std::vector<TraceEvent> events;
  for (;;) {
    absl::StatusOr<std::optional<TraceEvent>> event = reader.Next();
    if (!event.ok()) return event.status();
    if (!event->has_value()) return events;
    events.push_back(**event);
  }
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(TraceReaderTest, ReadsAllocationsAndFrees) {
  auto events = ReadAll("op,id,bytes\na,1,4096\na,2,100\nf,1,0\nf,2,0\n");
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_THAT(*events, ElementsAre(TraceEvent::Allocate(1, 4096),
                                   TraceEvent::Allocate(2, 100), TraceEvent::Free(1),
                                   TraceEvent::Free(2)));
}

TEST(TraceReaderTest, AcceptsCrlfAndAMissingFinalNewline) {
  auto events = ReadAll("op,id,bytes\r\na,1,4096\r\nf,1,0");
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_THAT(*events, ElementsAre(TraceEvent::Allocate(1, 4096), TraceEvent::Free(1)));
}

TEST(TraceReaderTest, AcceptsAHeaderOnlyTrace) {
  auto events = ReadAll("op,id,bytes\n");
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_TRUE(events->empty());
}

TEST(TraceReaderTest, AcceptsTheFullRangeOfIdsAndSizes) {
  auto events = ReadAll(
      "op,id,bytes\na,18446744073709551615,18446744073709551615\n"
      "a,0,1\nf,18446744073709551615,0\n");
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ((*events)[0],
            TraceEvent::Allocate(18446744073709551615u, 18446744073709551615u));
  EXPECT_EQ((*events)[1], TraceEvent::Allocate(0, 1));
}

TEST(TraceReaderTest, AnIdMayBeAllocatedAgainAfterItsFree) {
  auto events = ReadAll("op,id,bytes\na,5,10\nf,5,0\na,5,20\n");
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->back(), TraceEvent::Allocate(5, 20));
}

TEST(TraceReaderTest, CountsLinesAndLiveIds) {
  std::istringstream in("op,id,bytes\na,1,10\na,2,10\nf,1,0\n");
  TraceReader reader(in);
  ASSERT_TRUE(reader.Next().ok());
  EXPECT_EQ(reader.line_number(), 2u);
  ASSERT_TRUE(reader.Next().ok());
  EXPECT_EQ(reader.live_count(), 2u);
  ASSERT_TRUE(reader.Next().ok());
  EXPECT_EQ(reader.line_number(), 4u);
  EXPECT_EQ(reader.live_count(), 1u);
  auto end = reader.Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ(reader.line_number(), 4u);
}

struct Malformed {
  std::string name;
  std::string text;
  std::string message;  // The whole error message, "line N: reason".
};

void PrintTo(const Malformed& malformed, std::ostream* os) { *os << malformed.name; }

class MalformedTraceTest : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedTraceTest, FailsWithTheLineNumberAndTheReason) {
  auto events = ReadAll(GetParam().text);
  ASSERT_FALSE(events.ok());
  EXPECT_EQ(events.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(events.status().message()), GetParam().message);
}

constexpr char kHeader[] = "op,id,bytes\n";

INSTANTIATE_TEST_SUITE_P(
    EveryReason, MalformedTraceTest,
    ::testing::Values(
        Malformed{"EmptyFile", "", "line 1: missing the header 'op,id,bytes' (the file is empty)"},
        Malformed{"WrongHeader", "op,id,size\na,1,1\n",
                  "line 1: expected the header 'op,id,bytes', got 'op,id,size'"},
        Malformed{"MissingHeader", "a,1,4096\n",
                  "line 1: expected the header 'op,id,bytes', got 'a,1,4096'"},
        Malformed{"EmptyLineInTheMiddle", std::string(kHeader) + "a,1,1\n\nf,1,0\n",
                  "line 3: empty line"},
        Malformed{"EmptyLineAtTheEnd", std::string(kHeader) + "a,1,1\n\n",
                  "line 3: empty line"},
        Malformed{"EmptyCrlfLine", std::string(kHeader) + "a,1,1\r\n\r\n",
                  "line 3: empty line"},
        Malformed{"TooFewFields", std::string(kHeader) + "a,1,1\na,2\n",
                  "line 3: expected 3 comma-separated fields (op,id,bytes), got 2"},
        Malformed{"TooManyFields", std::string(kHeader) + "a,1,1,1\n",
                  "line 2: expected 3 comma-separated fields (op,id,bytes), got 4"},
        Malformed{"UnknownOp", std::string(kHeader) + "a,1,1\nx,1,0\n",
                  "line 3: unknown op 'x' (expected a or f)"},
        Malformed{"UppercaseOp", std::string(kHeader) + "A,1,1\n",
                  "line 2: unknown op 'A' (expected a or f)"},
        Malformed{"EmptyId", std::string(kHeader) + "a,,1\n", "line 2: empty id"},
        Malformed{"EmptyBytes", std::string(kHeader) + "a,1,\n", "line 2: empty bytes"},
        Malformed{"NegativeId", std::string(kHeader) + "a,-1,1\n",
                  "line 2: id '-1' is not an unsigned decimal integer"},
        Malformed{"PlusSign", std::string(kHeader) + "a,1,+5\n",
                  "line 2: bytes '+5' is not an unsigned decimal integer"},
        Malformed{"SpaceInNumber", std::string(kHeader) + "a,1,4 096\n",
                  "line 2: bytes '4 096' is not an unsigned decimal integer"},
        Malformed{"LeadingSpace", std::string(kHeader) + "a, 1,4096\n",
                  "line 2: id ' 1' is not an unsigned decimal integer"},
        Malformed{"HexId", std::string(kHeader) + "a,0x10,1\n",
                  "line 2: id '0x10' is not an unsigned decimal integer"},
        Malformed{"IdOutOfRange", std::string(kHeader) + "a,18446744073709551616,1\n",
                  "line 2: id '18446744073709551616' is out of range (more than "
                  "18446744073709551615)"},
        Malformed{"BytesOutOfRange", std::string(kHeader) + "a,1,99999999999999999999\n",
                  "line 2: bytes '99999999999999999999' is out of range (more than "
                  "18446744073709551615)"},
        Malformed{"ZeroByteAllocation", std::string(kHeader) + "a,1,0\n",
                  "line 2: allocation of 0 bytes (id 1)"},
        Malformed{"FreeWithBytes", std::string(kHeader) + "a,1,10\nf,1,10\n",
                  "line 3: free of id 1 with bytes 10 (a free has bytes 0)"},
        Malformed{"AllocationOfALiveId", std::string(kHeader) + "a,1,10\na,2,10\na,1,10\n",
                  "line 4: allocation of id 1, which is live (allocated on line 2)"},
        Malformed{"FreeOfAnUnknownId", std::string(kHeader) + "a,1,10\nf,2,0\n",
                  "line 3: free of id 2, which is not live"},
        Malformed{"DoubleFree", std::string(kHeader) + "a,1,10\nf,1,0\nf,1,0\n",
                  "line 4: free of id 1, which is not live"},
        Malformed{"BinaryGarbage", std::string(kHeader) + "a,1,\x01\xff\n",
                  "line 2: bytes '\\x01\\xff' is not an unsigned decimal integer"},
        Malformed{"LineTooLong", std::string(kHeader) + "a,1," + std::string(300, '1') + "\n",
                  "line 2: longer than 256 characters"}),
    [](const ::testing::TestParamInfo<Malformed>& info) { return info.param.name; });

TEST(TraceWriterTest, WritesTheHeaderAndOneLinePerEvent) {
  TempDir dir;
  const std::string path = dir.Join("trace.csv");
  {
    auto writer = TraceWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    EXPECT_EQ((*writer)->NextId(), 1u);
    EXPECT_EQ((*writer)->NextId(), 2u);
    ASSERT_TRUE((*writer)->Write(TraceEvent::Allocate(1, 4096)).ok());
    ASSERT_TRUE((*writer)->Write(TraceEvent::Free(1)).ok());
    ASSERT_TRUE((*writer)->Flush().ok());
    EXPECT_EQ(ReadWholeFile(path), "op,id,bytes\na,1,4096\nf,1,0\n");
    ASSERT_TRUE((*writer)->Write(TraceEvent::Allocate(2, 7)).ok());
  }
  // The destructor flushed the rest.
  EXPECT_EQ(ReadWholeFile(path), "op,id,bytes\na,1,4096\nf,1,0\na,2,7\n");
}

TEST(TraceWriterTest, AnEmptyTraceIsTheHeader) {
  TempDir dir;
  const std::string path = dir.Join("trace.csv");
  { ASSERT_TRUE(TraceWriter::Create(path).ok()); }
  EXPECT_EQ(ReadWholeFile(path), "op,id,bytes\n");
}

TEST(TraceWriterTest, CreateNamesThePathWhenItCannotOpen) {
  TempDir dir;
  auto writer = TraceWriter::Create(dir.Join("missing/trace.csv"));
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(writer.status().message()), HasSubstr(dir.Join("missing/trace.csv")));
}

TEST(TraceWriterTest, AWriteErrorIsStickyAndReported) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  ::close(pipe_fds[0]);  // Writing now fails with EPIPE (SIGPIPE ignored below).
  ::signal(SIGPIPE, SIG_IGN);
  {
    TraceWriter writer(pipe_fds[1], "the pipe");
    (void)writer.Write(TraceEvent::Allocate(1, 1));
    absl::Status status = writer.Flush();
    EXPECT_FALSE(status.ok());
    EXPECT_THAT(std::string(status.message()), StartsWith("trace file the pipe: write"));
    EXPECT_EQ(writer.Write(TraceEvent::Free(1)), status);
    EXPECT_EQ(writer.status(), status);
  }
  ::close(pipe_fds[1]);
}

TEST(TraceWriterTest, RoundTripsThroughTheReader) {
  TempDir dir;
  const std::string path = dir.Join("trace.csv");
  std::vector<TraceEvent> written;
  {
    auto writer = TraceWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    // Enough to fill the write buffer several times.
    for (std::uint64_t i = 0; i < 20000; ++i) {
      written.push_back(TraceEvent::Allocate((*writer)->NextId(), 1 + i * 4099));
      if (i % 3 == 2) {
        written.push_back(TraceEvent::Free(written[written.size() - 2].id));
      }
    }
    written.push_back(TraceEvent::Allocate(18446744073709551615u, 18446744073709551615u));
    for (const TraceEvent& event : written) ASSERT_TRUE((*writer)->Write(event).ok());
  }
  auto events = ReadAll(ReadWholeFile(path));
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(*events, written);
}

TEST(TraceWriterTest, LinesFromManyThreadsStayWhole) {
  TempDir dir;
  const std::string path = dir.Join("trace.csv");
  constexpr int kThreads = 8;
  constexpr int kPerThread = 5000;
  {
    auto writer = TraceWriter::Create(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&writer] {
        for (int i = 0; i < kPerThread; ++i) {
          const std::uint64_t id = (*writer)->NextId();
          (void)(*writer)->Write(TraceEvent::Allocate(id, id));
          (void)(*writer)->Write(TraceEvent::Free(id));
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }
  auto events = ReadAll(ReadWholeFile(path));
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 2u * kThreads * kPerThread);
  absl::flat_hash_set<std::uint64_t> ids;
  for (const TraceEvent& event : *events) {
    if (event.op == TraceEvent::Op::kAllocate) {
      EXPECT_EQ(event.bytes, event.id);
      EXPECT_TRUE(ids.insert(event.id).second) << "id " << event.id << " twice";
    }
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kThreads * kPerThread));
}

}  // namespace
}  // namespace memd::pool
