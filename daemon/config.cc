#include "daemon/config.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "daemon/broker/numa_placement.h"
#include "daemon/broker/placement.h"
#include "daemon/broker/quota.h"
#include "toml++/toml.h"

namespace memd {
namespace {

constexpr std::uint64_t kMaxRecoveryGraceSeconds = 7 * 24 * 3600;

// How an option's text becomes a value.
enum class Kind { kText, kBytes, kCount, kMode, kRatio, kQuota, kPlacement, kNuma };

struct Option {
  const char* key;  // TOML key; the flag is --key with '-' for '_'.
  Kind kind;
  const char* help;
  std::string Config::*text = nullptr;
  std::uint64_t Config::*number = nullptr;
  std::uint32_t Config::*mode = nullptr;
  double Config::*ratio = nullptr;
};

const std::vector<Option>& Options() {
  static const std::vector<Option> options = {
      {"socket_dir", Kind::kText,
       "directory of memd.sock and session.sock (default /run/memd as root, "
       "else $XDG_RUNTIME_DIR/memd, else /tmp/memd-$UID)",
       &Config::socket_dir},
      {"socket_mode", Kind::kMode,
       "permission bits of the sockets, octal (default 0660)", nullptr, nullptr,
       &Config::socket_mode},
      {"metrics_address", Kind::kText,
       "HOST:PORT of the Prometheus /metrics endpoint; port 0 picks one; "
       "empty turns it off (default 127.0.0.1:9477)",
       &Config::metrics_address},
      {"backend", Kind::kText, "the backend that serves memory (default auto)",
       &Config::backend},
      {"cuda_driver", Kind::kText,
       "the CUDA driver library to load (default: $MEMD_CUDA_DRIVER, else "
       "libcuda.so.1)",
       &Config::cuda_driver},
      {"cuda_handles", Kind::kText,
       "how device memory reaches clients (default auto: VMM "
       "fds where the device can export them, else legacy IPC handles)",
       &Config::cuda_handles},
      {"level_zero_loader", Kind::kText,
       "the Level Zero loader library to load (default: $MEMD_ZE_LOADER, else "
       "libze_loader.so.1)",
       &Config::level_zero_loader},
      {"log_level", Kind::kText,
       "how much memd logs (default info)",
       &Config::log_level},
      {"max_buffer_bytes", Kind::kBytes,
       "largest buffer, bytes or with a unit: 64GiB (default 64GiB)", nullptr,
       &Config::max_buffer_bytes},
      {"host_pool_limit_bytes", Kind::kBytes,
       "most memory the host pool reserves (default: half of RAM)", nullptr,
       &Config::host_pool_limit_bytes},
      {"pinned_pool_limit_bytes", Kind::kBytes,
       "most memory the pinned pool reserves (default: a quarter of RAM)",
       nullptr, &Config::pinned_pool_limit_bytes},
      {"device_pool_limit_bytes", Kind::kBytes,
       "most memory each device pool reserves (default: 90% of the device)",
       nullptr, &Config::device_pool_limit_bytes},
      {"numa", Kind::kNuma,
       "the NUMA node host and pinned buffers are bound to when their create "
       "asks for none; auto: a pinned buffer's GPU's node, else the creating process's "
       "(default off)",
       &Config::numa},
      {"numa_sysfs_root", Kind::kText,
       "where NUMA placement reads the machine's nodes and GPUs (default /sys; tests "
       "point it at a fake tree)",
       &Config::numa_sysfs_root},
      {"pool_small_max_bytes", Kind::kBytes,
       "requests up to this size use size classes (default 1MiB)", nullptr,
       &Config::pool_small_max_bytes},
      {"pool_small_segment_bytes", Kind::kBytes,
       "segment size for size classes (default 2MiB)", nullptr,
       &Config::pool_small_segment_bytes},
      {"pool_large_round_bytes", Kind::kBytes,
       "large segments are the request rounded up to this (default: the "
       "location's alignment)",
       nullptr, &Config::pool_large_round_bytes},
      {"pool_large_fit_slack", Kind::kRatio,
       "a large request takes a free block at most this much larger "
       "(default 0.5)",
       nullptr, nullptr, nullptr, &Config::pool_large_fit_slack},
      {"pool_idle_budget", Kind::kRatio,
       "before growing, give back idle segments beyond (1 + this) x peak use; "
       "negative keeps them (default 0.08)",
       nullptr, nullptr, nullptr, &Config::pool_idle_budget},
      {"pool_trim_idle_seconds", Kind::kCount,
       "segments idle this long go back to the system (default 60)", nullptr,
       &Config::pool_trim_idle_seconds},
      {"pool_domain_reuse", Kind::kText,
       "may idle memory serve another owner/group/mode after "
       "zeroing? (default never)",
       &Config::pool_domain_reuse},
      {"trace_file", Kind::kText,
       "record every pool allocation and free to this CSV file (default: off)",
       &Config::trace_file},
      {"durability", Kind::kText,
       "keep buffers across restarts of memd where a descriptor "
       "store keeps them (systemd's FileDescriptorStoreMax=) (default auto)",
       &Config::durability},
      {"recovery_grace_seconds", Kind::kCount,
       "after a restart, how long holders of adopted unsealed, ephemeral or "
       "unlinked buffers have to come back before those go, a week at most (default 30)",
       nullptr, &Config::recovery_grace_seconds},
      {"durable_segments_per_uid", Kind::kCount,
       "segments of one uid's memory kept across restarts, so that one uid cannot fill "
       "the descriptor store; past it, new memory of that uid does not outlive memd "
       "(default 4096: a quarter of the unit's FileDescriptorStoreMax=16384)",
       nullptr, &Config::durable_segments_per_uid},
      {"max_buffers", Kind::kCount, "most buffers at once (default 65536)",
       nullptr, &Config::max_buffers},
      {"max_sessions", Kind::kCount, "most client sessions (default 4096)",
       nullptr, &Config::max_sessions},
      {"max_leases_per_session", Kind::kCount,
       "most leases one session holds (default 65536)", nullptr,
       &Config::max_leases_per_session},
      {"max_waits_per_session", Kind::kCount,
       "most calls one session may have waiting: opens waiting for a seal and "
       "WaitTransfer calls together (default 256)",
       nullptr, &Config::max_waits_per_session},
      // Per-uid limits (issue 9, finding 6); root is not exempt.
      {"max_sessions_per_uid", Kind::kCount,
       "most client sessions of one uid, root included (default 256)", nullptr,
       &Config::max_sessions_per_uid},
      {"max_buffers_per_uid", Kind::kCount,
       "most buffers one uid owns at once, root included (default 16384)",
       nullptr, &Config::max_buffers_per_uid},
      {"max_leases_per_uid", Kind::kCount,
       "most leases the sessions of one uid hold, root included (default "
       "65536)",
       nullptr, &Config::max_leases_per_uid},
      {"max_waits_per_uid", Kind::kCount,
       "most calls the sessions of one uid may have waiting (opens waiting "
       "for a seal, WaitTransfer), root included (default 1024)",
       nullptr, &Config::max_waits_per_uid},
      {"max_waits", Kind::kCount,
       "most calls waiting in the whole daemon (opens waiting for a seal, "
       "WaitTransfer) (default 16384)",
       nullptr, &Config::max_waits},
      {"max_fds_in_flight_per_session", Kind::kCount,
       "most descriptors one session may leave unread in its session socket "
       "(default 32)",
       nullptr, &Config::max_fds_in_flight_per_session},
      {"max_connections_per_uid", Kind::kCount,
       "most connections one uid may hold to the control socket (default 64)",
       nullptr, &Config::max_connections_per_uid},
      {"max_connections", Kind::kCount,
       "most connections to the control socket in all (default 1024)", nullptr,
       &Config::max_connections},
      {"max_uid_bytes", Kind::kQuota,
       "most bytes of buffers one uid may own in each location: 16GiB, or "
       "host=16GiB,pinned=2GiB,device=40GiB,device:1=8GiB (default: none)",
       &Config::max_uid_bytes},
      {"max_session_bytes", Kind::kQuota,
       "most bytes of buffers one session may have created in each location, "
       "written as max_uid_bytes (default: none)",
       &Config::max_session_bytes},
      {"placement", Kind::kPlacement,
       "tunables of location auto: small=64KiB,medium=16MiB,headroom=25%, any "
       "subset (default: those)",
       &Config::placement},
      {"transfer_chunk_bytes", Kind::kBytes,
       "bytes a copy moves per chunk unless it asks otherwise, 1MiB up to "
       "transfer_slot_bytes (default 4MiB)",
       nullptr, &Config::transfer_chunk_bytes},
      {"transfer_slot_bytes", Kind::kBytes,
       "size of one pinned staging slot: the largest chunk a copy may ask for "
       "(default 16MiB)",
       nullptr, &Config::transfer_slot_bytes},
      {"transfer_staging_slots", Kind::kCount,
       "pinned staging slots per GPU, allocated at start; 1 serialises filling "
       "and DMA (default 4)",
       nullptr, &Config::transfer_staging_slots},
      {"transfer_copy_threads", Kind::kCount,
       "CPU threads per GPU that fill and drain staging slots, 1..16 (default: half the "
       "CPUs memd may run on, 2 to 8)",
       nullptr, &Config::transfer_copy_threads},
      {"transfer_max_session_bytes", Kind::kBytes,
       "most bytes of unfinished copies one session may have (default 64GiB)",
       nullptr, &Config::transfer_max_session_bytes},
      {"transfer_max_uid_bytes", Kind::kBytes,
       "most bytes of unfinished copies one uid may have, all its sessions "
       "together (default 64GiB)",
       nullptr, &Config::transfer_max_uid_bytes},
      {"transfer_max_total_bytes", Kind::kBytes,
       "most bytes of unfinished copies in the whole daemon (default 256GiB)",
       nullptr, &Config::transfer_max_total_bytes},
      {"transfer_max_session_transfers", Kind::kCount,
       "most unfinished copies one session may have (default 256)", nullptr,
       &Config::transfer_max_session_transfers},
      {"transfer_max_uid_transfers", Kind::kCount,
       "most unfinished copies one uid may have, all its sessions together "
       "(default 1024)",
       nullptr, &Config::transfer_max_uid_transfers},
      {"transfer_stall_timeout_seconds", Kind::kCount,
       "a running copy with no finished chunk for this long fails with "
       "DEADLINE_EXCEEDED (default 30)",
       nullptr, &Config::transfer_stall_timeout_seconds},
  };
  return options;
}

std::string FlagName(const char* key) {
  std::string flag = absl::StrCat("--", key);
  for (char& c : flag) {
    if (c == '_') c = '-';
  }
  return flag;
}

// The keys that take one of a few words (Validate checks them), in the
// order --help lists them.
const std::map<std::string, std::vector<std::string>>& Choices() {
  static const auto* choices = new std::map<std::string, std::vector<std::string>>{
      {"backend", {"auto", "host", "cuda", "level_zero"}},
      {"cuda_handles", {"auto", "vmm_fd", "ipc"}},
      {"log_level", {"trace", "debug", "info", "warn", "error", "critical", "off"}},
      {"pool_domain_reuse", {"never", "scrub"}},
      {"durability", {"auto", "off"}},
  };
  return *choices;
}

// What an option's value looks like in --help, and to tools/clidoc, which
// completes the words of a|b|c, file names for FILE and directories for
// DIR.
std::string ValueName(const Option& option) {
  switch (option.kind) {
    case Kind::kBytes: return "BYTES";
    case Kind::kCount: return "N";
    case Kind::kMode: return "OCTAL";
    case Kind::kRatio: return "RATIO";
    case Kind::kQuota: return "QUOTA";
    case Kind::kPlacement: return "RULES";
    case Kind::kNuma: return "off|auto|N";
    case Kind::kText: break;
  }
  static const auto* names = new std::map<std::string, std::string>{
      {"socket_dir", "DIR"},       {"numa_sysfs_root", "DIR"},
      {"trace_file", "FILE"},      {"cuda_driver", "FILE"},
      {"level_zero_loader", "FILE"}, {"metrics_address", "HOST:PORT"},
  };
  if (auto choices = Choices().find(option.key); choices != Choices().end()) {
    return absl::StrJoin(choices->second, "|");
  }
  auto name = names->find(option.key);
  return name == names->end() ? "TEXT" : name->second;
}

absl::Status Apply(const Option& option, const std::string& text,
                   const std::string& origin, Config& config) {
  auto invalid = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", why));
  };
  switch (option.kind) {
    case Kind::kText:
      config.*option.text = text;
      return absl::OkStatus();
    case Kind::kQuota: {
      auto quota = broker::Quota::Parse(text);
      if (!quota.ok()) return invalid(std::string(quota.status().message()));
      config.*option.text = text;
      return absl::OkStatus();
    }
    case Kind::kPlacement: {
      auto rules = broker::PlacementRules::Parse(text);
      if (!rules.ok()) return invalid(std::string(rules.status().message()));
      config.*option.text = text;
      return absl::OkStatus();
    }
    case Kind::kNuma: {
      auto numa = broker::ParseNumaRequest(text);
      if (!numa.ok()) return invalid(std::string(numa.status().message()));
      if (numa->kind == broker::NumaRequest::Kind::kDefault) {
        return invalid("numa is off, auto or a node number");
      }
      config.*option.text = text;
      return absl::OkStatus();
    }
    case Kind::kBytes: {
      auto bytes = ParseBytes(text);
      if (!bytes.ok()) return invalid(std::string(bytes.status().message()));
      config.*option.number = *bytes;
      return absl::OkStatus();
    }
    case Kind::kCount: {
      std::uint64_t count;
      if (!absl::SimpleAtoi(text, &count) || count == 0) {
        return invalid(absl::StrCat("'", text, "' is not a positive whole number"));
      }
      config.*option.number = count;
      return absl::OkStatus();
    }
    case Kind::kRatio: {
      double ratio;
      if (!absl::SimpleAtod(text, &ratio) || !std::isfinite(ratio) || ratio > 100) {
        return invalid(absl::StrCat("'", text, "' is not a number like 0.08"));
      }
      if (option.ratio == &Config::pool_large_fit_slack && ratio < 0) {
        return invalid("must not be negative");
      }
      config.*option.ratio = ratio;
      return absl::OkStatus();
    }
    case Kind::kMode: {
      std::uint32_t mode = 0;
      bool octal = !text.empty() &&
                   text.find_first_not_of("01234567") == std::string::npos &&
                   text.size() <= 4;
      if (octal) mode = static_cast<std::uint32_t>(std::stoul(text, nullptr, 8));
      if (!octal || mode > 0777) {
        return invalid(absl::StrCat("'", text, "' is not an octal mode like 0660"));
      }
      config.*option.mode = mode;
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

// A TOML value as the text a flag would carry; integers written in TOML
// octal (0o660) stay octal for modes.
std::optional<std::string> TomlText(const toml::node& node, Kind kind) {
  if (auto text = node.value<std::string>()) return *text;
  if (kind == Kind::kRatio) {
    if (auto number = node.value<double>()) return absl::StrCat(*number);
  }
  if (auto number = node.value<std::int64_t>()) {
    if (*number < 0) return std::nullopt;
    if (kind == Kind::kMode) {
      return absl::StrFormat("%o", *number);
    }
    return absl::StrCat(*number);
  }
  return std::nullopt;
}

absl::Status LoadFile(const std::string& path, Config& config,
                      const std::set<std::string>& set_by_flags) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& error) {
    const auto& where = error.source().begin;
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", where.line, ":", where.column, ": ",
                     std::string(error.description())));
  }
  std::map<std::string, const Option*> by_key;
  for (const Option& option : Options()) by_key[option.key] = &option;
  for (const auto& [key, node] : table) {
    std::string name(key.str());
    auto option = by_key.find(name);
    if (option == by_key.end()) {
      std::vector<std::string> known;
      for (const auto& [k, o] : by_key) known.push_back(k);
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": unknown key '", name, "'; known keys: ",
          absl::StrJoin(known, ", ")));
    }
    if (set_by_flags.contains(name)) continue;
    std::optional<std::string> text = TomlText(node, option->second->kind);
    std::string origin = absl::StrCat(path, ": ", name);
    if (!text) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": expected a string or a non-negative integer"));
    }
    MEMD_RETURN_IF_ERROR(Apply(*option->second, *text, origin, config));
  }
  return absl::OkStatus();
}

absl::Status Validate(const Config& config) {
  for (const Option& option : Options()) {
    auto choices = Choices().find(option.key);
    if (choices == Choices().end()) continue;
    const std::string& value = config.*option.text;
    if (std::find(choices->second.begin(), choices->second.end(), value) ==
        choices->second.end()) {
      return absl::InvalidArgumentError(absl::StrCat(option.key, " '", value,
                                                     "' is not one of ",
                                                     absl::StrJoin(choices->second, ", ")));
    }
  }
  if (!config.metrics_address.empty()) {
    std::size_t colon = config.metrics_address.rfind(':');
    int port = -1;
    if (colon == std::string::npos || colon == 0 ||
        !absl::SimpleAtoi(config.metrics_address.substr(colon + 1), &port) ||
        port < 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metrics address '", config.metrics_address,
          "' is not HOST:PORT (port 0..65535)"));
    }
  }
  // Adopted buffers stay charged to their owners while they wait: a grace
  // past a week keeps a dead client's memory for nothing (and seconds past
  // int64 would wrap into a negative duration).
  if (config.recovery_grace_seconds > kMaxRecoveryGraceSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "recovery_grace_seconds ", config.recovery_grace_seconds, " is more than ",
        kMaxRecoveryGraceSeconds, " (a week)"));
  }
  if (config.max_buffer_bytes == 0) {
    return absl::InvalidArgumentError("max_buffer_bytes must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

constexpr char kDescription[] = "memd: per-node GPU and shared-memory broker";

// Declares memd's flags on `app`: --config into `config_file`, and each
// key's flag into `values` (by key). Returns each key's flag.
std::map<std::string, CLI::Option*> DeclareCommandLine(
    CLI::App& app, std::string& config_file, std::map<std::string, std::string>& values) {
  app.set_version_flag("--version", std::string(kVersion));
  app.footer(absl::StrCat("Sizes (the *_bytes keys, quotas, placement tunables) are bytes, or a "
                          "number with a unit: ", kSizeUnits, "; 100MB = 100000000."));
  app.add_option("--config", config_file,
                 "TOML file with any of the keys below (flags win)")
      ->type_name("FILE");
  std::map<std::string, CLI::Option*> flags;
  for (const Option& option : Options()) {
    flags[option.key] = app.add_option(FlagName(option.key), values[option.key], option.help)
                            ->type_name(ValueName(option));
  }
  return flags;
}

}  // namespace

std::unique_ptr<CLI::App> MakeCommandLineApp() {
  // The App, and what its options fill (they hold references to it).
  struct BoundApp : CLI::App {
    BoundApp() : CLI::App(kDescription, "memd") {
      DeclareCommandLine(*this, config_file, values);
    }
    std::string config_file;
    std::map<std::string, std::string> values;
  };
  return std::make_unique<BoundApp>();
}

std::string ConfigKey(const CLI::Option& option) {
  for (const Option& known : Options()) {
    for (const std::string& name : option.get_lnames()) {
      if (FlagName(known.key) == "--" + name) return known.key;
    }
  }
  return "";
}

absl::StatusOr<CommandLine> ParseCommandLine(int argc, const char* const* argv) {
  CommandLine line;
  Config& config = line.config;
  CLI::App app(kDescription, "memd");
  std::map<std::string, std::string> flag_values;
  std::map<std::string, CLI::Option*> flags =
      DeclareCommandLine(app, config.config_file, flag_values);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForVersion&) {  // Before Success: derived from it.
    line.text = absl::StrCat("memd ", kVersion, "\n");
    return line;
  } catch (const CLI::Success&) {  // --help
    line.text = app.help();
    return line;
  } catch (const CLI::ParseError& error) {
    return absl::InvalidArgumentError(error.what());
  }
  std::set<std::string> set_by_flags;
  for (const auto& [key, flag] : flags) {
    if (flag->count() > 0) set_by_flags.insert(key);
  }
  if (!config.config_file.empty()) {
    MEMD_RETURN_IF_ERROR(LoadFile(config.config_file, config, set_by_flags));
  }
  for (const Option& option : Options()) {
    if (!set_by_flags.contains(option.key)) continue;
    MEMD_RETURN_IF_ERROR(Apply(option, flag_values[option.key],
                          FlagName(option.key), config));
  }
  MEMD_RETURN_IF_ERROR(Validate(config));
  return line;
}

absl::StatusOr<Config> ParseConfig(int argc, const char* const* argv) {
  MEMD_ASSIGN_OR_RETURN(CommandLine line, ParseCommandLine(argc, argv));
  if (!line.text.empty()) {
    return absl::InvalidArgumentError(
        "--help and --version print text; they configure nothing");
  }
  return std::move(line.config);
}

std::vector<std::string> SettingsNeedingRestart(const Config& running,
                                                const Config& next) {
  std::vector<std::string> changed;
  // The TOML key is the member's name.
  auto compare = [&](const char* key, auto Config::*member) {
    if (running.*member != next.*member) changed.push_back(key);
  };
  compare("socket_dir", &Config::socket_dir);
  compare("socket_mode", &Config::socket_mode);
  compare("metrics_address", &Config::metrics_address);
  compare("backend", &Config::backend);
  compare("cuda_driver", &Config::cuda_driver);
  compare("cuda_handles", &Config::cuda_handles);
  compare("level_zero_loader", &Config::level_zero_loader);
  compare("host_pool_limit_bytes", &Config::host_pool_limit_bytes);
  compare("pinned_pool_limit_bytes", &Config::pinned_pool_limit_bytes);
  compare("device_pool_limit_bytes", &Config::device_pool_limit_bytes);
  compare("numa", &Config::numa);
  compare("numa_sysfs_root", &Config::numa_sysfs_root);
  compare("pool_small_max_bytes", &Config::pool_small_max_bytes);
  compare("pool_small_segment_bytes", &Config::pool_small_segment_bytes);
  compare("pool_large_round_bytes", &Config::pool_large_round_bytes);
  compare("pool_large_fit_slack", &Config::pool_large_fit_slack);
  compare("pool_idle_budget", &Config::pool_idle_budget);
  compare("pool_trim_idle_seconds", &Config::pool_trim_idle_seconds);
  compare("pool_domain_reuse", &Config::pool_domain_reuse);
  compare("trace_file", &Config::trace_file);
  compare("durability", &Config::durability);
  compare("recovery_grace_seconds", &Config::recovery_grace_seconds);
  compare("durable_segments_per_uid", &Config::durable_segments_per_uid);
  compare("transfer_chunk_bytes", &Config::transfer_chunk_bytes);
  compare("transfer_slot_bytes", &Config::transfer_slot_bytes);
  compare("transfer_staging_slots", &Config::transfer_staging_slots);
  compare("transfer_copy_threads", &Config::transfer_copy_threads);
  compare("transfer_max_session_bytes", &Config::transfer_max_session_bytes);
  compare("transfer_max_uid_bytes", &Config::transfer_max_uid_bytes);
  compare("transfer_max_total_bytes", &Config::transfer_max_total_bytes);
  compare("transfer_max_session_transfers", &Config::transfer_max_session_transfers);
  compare("transfer_max_uid_transfers", &Config::transfer_max_uid_transfers);
  compare("transfer_stall_timeout_seconds", &Config::transfer_stall_timeout_seconds);
  return changed;
}

}  // namespace memd
