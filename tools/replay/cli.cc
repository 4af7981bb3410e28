#include "tools/replay/cli.h"

#include <bit>
#include <cmath>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/version.h"

namespace memd::replay {
namespace {

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

}  // namespace

std::optional<int> ParseCommandLine(int argc, const char* const* argv,
                                    Invocation& invocation, std::ostream& out,
                                    std::ostream& err) {
  CLI::App app("memd-replay: replay an allocation trace against a pool policy.",
               "memd-replay");
  app.set_version_flag("--version", std::string("memd-replay ") + kVersion);
  app.footer(kFooter);
  std::string policy = "memd";
  std::string capacity;
  std::string occupancy;
  std::string alignment = "4096";
  std::string warmup = "0.1";
  app.add_option("--trace", invocation.trace, "Trace file to replay")
      ->required()
      ->type_name("FILE");
  app.add_option("--policy", policy, "Pool to replay against: memd, pow2 or exact")
      ->type_name("POLICY")
      ->capture_default_str();
  CLI::Option* capacity_option =
      app.add_option("--capacity", capacity,
                     "Size of the simulated device, like 80GiB (default: unlimited)")
          ->type_name("BYTES");
  app.add_option("--occupancy", occupancy,
                 "Size the device so the trace's peak live bytes fill this "
                 "fraction of it (0 < F <= 1)")
      ->type_name("FRACTION")
      ->excludes(capacity_option);
  app.add_option("--alignment", alignment,
                 "Segment alignment of the simulated device, a power of two")
      ->type_name("BYTES")
      ->capture_default_str();
  app.add_option("--stats-every", invocation.stats_every,
                 "Sample the pool's stats (max_fragmentation) after every Nth "
                 "event; more than 1 speeds up huge traces")
      ->check(CLI::Range(std::uint64_t{1}, ~std::uint64_t{0} >> 1).description(""))
      ->type_name("N")
      ->capture_default_str();
  app.add_option("--warmup", warmup,
                 "Fraction of allocation events left out of hit_rate_after_warmup")
      ->type_name("FRACTION")
      ->capture_default_str();

  std::string problem;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);
    problem = e.what();
  }
  if (problem.empty()) {
    if (absl::StatusOr<Policy> parsed = ParsePolicy(policy); parsed.ok()) {
      invocation.policy = *parsed;
    } else {
      problem = absl::StrCat("--policy: ", parsed.status().message());
    }
  }
  if (problem.empty() && !capacity.empty()) {
    absl::StatusOr<std::uint64_t> bytes = ParseBytes(capacity);
    if (!bytes.ok()) {
      problem = absl::StrCat("--capacity: ", bytes.status().message());
    } else if (*bytes == 0) {
      problem = "--capacity: must be more than 0 bytes";
    } else {
      invocation.capacity_bytes = *bytes;
    }
  }
  if (problem.empty() && !occupancy.empty()) {
    std::optional<double> value = ParseFraction(occupancy);
    if (!value.has_value() || *value <= 0 || *value > 1) {
      problem = absl::StrCat("--occupancy: '", occupancy,
                             "' is not a fraction with 0 < F <= 1");
    } else {
      invocation.occupancy = *value;
    }
  }
  if (problem.empty()) {
    absl::StatusOr<std::uint64_t> bytes = ParseBytes(alignment);
    if (!bytes.ok()) {
      problem = absl::StrCat("--alignment: ", bytes.status().message());
    } else if (!std::has_single_bit(*bytes)) {
      problem = absl::StrCat("--alignment: ", *bytes, " is not a power of two");
    } else {
      invocation.alignment = *bytes;
    }
  }
  if (problem.empty()) {
    std::optional<double> value = ParseFraction(warmup);
    if (!value.has_value() || *value < 0 || *value > 1) {
      problem = absl::StrCat("--warmup: '", warmup, "' is not a fraction from 0 to 1");
    } else {
      invocation.warmup_fraction = *value;
    }
  }
  if (problem.empty()) return std::nullopt;
  err << "memd-replay: " << problem << "\n"
      << "Run 'memd-replay --help' for usage.\n";
  return kExitUsage;
}

}  // namespace memd::replay
