#include "tools/tracegen/cli.h"

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/version.h"

namespace memd::tracegen {
namespace {

constexpr char kDescription[] =
    "memd-tracegen: write a synthetic allocation trace (op,id,bytes CSV) to stdout.";

// No tensor of the training workload may be larger than this: it keeps the
// size arithmetic far from overflowing.
constexpr unsigned __int128 kMaxTensorBytes = std::uint64_t{1} << 48;

constexpr char kFooter[] = R"(Examples:
  memd-tracegen --workload training --seed 1 > training.csv
  memd-tracegen --workload inference --seed 7 --concurrency 64 --events 500000 > big.csv
  memd-tracegen --workload stress --seed 3 --live 500 --max-bytes 1GiB > wide.csv

The trace starts new work until --events events are written, then frees
everything still live. Output depends only on the options: the shipped traces
in tests/data are regenerated from the commands in tests/data/README.md.

Exit status: 0 written; 1 stdout could not be written; 2 bad command line.)";

// Options whose text is converted and checked after the parse, with their
// defaults.
struct OptionTexts {
  std::string workload;
  std::string seed;
  std::uint64_t events = 100000;
  std::string min_bytes = "4KiB";
  std::string max_bytes = "256MiB";
};

// Digits only, at most 2^64 - 1.
std::optional<std::uint64_t> ParseSeed(const std::string& text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (value > (~std::uint64_t{0} - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

// Checks what CLI11 cannot: ranges that depend on each other, and that
// knobs were given only to their workload. Returns the problem or "".
std::string Check(const CLI::App& app, Invocation& invocation, std::uint64_t seed,
                  std::uint64_t events, const std::string& min_bytes,
                  const std::string& max_bytes) {
  struct Knob {
    const char* name;
    Workload workload;
  };
  const Knob knobs[] = {
      {"--layers", Workload::kTraining},      {"--batch", Workload::kTraining},
      {"--sequence", Workload::kTraining},    {"--hidden", Workload::kTraining},
      {"--heads", Workload::kTraining},       {"--vocabulary", Workload::kTraining},
      {"--eval-every", Workload::kTraining},  {"--epoch-iterations", Workload::kTraining},
      {"--concurrency", Workload::kInference}, {"--live", Workload::kStress},
      {"--min-bytes", Workload::kStress},     {"--max-bytes", Workload::kStress},
  };
  for (const Knob& knob : knobs) {
    if (app.count(knob.name) > 0 && knob.workload != invocation.workload) {
      return absl::StrCat(knob.name, " does not apply to this --workload");
    }
  }
  invocation.training.seed = invocation.inference.seed = invocation.stress.seed = seed;
  invocation.training.events = invocation.inference.events = invocation.stress.events =
      events;

  const TrainingOptions& t = invocation.training;
  if (t.sequence < 4) return "--sequence must be at least 4";
  const unsigned __int128 tokens = static_cast<unsigned __int128>(2 * t.batch) * t.sequence;
  if (tokens * t.hidden * 2 * 4 > kMaxTensorBytes ||
      tokens * t.heads * t.sequence * 2 > kMaxTensorBytes ||
      tokens * t.vocabulary * 2 > kMaxTensorBytes ||
      static_cast<unsigned __int128>(t.hidden) * t.hidden * 16 > kMaxTensorBytes) {
    return "the training shapes make tensors larger than 256 TiB";
  }

  absl::StatusOr<std::uint64_t> low = ParseBytes(min_bytes);
  if (!low.ok()) return absl::StrCat("--min-bytes: ", low.status().message());
  absl::StatusOr<std::uint64_t> high = ParseBytes(max_bytes);
  if (!high.ok()) return absl::StrCat("--max-bytes: ", high.status().message());
  if (*low == 0 || *low > *high || *high > kMaxTensorBytes) {
    return "need 0 < --min-bytes <= --max-bytes <= 256TiB";
  }
  invocation.stress.min_bytes = *low;
  invocation.stress.max_bytes = *high;
  return "";
}

void DeclareCommandLine(CLI::App& app, Invocation& invocation, OptionTexts& texts) {
  app.set_version_flag("--version", std::string("memd-tracegen ") + kVersion);
  app.footer(kFooter);
  TrainingOptions& t = invocation.training;
  // Ranges are stated in the help text; the validator's own description
  // would clutter every line.
  const auto knob = [&app](const std::string& name, std::uint64_t& value,
                           std::uint64_t high, const std::string& help) {
    app.add_option(name, value, absl::StrCat(help, " (1 to ", high, ")"))
        ->check(CLI::Range(std::uint64_t{1}, high).description(""))
        ->type_name("N")
        ->capture_default_str();
  };

  app.add_option("--workload", texts.workload, "training, inference or stress")
      ->required()
      ->check(CLI::IsMember({"training", "inference", "stress"}).description(""))
      ->type_name("WORKLOAD");
  // A string: CLI11 would quietly wrap "-1" to 2^64 - 1.
  app.add_option("--seed", texts.seed, "Seed of the random choices, 0 to 2^64 - 1")
      ->required()
      ->type_name("N");
  knob("--events", texts.events, std::uint64_t{1} << 40, "Events after which no new work starts");
  knob("--layers", t.layers, 1024, "training: transformer layers");
  knob("--batch", t.batch, 65536, "training: sequences per batch");
  knob("--sequence", t.sequence, 1 << 20, "training: tokens per sequence");
  knob("--hidden", t.hidden, 1 << 20, "training: model width");
  knob("--heads", t.heads, 4096, "training: attention heads");
  knob("--vocabulary", t.vocabulary, 1 << 24, "training: vocabulary size");
  knob("--eval-every", t.eval_every, std::uint64_t{1} << 40,
       "training: iterations between evaluations");
  knob("--epoch-iterations", t.epoch_iterations, std::uint64_t{1} << 40,
       "training: iterations per epoch; the last has a smaller batch");
  knob("--concurrency", invocation.inference.concurrency, 1 << 20,
       "inference: mean number of requests in flight");
  knob("--live", invocation.stress.live, 1 << 24, "stress: target live allocations");
  app.add_option("--min-bytes", texts.min_bytes, "stress: smallest allocation")
      ->type_name("BYTES")->capture_default_str();
  app.add_option("--max-bytes", texts.max_bytes, "stress: largest allocation")
      ->type_name("BYTES")->capture_default_str();

}

}  // namespace

std::optional<int> ParseCommandLine(int argc, const char* const* argv, Invocation& invocation,
                                    std::ostream& out, std::ostream& err) {
  CLI::App app(kDescription, "memd-tracegen");
  OptionTexts texts;
  DeclareCommandLine(app, invocation, texts);
  const std::map<std::string, Workload> workloads = {
      {"training", Workload::kTraining},
      {"inference", Workload::kInference},
      {"stress", Workload::kStress}};
  std::string problem;
  try {
    app.parse(argc, argv);
    invocation.workload = workloads.at(texts.workload);
    std::optional<std::uint64_t> seed = ParseSeed(texts.seed);
    problem = seed.has_value()
                  ? Check(app, invocation, *seed, texts.events, texts.min_bytes, texts.max_bytes)
                  : absl::StrCat("--seed: '", texts.seed, "' is not a number from 0 to 2^64 - 1");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e, out, err);
    problem = e.what();
  }
  if (problem.empty()) return std::nullopt;
  err << "memd-tracegen: " << problem << "\n"
      << "Run 'memd-tracegen --help' for usage.\n";
  return kExitUsage;
}

std::unique_ptr<CLI::App> MakeCommandLineApp() {
  // The App, and what its options fill (they hold references to it).
  struct BoundApp : CLI::App {
    BoundApp() : CLI::App(kDescription, "memd-tracegen") {
      DeclareCommandLine(*this, invocation, texts);
    }
    Invocation invocation;
    OptionTexts texts;
  };
  return std::make_unique<BoundApp>();
}

}  // namespace memd::tracegen
