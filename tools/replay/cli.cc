#include "tools/replay/cli.h"

#include <bit>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/version.h"

namespace memd::replay {
namespace {

constexpr char kDescription[] =
    "memd-replay: replay an allocation trace against a pool policy.";

constexpr char kFooter[] = R"(Replays an allocation trace (op,id,bytes CSV; see tests/data/README.md)
against one pool over a simulated device that holds no memory, and prints one
JSON object on stdout. Run it once per policy to compare: pow2 is a plain
power-of-two bucket pool, exact reserves every request and never reuses.

Examples:
  memd-replay --trace tests/data/training.csv
  memd-replay --trace tests/data/inference.csv --policy pow2 --capacity 64GiB
  memd-replay --trace tests/data/stress.csv --occupancy 0.8 | jq .failed_with_room

Exit status: 0 replayed (failed allocations included); 1 the trace is
malformed ("memd-replay: TRACE: line N: reason" on stderr) or unreadable;
2 the command line was wrong.)";

std::optional<double> ParseFraction(const std::string& text) {
  double value = 0;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value)) return std::nullopt;
  return value;
}

// Options whose text is converted and checked after the parse, with
// their defaults.
struct OptionTexts {
  std::string policy = "memd";
  std::string capacity;
  std::string occupancy;
  std::string alignment = "4096";
  std::string warmup = "0.1";
};

void Declare(CLI::App& app, Invocation& invocation, OptionTexts& texts) {
  app.set_version_flag("--version", std::string("memd-replay ") + kVersion);
  app.footer(kFooter);
  app.add_option("--trace", invocation.trace, "Trace file to replay")
      ->required()
      ->type_name("FILE");
  app.add_option("--policy", texts.policy, "Pool to replay against: memd, pow2 or exact")
      ->type_name("POLICY")
      ->capture_default_str();
  CLI::Option* capacity_option =
      app.add_option("--capacity", texts.capacity,
                     "Size of the simulated device, like 80GiB (default: unlimited)")
          ->type_name("BYTES");
  app.add_option("--occupancy", texts.occupancy,
                 "Size the device so the trace's peak live bytes fill this "
                 "fraction of it (0 < F <= 1)")
      ->type_name("FRACTION")
      ->excludes(capacity_option);
  app.add_option("--alignment", texts.alignment,
                 "Segment alignment of the simulated device, a power of two")
      ->type_name("BYTES")
      ->capture_default_str();
  app.add_option("--stats-every", invocation.stats_every,
                 "Sample the pool's stats (max_fragmentation) after every Nth "
                 "event; more than 1 speeds up huge traces")
      ->check(CLI::Range(std::uint64_t{1}, ~std::uint64_t{0} >> 1).description(""))
      ->type_name("N")
      ->capture_default_str();
  app.add_option("--warmup", texts.warmup,
                 "Fraction of allocation events left out of hit_rate_after_warmup")
      ->type_name("FRACTION")
      ->capture_default_str();
}

// Each returns the problem with its option's text, or "" when it is good.
std::string ConvertPolicy(const std::string& text, Invocation& invocation) {
  absl::StatusOr<Policy> parsed = ParsePolicy(text);
  if (!parsed.ok()) return absl::StrCat("--policy: ", parsed.status().message());
  invocation.policy = *parsed;
  return "";
}

std::string ConvertCapacity(const std::string& text, Invocation& invocation) {
  if (text.empty()) return "";
  absl::StatusOr<std::uint64_t> bytes = ParseBytes(text);
  if (!bytes.ok()) return absl::StrCat("--capacity: ", bytes.status().message());
  if (*bytes == 0) return "--capacity: must be more than 0 bytes";
  invocation.capacity_bytes = *bytes;
  return "";
}

std::string ConvertOccupancy(const std::string& text, Invocation& invocation) {
  if (text.empty()) return "";
  std::optional<double> value = ParseFraction(text);
  if (!value.has_value() || *value <= 0 || *value > 1) {
    return absl::StrCat("--occupancy: '", text, "' is not a fraction with 0 < F <= 1");
  }
  invocation.occupancy = *value;
  return "";
}

std::string ConvertAlignment(const std::string& text, Invocation& invocation) {
  absl::StatusOr<std::uint64_t> bytes = ParseBytes(text);
  if (!bytes.ok()) return absl::StrCat("--alignment: ", bytes.status().message());
  if (!std::has_single_bit(*bytes)) {
    return absl::StrCat("--alignment: ", *bytes, " is not a power of two");
  }
  invocation.alignment = *bytes;
  return "";
}

std::string ConvertWarmup(const std::string& text, Invocation& invocation) {
  std::optional<double> value = ParseFraction(text);
  if (!value.has_value() || *value < 0 || *value > 1) {
    return absl::StrCat("--warmup: '", text, "' is not a fraction from 0 to 1");
  }
  invocation.warmup_fraction = *value;
  return "";
}

// The first problem with the option texts, in the order of the options.
std::string Convert(const OptionTexts& texts, Invocation& invocation) {
  const std::pair<std::string (*)(const std::string&, Invocation&),
                  const std::string*>
      conversions[] = {
          {ConvertPolicy, &texts.policy},       {ConvertCapacity, &texts.capacity},
          {ConvertOccupancy, &texts.occupancy}, {ConvertAlignment, &texts.alignment},
          {ConvertWarmup, &texts.warmup},
      };
  for (const auto& [convert, text] : conversions) {
    if (std::string problem = convert(*text, invocation); !problem.empty()) {
      return problem;
    }
  }
  return "";
}

}  // namespace

std::optional<int> ParseCommandLine(int argc, const char* const* argv,
                                    Invocation& invocation, std::ostream& out,
                                    std::ostream& err) {
  CLI::App app(kDescription, "memd-replay");
  OptionTexts texts;
  Declare(app, invocation, texts);

  std::string problem;
  try {
    app.parse(argc, argv);
    problem = Convert(texts, invocation);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);
    problem = e.what();
  }
  if (problem.empty()) return std::nullopt;
  err << "memd-replay: " << problem << "\n"
      << "Run 'memd-replay --help' for usage.\n";
  return kExitUsage;
}

std::unique_ptr<CLI::App> MakeCommandLineApp() {
  // The App, and what its options fill (they hold references to it).
  struct BoundApp : CLI::App {
    BoundApp() : CLI::App(kDescription, "memd-replay") { Declare(*this, invocation, texts); }
    Invocation invocation;
    OptionTexts texts;
  };
  return std::make_unique<BoundApp>();
}

}  // namespace memd::replay
