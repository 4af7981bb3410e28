// memd-replay and memd-tracegen: the real programs on the shipped traces
// (what the lead's measurements and a script would see), plus the baseline
// pools and the simulated backend on their own.

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/cli_docs.h"
#include "tests/support/files.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"
#include "tools/clidoc/pages.h"
#include "tools/replay/exact_pool.h"
#include "tools/replay/pow2_pool.h"
#include "tools/replay/simulated_backend.h"

namespace memd {
namespace {

using ::memd::test::BinDir;
using ::memd::test::Describe;
using ::memd::test::ProgramResult;
using ::memd::test::ReadWholeFile;
using ::memd::test::RunProgram;
using ::memd::test::TempDir;
using ::memd::test::WriteWholeFile;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using Json = nlohmann::json;

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kMiB = 1 << 20;
constexpr pool::Domain kDomain{1000, 1000, 0600};

const char* const kRequiredFields[] = {
    "peak_reserved_bytes", "peak_live_bytes", "overhead",        "hit_rate",
    "failed_allocations",  "max_fragmentation", "mean_alloc_ns", "hit_rate_after_warmup",
    "failed_with_room"};
const char* const kPolicies[] = {"memd", "pow2", "exact"};

std::string Replay() { return BinDir() + "/memd-replay"; }
std::string Tracegen() { return BinDir() + "/memd-tracegen"; }
std::string DataFile(const std::string& name) {
  return absl::StrCat(MEMD_SOURCE_DIR, "/tests/data/", name);
}

// Runs memd-replay, expects success, and returns its JSON.
Json ReplayOk(const std::vector<std::string>& args) {
  ProgramResult result = RunProgram(Replay(), args);
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  EXPECT_THAT(result.err, IsEmpty());
  // One object and nothing else: parse() rejects trailing text.
  Json json = Json::parse(result.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(json.is_object()) << Describe(result);
  return json;
}

class ShippedTraceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ShippedTraceTest, EveryPolicyReplaysItWithSaneNumbers) {
  const std::string trace = DataFile(GetParam() + ".csv");
  std::vector<Json> reports;
  for (const char* policy : kPolicies) {
    SCOPED_TRACE(policy);
    Json report = ReplayOk({"--trace", trace, "--policy", policy});
    if (!report.is_object()) return;
    for (const char* field : kRequiredFields) {
      ASSERT_TRUE(report.contains(field)) << field << " missing from " << report.dump();
    }
    EXPECT_EQ(report["policy"], policy);
    EXPECT_EQ(report["trace"], trace);
    EXPECT_EQ(report["events"].get<std::uint64_t>(),
              report["allocations"].get<std::uint64_t>() + report["frees"].get<std::uint64_t>());
    EXPECT_TRUE(report["capacity_bytes"].is_null());  // Unlimited.
    EXPECT_EQ(report["alignment_bytes"], kPage);
    const auto peak_live = report["peak_live_bytes"].get<std::uint64_t>();
    const auto peak_reserved = report["peak_reserved_bytes"].get<std::uint64_t>();
    EXPECT_GT(peak_live, 0u);
    EXPECT_GE(peak_reserved, peak_live);
    EXPECT_DOUBLE_EQ(report["overhead"].get<double>(),
                     static_cast<double>(peak_reserved) / static_cast<double>(peak_live));
    EXPECT_GE(report["overhead"].get<double>(), 1.0);
    for (const char* rate : {"hit_rate", "hit_rate_after_warmup", "max_fragmentation"}) {
      EXPECT_GE(report[rate].get<double>(), 0.0) << rate;
      EXPECT_LE(report[rate].get<double>(), 1.0) << rate;
    }
    EXPECT_EQ(report["failed_allocations"], 0);
    EXPECT_EQ(report["failed_with_room"], 0);
    EXPECT_GT(report["mean_alloc_ns"].get<double>(), 0.0);
    EXPECT_GT(report["live_allocations_at_peak"].get<std::uint64_t>(), 0u);
    reports.push_back(report);
  }
  ASSERT_EQ(reports.size(), 3u);
  const Json& memd = reports[0];
  const Json& pow2 = reports[1];
  const Json& exact = reports[2];
  // What the trace asks for does not depend on who serves it.
  EXPECT_EQ(memd["peak_live_bytes"], pow2["peak_live_bytes"]);
  EXPECT_EQ(memd["peak_live_bytes"], exact["peak_live_bytes"]);
  EXPECT_EQ(exact["hit_rate"].get<double>(), 0.0);
  EXPECT_EQ(exact["hit_rate_after_warmup"].get<double>(), 0.0);
  // Only alignment separates exact from the live bytes.
  EXPECT_LT(exact["overhead"].get<double>(), 1.01);
  EXPECT_EQ(exact["max_fragmentation"].get<double>(), 0.0);
  // Power-of-two buckets reuse well once warm.
  EXPECT_GT(pow2["hit_rate_after_warmup"].get<double>(), 0.9);
  // The engine holds less than power-of-two buckets for the same trace
  // (deterministic: the replay of a trace has no timing in these numbers).
  EXPECT_LT(memd["overhead"].get<double>(), pow2["overhead"].get<double>());
}

TEST_P(ShippedTraceTest, TheEngineFailsNothingThatFitsAtEightyPercentOccupancy) {
  Json report = ReplayOk({"--trace", DataFile(GetParam() + ".csv"), "--policy",
                          "memd", "--occupancy", "0.8", "--stats-every", "1000"});
  if (!report.is_object()) return;
  EXPECT_EQ(report["failed_with_room"], 0);
}

INSTANTIATE_TEST_SUITE_P(Traces, ShippedTraceTest,
                         ::testing::Values("training", "inference", "stress"),
                         [](const auto& info) { return info.param; });

TEST(ReplayTest, PrintsTheFieldsInTheDocumentedOrder) {
  Json report = ReplayOk({"--trace", DataFile("training.csv"), "--policy", "exact"});
  std::vector<std::string> keys;
  for (auto it = report.begin(); it != report.end(); ++it) keys.push_back(it.key());
  // nlohmann::json sorts keys when it parses; compare against the raw text.
  ProgramResult result =
      RunProgram(Replay(), {"--trace", DataFile("training.csv"), "--policy", "exact"});
  std::size_t position = 0;
  for (const char* field :
       {"policy", "trace", "events", "allocations", "frees", "capacity_bytes",
        "alignment_bytes", "warmup_fraction", "peak_reserved_bytes", "peak_live_bytes",
        "live_allocations_at_peak", "overhead", "hit_rate", "hit_rate_after_warmup",
        "failed_allocations", "failed_with_room", "skipped_frees", "max_fragmentation",
        "stats_every", "mean_alloc_ns", "peak_occupancy"}) {
    const std::size_t found = result.out.find(absl::StrCat("\"", field, "\":"));
    ASSERT_NE(found, std::string::npos) << field;
    EXPECT_GT(found, position) << field << " out of order";
    position = found;
  }
  EXPECT_EQ(keys.size(), 21u);
}

// A hand-made trace whose numbers can be worked out: 4 KiB pages, pow2.
TEST(ReplayTest, DefinitionsOfTheFieldsOnAKnownTrace) {
  TempDir dir;
  const std::string trace = dir.Join("known.csv");
  WriteWholeFile(trace,
                 "op,id,bytes\n"
                 "a,1,5000\n"   // miss: an 8 KiB block
                 "f,1,0\n"
                 "a,2,6000\n"   // hit: the same 8 KiB block
                 "a,3,100\n"    // miss: a 4 KiB block
                 "f,3,0\n"
                 "a,4,200\n"    // hit
                 "f,2,0\n"
                 "f,4,0\n");
  Json report = ReplayOk({"--trace", trace, "--policy", "pow2", "--warmup", "0.5"});
  EXPECT_EQ(report["events"], 8);
  EXPECT_EQ(report["allocations"], 4);
  EXPECT_EQ(report["frees"], 4);
  EXPECT_EQ(report["peak_live_bytes"], 6200);
  EXPECT_EQ(report["live_allocations_at_peak"], 2);
  EXPECT_EQ(report["peak_reserved_bytes"], 12288);
  EXPECT_DOUBLE_EQ(report["overhead"].get<double>(), 12288.0 / 6200.0);
  EXPECT_DOUBLE_EQ(report["hit_rate"].get<double>(), 0.5);
  // After the first floor(0.5 * 4) = 2 allocation events: a miss and a hit.
  EXPECT_DOUBLE_EQ(report["hit_rate_after_warmup"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(report["warmup_fraction"].get<double>(), 0.5);
  // Free memory is at most one cached block until the end, when the 8 KiB
  // and the 4 KiB blocks are both cached: the largest is 2/3 of it.
  EXPECT_DOUBLE_EQ(report["max_fragmentation"].get<double>(), 1.0 - 8192.0 / 12288.0);
  EXPECT_EQ(report["stats_every"], 1);

  // Sampled after events 3 and 6 only, it misses the fragmented end.
  Json sampled = ReplayOk({"--trace", trace, "--policy", "pow2", "--stats-every", "3"});
  EXPECT_EQ(sampled["stats_every"], 3);
  EXPECT_EQ(sampled["max_fragmentation"].get<double>(), 0.0);
  EXPECT_EQ(sampled["peak_reserved_bytes"], report["peak_reserved_bytes"]);
}

TEST(ReplayTest, FailedWithRoomCountsOnlyFailuresTheFreeSpaceCouldHold) {
  TempDir dir;
  const std::string trace = dir.Join("full.csv");
  WriteWholeFile(trace,
                 "op,id,bytes\n"
                 "a,1,5000\n"  // an 8 KiB block: 8 KiB of 16 KiB reserved
                 "a,2,5000\n"  // another: the device is full
                 "a,3,100\n"   // refused, though 16384 - 10000 bytes are free
                 "f,3,0\n"     // skipped: 3 was never live
                 "f,1,0\n"
                 "a,4,12000\n"  // refused: a 16 KiB block; 16384 - 5000 < 12000
                 "f,2,0\n");
  Json report = ReplayOk({"--trace", trace, "--policy", "pow2", "--capacity", "16KiB"});
  EXPECT_EQ(report["capacity_bytes"], 16384);
  EXPECT_EQ(report["failed_allocations"], 2);
  EXPECT_EQ(report["failed_with_room"], 1);
  EXPECT_EQ(report["skipped_frees"], 1);
  EXPECT_EQ(report["peak_live_bytes"], 10000);
  EXPECT_DOUBLE_EQ(report["peak_occupancy"].get<double>(), 10000.0 / 16384.0);
}

TEST(ReplayTest, ATooSmallDeviceFailsAllocationsButStillReports) {
  for (const char* policy : kPolicies) {
    SCOPED_TRACE(policy);
    Json report = ReplayOk(
        {"--trace", DataFile("training.csv"), "--policy", policy, "--capacity", "1GiB"});
    if (!report.is_object()) continue;
    EXPECT_GT(report["failed_allocations"].get<std::uint64_t>(), 0u);
    EXPECT_LE(report["peak_reserved_bytes"].get<std::uint64_t>(), std::uint64_t{1} << 30);
    EXPECT_EQ(report["skipped_frees"], report["failed_allocations"]);
  }
}

TEST(ReplayTest, OccupancySizesTheDeviceFromThePeakLiveBytes) {
  const std::string trace = DataFile("stress.csv");
  Json unlimited = ReplayOk({"--trace", trace, "--policy", "exact"});
  Json report = ReplayOk({"--trace", trace, "--policy", "exact", "--occupancy", "0.8"});
  const auto peak_live = unlimited["peak_live_bytes"].get<std::uint64_t>();
  const auto capacity = report["capacity_bytes"].get<std::uint64_t>();
  EXPECT_EQ(capacity % kPage, 0u);
  EXPECT_GE(capacity * 0.8, static_cast<double>(peak_live));
  EXPECT_LT(capacity * 0.8, static_cast<double>(peak_live + kPage));
  // exact needs only the live bytes rounded to pages: nothing fails at 80%.
  EXPECT_EQ(report["failed_allocations"], 0);
  EXPECT_NEAR(report["peak_occupancy"].get<double>(), 0.8, 1e-6);
}

TEST(ReplayTest, AlignmentIsConfigurable) {
  TempDir dir;
  const std::string trace = dir.Join("one.csv");
  WriteWholeFile(trace, "op,id,bytes\na,1,1\nf,1,0\n");
  Json report = ReplayOk({"--trace", trace, "--policy", "exact", "--alignment", "2MiB"});
  EXPECT_EQ(report["alignment_bytes"], 2 * kMiB);
  EXPECT_EQ(report["peak_reserved_bytes"], 2 * kMiB);
}

TEST(ReplayTest, AnEmptyTraceReportsNullRatios) {
  TempDir dir;
  const std::string trace = dir.Join("empty.csv");
  WriteWholeFile(trace, "op,id,bytes\n");
  Json report = ReplayOk({"--trace", trace});
  EXPECT_EQ(report["events"], 0);
  EXPECT_TRUE(report["overhead"].is_null());
  EXPECT_TRUE(report["hit_rate"].is_null());
  EXPECT_TRUE(report["mean_alloc_ns"].is_null());
}

struct BadTrace {
  std::string name;
  std::string text;
  std::string where;  // Expected in stderr.
};

void PrintTo(const BadTrace& bad, std::ostream* os) { *os << bad.name; }

class BadTraceTest : public ::testing::TestWithParam<BadTrace> {};

TEST_P(BadTraceTest, ExitsOneWithTheLineNumberAndWritesNoJson) {
  TempDir dir;
  const std::string trace = dir.Join("bad.csv");
  WriteWholeFile(trace, GetParam().text);
  for (const char* policy : kPolicies) {
    ProgramResult result = RunProgram(Replay(), {"--trace", trace, "--policy", policy});
    EXPECT_EQ(result.exit_code, kExitFailed) << Describe(result);
    EXPECT_THAT(result.out, IsEmpty());
    EXPECT_THAT(result.err, StartsWith(absl::StrCat("memd-replay: ", trace, ": ")));
    EXPECT_THAT(result.err, HasSubstr(GetParam().where));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Reasons, BadTraceTest,
    ::testing::Values(
        BadTrace{"NoHeader", "a,1,10\n", "line 1: expected the header"},
        BadTrace{"Empty", "", "line 1: missing the header"},
        BadTrace{"UnknownOp", "op,id,bytes\na,1,10\nz,1,0\n", "line 3: unknown op 'z'"},
        BadTrace{"FieldCount", "op,id,bytes\na,1\n", "line 2: expected 3"},
        BadTrace{"NotANumber", "op,id,bytes\na,1,ten\n", "line 2: bytes 'ten'"},
        BadTrace{"DoubleAllocation", "op,id,bytes\na,1,10\na,1,10\n",
                 "line 3: allocation of id 1, which is live"},
        BadTrace{"UnknownFree", "op,id,bytes\na,1,10\nf,1,0\nf,1,0\n",
                 "line 4: free of id 1, which is not live"},
        // A bad line late in a trace: nothing is replayed before it is found.
        BadTrace{"LateEmptyLine", "op,id,bytes\na,1,10\nf,1,0\na,2,10\n\nf,2,0\n",
                 "line 5: empty line"}),
    [](const ::testing::TestParamInfo<BadTrace>& info) { return info.param.name; });

TEST(ReplayTest, AMissingTraceIsAnIoError) {
  TempDir dir;
  ProgramResult result = RunProgram(Replay(), {"--trace", dir.Join("nope.csv")});
  EXPECT_EQ(result.exit_code, kExitFailed) << Describe(result);
  EXPECT_THAT(result.err, StartsWith("memd-replay: cannot open trace "));
  EXPECT_THAT(result.out, IsEmpty());
}

TEST(ReplayTest, UsageErrorsExitTwo) {
  const std::string trace = DataFile("training.csv");
  const std::vector<std::vector<std::string>> usages = {
      {},
      {"--policy", "memd"},
      {"--trace", trace, "--policy", "buddy"},
      {"--trace", trace, "--capacity", "lots"},
      {"--trace", trace, "--capacity", "0"},
      {"--trace", trace, "--capacity", "1GiB", "--occupancy", "0.8"},
      {"--trace", trace, "--occupancy", "1.5"},
      {"--trace", trace, "--alignment", "3000"},
      {"--trace", trace, "--warmup", "-0.1"},
      {"--trace", trace, "--warmup", "nan"},
      {"--trace", trace, "--stats-every", "0"},
      {"--trace", trace, "--frobnicate"},
      {"--trace", trace, "extra"},
  };
  for (const auto& args : usages) {
    ProgramResult result = RunProgram(Replay(), args);
    EXPECT_EQ(result.exit_code, kExitUsage) << absl::StrJoin(args, " ") << "\n"
                                            << Describe(result);
    EXPECT_THAT(result.err, StartsWith("memd-replay: "));
    EXPECT_THAT(result.out, IsEmpty());
  }
}

TEST(ReplayTest, HelpGoesToStdout) {
  ProgramResult result = RunProgram(Replay(), {"--help"});
  EXPECT_EQ(result.exit_code, 0) << Describe(result);
  EXPECT_THAT(result.out, HasSubstr("--policy"));
  EXPECT_THAT(result.out, HasSubstr("Exit status"));
}

// The commands recorded in tests/data/README.md, as argument lists with the
// file each writes.
struct RecordedCommand {
  std::vector<std::string> args;
  std::string output;
};

std::vector<RecordedCommand> RecordedCommands() {
  std::vector<RecordedCommand> commands;
  std::istringstream readme(ReadWholeFile(DataFile("README.md")));
  for (std::string line; std::getline(readme, line);) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "build/bin/memd-tracegen ")) continue;
    std::vector<std::string> parts = absl::StrSplit(rest, " > ");
    if (parts.size() != 2) continue;
    RecordedCommand command;
    command.args = absl::StrSplit(parts[0], ' ', absl::SkipEmpty());
    command.output = parts[1];
    commands.push_back(command);
  }
  return commands;
}

TEST(TracegenTest, TheShippedTracesAreTheOutputOfTheRecordedCommands) {
  std::vector<RecordedCommand> commands = RecordedCommands();
  ASSERT_EQ(commands.size(), 3u) << "tests/data/README.md lost its commands";
  for (const RecordedCommand& command : commands) {
    SCOPED_TRACE(command.output);
    ProgramResult result = RunProgram(Tracegen(), command.args);
    ASSERT_EQ(result.exit_code, 0) << Describe(result);
    const std::string shipped =
        ReadWholeFile(absl::StrCat(MEMD_SOURCE_DIR, "/", command.output));
    EXPECT_LE(shipped.size(), 3u << 20);
    // Not EXPECT_EQ: a mismatch would print megabytes.
    EXPECT_TRUE(result.out == shipped)
        << "regenerate it with the command in tests/data/README.md";
  }
}

TEST(TracegenTest, IsDeterministicForASeed) {
  for (const char* workload : {"training", "inference", "stress"}) {
    SCOPED_TRACE(workload);
    const std::vector<std::string> args = {"--workload", workload, "--seed", "42",
                                           "--events", "5000"};
    ProgramResult first = RunProgram(Tracegen(), args);
    ProgramResult second = RunProgram(Tracegen(), args);
    ASSERT_EQ(first.exit_code, 0) << Describe(first);
    EXPECT_TRUE(first.out == second.out);
    EXPECT_THAT(first.out, StartsWith("op,id,bytes\n"));
    ProgramResult other = RunProgram(
        Tracegen(), {"--workload", workload, "--seed", "43", "--events", "5000"});
    ASSERT_EQ(other.exit_code, 0) << Describe(other);
    // For training the seed picks the sliding-window layers, whose
    // attention sizes show in the first iteration.
    EXPECT_FALSE(first.out == other.out);
  }
}

TEST(TracegenTest, WritesTracesThatReplayAndEndEmpty) {
  TempDir dir;
  for (const char* workload : {"training", "inference", "stress"}) {
    SCOPED_TRACE(workload);
    ProgramResult result = RunProgram(
        Tracegen(), {"--workload", workload, "--seed", "5", "--events", "20000"});
    ASSERT_EQ(result.exit_code, 0) << Describe(result);
    const std::string trace = dir.Join(absl::StrCat(workload, ".csv"));
    WriteWholeFile(trace, result.out);
    Json report = ReplayOk({"--trace", trace, "--policy", "exact"});
    EXPECT_GE(report["events"].get<std::uint64_t>(), 20000u);
    // Everything allocated is freed by the end of the trace.
    EXPECT_EQ(report["allocations"], report["frees"]);
  }
}

TEST(TracegenTest, UsageErrorsExitTwo) {
  const std::vector<std::vector<std::string>> usages = {
      {},
      {"--workload", "training"},
      {"--workload", "mining", "--seed", "1"},
      {"--workload", "stress", "--seed", "1", "--layers", "3"},
      {"--workload", "training", "--seed", "1", "--concurrency", "3"},
      {"--workload", "stress", "--seed", "1", "--min-bytes", "1MiB", "--max-bytes", "4KiB"},
      {"--workload", "stress", "--seed", "1", "--events", "0"},
      {"--workload", "training", "--seed", "-1"},
      {"--workload", "training", "--seed", "18446744073709551616"},
      {"--workload", "training", "--seed", "1", "--sequence", "2"},
  };
  for (const auto& args : usages) {
    ProgramResult result = RunProgram(Tracegen(), args);
    EXPECT_EQ(result.exit_code, kExitUsage) << absl::StrJoin(args, " ") << "\n"
                                            << Describe(result);
    EXPECT_THAT(result.err, StartsWith("memd-tracegen: "));
    EXPECT_TRUE(result.out.empty()) << result.out.substr(0, 200);
  }
}

// The baselines and the simulated backend on their own.

TEST(SimulatedBackendTest, CountsReservationsAndStopsAtTheCapacity) {
  replay::SimulatedBackend backend({kPage, 4 * kPage});
  const Location device = replay::SimulatedBackend::location();
  auto a = backend.Reserve(device, 3 * kPage);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->size(), 3 * kPage);
  EXPECT_EQ((*a)->Export(backend::Access::kReadWrite).status().code(),
            absl::StatusCode::kInternal);
  auto b = backend.Reserve(device, 2 * kPage);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("12288 of 16384"));
  EXPECT_EQ(backend.Reserve(device, 100).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.Reserve(Location::Host(), kPage).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.reserved_bytes(), 3 * kPage);
  a->reset();
  EXPECT_EQ(backend.reserved_bytes(), 0u);
  EXPECT_EQ(backend.peak_reserved_bytes(), 3 * kPage);
  EXPECT_EQ(backend.reserve_calls(), 4u);
}

// The segment behind an allocation, which only pools may see (Pow2Pool
// allocations carry no segment ids to compare).
struct SegmentOfAllocation : pool::Pool {
  static const backend::Segment* Of(const pool::Allocation& allocation) {
    return SegmentOf(allocation).get();
  }
};

class Pow2PoolTest : public ::testing::Test {
 protected:
  replay::SimulatedBackend backend_{{kPage, 64 * kMiB}};
  const Location device_ = replay::SimulatedBackend::location();
};

TEST_F(Pow2PoolTest, RoundsUpToAPowerOfTwoAndReusesFreedBlocks) {
  replay::Pow2Pool pool(backend_, device_, 64 * kMiB);
  auto small = pool.Allocate(1, kDomain);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->bytes, kPage);
  auto odd = pool.Allocate(3 * kMiB, kDomain);
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->bytes, 4 * kMiB);
  const backend::Segment* segment = SegmentOfAllocation::Of(*odd);
  pool.Free(std::move(*odd));
  EXPECT_EQ(pool.Stats().largest_free_bytes, 4 * kMiB);
  auto again = pool.Allocate(2 * kMiB + 1, kDomain);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(SegmentOfAllocation::Of(*again), segment);
  pool::PoolStats stats = pool.Stats();
  EXPECT_EQ(stats.hit_count, 1u);
  EXPECT_EQ(stats.miss_count, 2u);
  EXPECT_EQ(stats.reserved_bytes, 4 * kMiB + kPage);
  EXPECT_EQ(stats.used_bytes, 4 * kMiB + kPage);
  EXPECT_EQ(stats.segments, 2u);
  ASSERT_EQ(stats.size_classes.size(), 2u);
  EXPECT_EQ(stats.size_classes[1].bytes, 4 * kMiB);
  EXPECT_EQ(stats.size_classes[1].allocations, 2u);
  pool.Free(std::move(*small));
  pool.Free(std::move(*again));
}

TEST_F(Pow2PoolTest, NeverServesAnotherDomainFromItsFreeList) {
  replay::Pow2Pool pool(backend_, device_, 64 * kMiB);
  auto mine = pool.Allocate(kMiB, kDomain);
  ASSERT_TRUE(mine.ok());
  const backend::Segment* segment = SegmentOfAllocation::Of(*mine);
  pool.Free(std::move(*mine));
  auto theirs = pool.Allocate(kMiB, pool::Domain{2000, 2000, 0600});
  ASSERT_TRUE(theirs.ok());
  EXPECT_NE(SegmentOfAllocation::Of(*theirs), segment);
  pool.Free(std::move(*theirs));
}

TEST_F(Pow2PoolTest, AtTheLimitGivesBackCachedBlocksThenFails) {
  replay::Pow2Pool pool(backend_, device_, 16 * kMiB);
  auto a = pool.Allocate(8 * kMiB, kDomain);
  auto b = pool.Allocate(4 * kMiB, kDomain);
  ASSERT_TRUE(a.ok() && b.ok());
  pool.Free(std::move(*a));
  // 6 MiB rounds up to 8 MiB: the cached block.
  auto c = pool.Allocate(6 * kMiB, kDomain);
  ASSERT_TRUE(c.ok()) << c.status();
  pool::PoolStats stats = pool.Stats();
  EXPECT_EQ(stats.reserved_bytes, 12 * kMiB);
  EXPECT_EQ(stats.hit_count, 1u);
  // 12 MiB live: another 8 MiB block cannot fit, and nothing is evicted.
  auto d = pool.Allocate(5 * kMiB, kDomain);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("12582912 bytes are in live"));
  pool.Free(std::move(*b));
  // 8 MiB live and 4 MiB cached: 8 MiB more fits once the cache is gone.
  auto e = pool.Allocate(8 * kMiB, kDomain);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(pool.Stats().trimmed_bytes, 4 * kMiB);
  EXPECT_EQ(backend_.reserved_bytes(), 16 * kMiB);
  pool.Free(std::move(*c));
  pool.Free(std::move(*e));
}

TEST_F(Pow2PoolTest, TrimGivesBackIdleBlocks) {
  replay::Pow2Pool pool(backend_, device_, 64 * kMiB);
  auto a = pool.Allocate(kMiB, kDomain);
  auto b = pool.Allocate(2 * kMiB, kDomain);
  ASSERT_TRUE(a.ok() && b.ok());
  pool.Free(std::move(*a));
  EXPECT_EQ(pool.Trim(absl::Hours(1)), 0u);  // Not idle that long.
  EXPECT_EQ(pool.Trim(absl::ZeroDuration()), kMiB);
  EXPECT_EQ(backend_.reserved_bytes(), 2 * kMiB);
  EXPECT_EQ(pool.Stats().trimmed_bytes, kMiB);
  pool.Free(std::move(*b));
}

TEST(ExactPoolTest, ReservesEveryRequestAndGivesItBackOnFree) {
  replay::SimulatedBackend backend({kPage, 8 * kPage});
  replay::ExactPool pool(backend, replay::SimulatedBackend::location(), 8 * kPage);
  auto a = pool.Allocate(kPage + 1, kDomain);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->bytes, 2 * kPage);
  auto b = pool.Allocate(7 * kPage, kDomain);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  pool.Free(std::move(*a));
  EXPECT_EQ(backend.reserved_bytes(), 0u);
  pool::PoolStats stats = pool.Stats();
  EXPECT_EQ(stats.hit_count, 0u);
  EXPECT_EQ(stats.miss_count, 1u);
  EXPECT_EQ(stats.peak_used_bytes, 2 * kPage);
  EXPECT_EQ(pool.Allocate(0, kDomain).status().code(), absl::StatusCode::kInvalidArgument);
}

// The trace tools' man pages and completions (tools/clidoc), written from
// the Apps they parse: every option in them, walked with CLI11's own
// accessors (tests/support/cli_docs.h).
TEST(TraceToolDocsTest, ManPagesAndCompletionsHaveEveryOptionAndRenderWithoutWarnings) {
  const clidoc::Program programs[] = {clidoc::MemdReplay(), clidoc::MemdTracegen()};
  for (const clidoc::Program& program : programs) {
    const CLI::App& app = *program.app;
    SCOPED_TRACE(app.get_name());
    const std::string page = clidoc::ManPage(app, program.page);
    EXPECT_THAT(test::ManPageProblems(app, page), IsEmpty());
    for (const std::string& section :
         {absl::StrCat(".SH NAME\n", absl::StrReplaceAll(app.get_name(), {{"-", "\\-"}}),
                       " \\- "),
          std::string(".SH OPTIONS"),
          std::string(".SH \"EXIT STATUS\""), std::string(".SH \"SEE ALSO\"")}) {
      EXPECT_THAT(page, HasSubstr(section));
    }
    EXPECT_THAT(test::BashCompletionProblems(app, clidoc::BashCompletion(app)), IsEmpty());
    EXPECT_THAT(test::ZshCompletionProblems(app, clidoc::ZshCompletion(app)), IsEmpty());
  }
  // The options are the programs' own: a flag only memd-tracegen takes.
  const clidoc::Program tracegen = clidoc::MemdTracegen();
  EXPECT_THAT(clidoc::ManPage(*tracegen.app, tracegen.page), HasSubstr("\\-\\-workload"));
}

}  // namespace
}  // namespace memd
