// The report documents libmemd builds (client/src/report_json.h) beyond
// those memctl's format_test walks (tests/tools/format_test.cc): a copy's
// progress, a trim, and the dump the C API hands out.

#include "client/src/report_json.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/public_fields.h"
#include "tests/support/struct_fields.h"

namespace memd::internal {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> KeysOf(const Json& json) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : json.items()) keys.push_back(key);
  return keys;
}

// The names memd.h promises for memd_transfer_progress_json, in that order,
// and every field of TransferProgress shows (changing it changes the JSON).
TEST(ReportJsonTest, TransferProgressShowsEveryFieldUnderItsPromisedName) {
  TransferProgress progress;
  int next = 0;
  test::FillDistinct(progress, next);
  const Json shown = TransferProgressJson(progress);
  EXPECT_THAT(KeysOf(shown),
              ElementsAre("id", "state", "bytes_done", "bytes_total", "direction", "path",
                          "device", "retries", "error_code", "error_message", "elapsed_ns"));
  test::ForEachPerturbed(progress, [&](std::size_t index, const TransferProgress& changed,
                                       const void*) {
    EXPECT_NE(TransferProgressJson(changed), shown)
        << "field #" << index << " of TransferProgress does not show";
  });
}

TEST(ReportJsonTest, TransferProgressNumbersAndStates) {
  TransferProgress progress;
  progress.id = 7;
  progress.state = TransferState::kCancelled;
  progress.bytes_done = 1 << 20;
  progress.bytes_total = 4 << 20;
  progress.direction = "h2d";
  progress.path = "staged";
  progress.device = 1;
  progress.retries = 2;
  progress.status = absl::CancelledError("transfer 7 was cancelled");
  progress.elapsed = absl::Milliseconds(1500);
  EXPECT_EQ(DumpJson(TransferProgressJson(progress)),
            R"({"id":7,"state":"cancelled","bytes_done":1048576,"bytes_total":4194304,)"
            R"("direction":"h2d","path":"staged","device":1,"retries":2,"error_code":1,)"
            R"("error_message":"transfer 7 was cancelled","elapsed_ns":1500000000})");

  progress.status = absl::OkStatus();
  std::set<std::string> names;
  for (TransferState state : {TransferState::kQueued, TransferState::kRunning,
                              TransferState::kDone, TransferState::kFailed,
                              TransferState::kCancelled}) {
    progress.state = state;
    const Json json = TransferProgressJson(progress);
    EXPECT_EQ(json["error_code"], 0);
    EXPECT_EQ(json["error_message"], "");
    names.insert(json["state"].get<std::string>());
  }
  EXPECT_EQ(names, (std::set<std::string>{"queued", "running", "done", "failed", "cancelled"}));
}

TEST(ReportJsonTest, TrimmedPoolIsLocationReleasedBytesAndWhatTheDriverFreed) {
  // A pool whose driver cannot say: null, not 0 ("freed nothing").
  EXPECT_EQ(DumpJson(TrimmedPoolJson(
                {.location = "pinned", .released_bytes = 2 << 20, .driver_freed_bytes = {}})),
            R"({"location":"pinned","released_bytes":2097152,"driver_freed_bytes":null})");
  EXPECT_EQ(DumpJson(TrimmedPoolJson(
                {.location = "device:0", .released_bytes = 4 << 20, .driver_freed_bytes = 0})),
            R"({"location":"device:0","released_bytes":4194304,"driver_freed_bytes":0})");
}

// The document memd.h promises for memd_leaks_json and memctl leaks --json.
TEST(ReportJsonTest, LeakReportIsLeaksThenOmittedUnderThePromisedNames) {
  LeakReport report;
  report.leaks.push_back({1000, "never_opened", "weights", 4096, absl::Seconds(7200), 42,
                          "4 KiB, sealed, never opened in 2 hours since it was created, pid 42"});
  report.omitted = 3;
  EXPECT_EQ(DumpJson(LeakReportJson(report)),
            R"({"leaks":[{"uid":1000,"kind":"never_opened","subject":"weights","bytes":4096,)"
            R"("age_seconds":7200.0,"pid":42,"evidence":"4 KiB, sealed, never opened in 2 )"
            R"(hours since it was created, pid 42"}],"omitted":3})");
  EXPECT_EQ(DumpJson(LeakReportJson({})), R"({"leaks":[],"omitted":0})");
}

// A process's command line may hold any bytes: the dump stays valid UTF-8
// JSON, with U+FFFD where a byte was not UTF-8, instead of throwing.
TEST(ReportJsonTest, BytesThatAreNotUtf8BecomeReplacementCharacters) {
  SessionInfo session;
  session.command = std::string("python3 caf\xe9 \xff\xfe") + " \xc3\xa9";
  const std::string text = DumpJson(SessionJson(session));
  EXPECT_THAT(text, ::testing::HasSubstr("\"command\":\"python3 caf\xef\xbf\xbd "
                                         "\xef\xbf\xbd\xef\xbf\xbd \xc3\xa9\""));
  EXPECT_EQ(Json::parse(text)["command"],
            "python3 caf\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd \xc3\xa9");
}

}  // namespace
}  // namespace memd::internal
