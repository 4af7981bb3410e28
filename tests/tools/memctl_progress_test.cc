// memctl's pure pieces for copies: what a cp operand names, the progress
// line a terminal shows, and the report --json prints.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/memctl/format.h"
#include "tools/memctl/operand.h"
#include "tools/memctl/progress.h"

namespace memd::memctl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

TEST(OperandTest, PathsThatNoBufferNameCanTakeAreFiles) {
  for (const char* file : {"/tmp/w.bin", "./w.bin", "../w.bin", "/", "./", "../a/b"}) {
    EXPECT_EQ(ClassifyOperand(file).kind, Operand::Kind::kFile) << file;
  }
  for (const char* buffer : {"w.bin", "model/w", ".hidden/x", "..x", "a/./b", "-x", "--"}) {
    EXPECT_EQ(ClassifyOperand(buffer).kind, Operand::Kind::kBuffer) << buffer;
  }
  EXPECT_EQ(ClassifyOperand("-").kind, Operand::Kind::kStdio);
  EXPECT_EQ(ClassifyOperand("./w.bin").text, "./w.bin");
}

TEST(OperandTest, APathThatExistsIsAFileAndBufNamesABufferWhateverExists) {
  const auto here = [](const std::string& path) { return path == "o.txt" || path == "m/w"; };
  EXPECT_EQ(ClassifyOperand("o.txt", here).kind, Operand::Kind::kFile);
  EXPECT_EQ(ClassifyOperand("m/w", here).kind, Operand::Kind::kFile);
  EXPECT_EQ(ClassifyOperand("o.bin", here).kind, Operand::Kind::kBuffer);
  const Operand forced = ClassifyOperand("buf:o.txt", here);
  EXPECT_EQ(forced.kind, Operand::Kind::kBuffer);
  EXPECT_EQ(forced.text, "o.txt");
  EXPECT_EQ(ClassifyOperand("buf:./x", here).text, "./x");  // The daemon refuses the name.
}

TEST(ProgressFormatTest, RatesAreDecimalAsLinksAreRated) {
  EXPECT_EQ(FormatRate(0), "0 B/s");
  EXPECT_EQ(FormatRate(-5), "0 B/s");
  EXPECT_EQ(FormatRate(999), "999 B/s");
  EXPECT_EQ(FormatRate(1500), "1.50 kB/s");
  EXPECT_EQ(FormatRate(3.1e9), "3.10 GB/s");
  EXPECT_EQ(FormatRate(25e12), "25.00 TB/s");
}

TEST(ProgressFormatTest, GigabytesPerSecondIsZeroWithoutTime) {
  EXPECT_DOUBLE_EQ(GigabytesPerSecond(2'000'000'000, absl::Seconds(2)), 1.0);
  EXPECT_DOUBLE_EQ(GigabytesPerSecond(5, absl::ZeroDuration()), 0.0);
}

TEST(ProgressFormatTest, EtaRoundsUpToSecondsAndSaysWhenUnknown) {
  EXPECT_EQ(FormatEta(absl::Milliseconds(200)), "0:01");
  EXPECT_EQ(FormatEta(absl::Seconds(75)), "1:15");
  EXPECT_EQ(FormatEta(absl::Hours(2) + absl::Seconds(3)), "2:00:03");
  EXPECT_EQ(FormatEta(absl::InfiniteDuration()), "--:--");
  EXPECT_EQ(FormatEta(absl::Seconds(-1)), "--:--");
}

TEST(ProgressFormatTest, LineShowsBarBytesRateAndEta) {
  // Half of 2 GiB in 1 s: 1.07 GB/s, and as long again to go.
  const std::string line = FormatProgressLine("put w", std::uint64_t{1} << 30,
                                              std::uint64_t{2} << 30, absl::Seconds(1), 79);
  EXPECT_THAT(line, AllOf(StartsWith("put w  [##########..........]"),
                          HasSubstr("1 GiB / 2 GiB"), HasSubstr("1.07 GB/s"),
                          HasSubstr("ETA 0:01")));
  EXPECT_LE(line.size(), 79u);
}

TEST(ProgressFormatTest, LineWithoutATotalShowsBytesAndRateOnly) {
  const std::string line = FormatProgressLine("get x", 5 << 20, 0, absl::Seconds(1), 79);
  EXPECT_THAT(line, AllOf(HasSubstr("5 MiB"), HasSubstr("5.24 MB/s"), Not(HasSubstr("[")),
                          Not(HasSubstr("ETA"))));
}

TEST(ProgressFormatTest, LineBeforeAnyTimeHasNoRateAndUnknownEta) {
  const std::string line = FormatProgressLine("cp a b", 0, 100, absl::ZeroDuration(), 79);
  EXPECT_THAT(line, AllOf(HasSubstr("[....................]"), HasSubstr("0 B/s"),
                          HasSubstr("ETA --:--")));
}

TEST(ProgressFormatTest, LongLabelsShrinkBeforeTheNumbers) {
  const std::string label(200, 'n');
  const std::string line = FormatProgressLine(label, 1, 2, absl::Seconds(1), 79);
  EXPECT_EQ(line.size(), 79u);
  EXPECT_THAT(line, AllOf(HasSubstr("...  ["), HasSubstr("ETA")));
  // Too narrow for any label: the numbers, cut at the width.
  EXPECT_LE(FormatProgressLine(label, 1, 2, absl::Seconds(1), 20).size(), 20u);
}

TEST(ProgressBarTest, DrawsNothingForShortCopiesOrWithoutATerminal) {
  const absl::Time start = absl::UnixEpoch();
  std::ostringstream out;
  {
    ProgressBar bar(&out, "put w", start);
    bar.Update(1, 2, start + ProgressBar::kProgressDelay / 2);
  }
  EXPECT_EQ(out.str(), "");
  ProgressBar off(nullptr, "put w", start);
  EXPECT_FALSE(off.enabled());
  off.Update(1, 2, start + absl::Seconds(10));  // No terminal: nothing to write to.
}

TEST(ProgressBarTest, RedrawsAtMostTenTimesASecondAndClearsItsLine) {
  const absl::Time start = absl::UnixEpoch();
  std::ostringstream out;
  ProgressBar bar(&out, "put w", start);
  absl::Time now = start + ProgressBar::kProgressDelay;
  for (int i = 0; i < 100; ++i) {  // One second of updates every 10 ms.
    bar.Update(static_cast<std::uint64_t>(i), 100, now);
    now += absl::Milliseconds(10);
  }
  const std::string drawn = out.str();
  int redraws = 0;
  for (std::size_t at = drawn.find('\r'); at != std::string::npos;
       at = drawn.find('\r', at + 1)) {
    ++redraws;
  }
  EXPECT_EQ(redraws, 10);
  EXPECT_THAT(drawn, HasSubstr("ETA"));
  bar.Clear();
  EXPECT_THAT(out.str(), testing::EndsWith("\r\033[K"));
  const std::size_t length = out.str().size();
  bar.Clear();  // Once is enough.
  EXPECT_EQ(out.str().size(), length);
}

TEST(TransferReportTest, JsonHasTheDocumentedFields) {
  TransferReport report;
  report.source = "./w.bin";
  report.destination = "model/w";
  report.bytes = 3'000'000'000;
  report.elapsed = absl::Milliseconds(1500);
  report.path = "direct";
  report.retries = 2;
  report.file_io = "direct";
  const Json json = TransferReportJson(report);
  EXPECT_EQ(json.at("bytes"), 3'000'000'000u);
  EXPECT_DOUBLE_EQ(json.at("seconds").get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(json.at("gb_per_s").get<double>(), 2.0);
  EXPECT_EQ(json.at("path"), "direct");
  EXPECT_EQ(json.at("retries"), 2);
  EXPECT_EQ(json.at("source"), "./w.bin");
  EXPECT_EQ(json.at("destination"), "model/w");
  EXPECT_EQ(json.at("file_io"), "direct");

  Json merged = WithTransferReport(Json{{"name", "model/w"}}, report);
  EXPECT_EQ(merged.at("name"), "model/w");
  EXPECT_EQ(merged.at("gb_per_s"), json.at("gb_per_s"));
}

TEST(TransferReportTest, TextSaysHowMuchHowFastAndHow) {
  TransferReport report;
  report.bytes = 5 << 20;
  report.elapsed = absl::Seconds(2);
  EXPECT_EQ(FormatTransferReport(report), "5 MiB in 2.00 s, 2.62 MB/s");
  report.path = "staged";
  report.retries = 1;
  EXPECT_EQ(FormatTransferReport(report), "5 MiB in 2.00 s, 2.62 MB/s (staged, 1 retry)");
}

}  // namespace
}  // namespace memd::memctl
