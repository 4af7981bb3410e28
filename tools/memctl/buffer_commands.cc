// ls, inspect, put, get, unlink, prefetch, drop: named buffers, one at a
// time (unlink: one or several, or every one under a prefix).

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "common/numa.h"
#include "tools/memctl/commands.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/file_transfers.h"
#include "tools/memctl/format.h"
#include "tools/memctl/safetensors_commands.h"
#include "tools/memctl/table.h"

namespace memd::memctl {
namespace {

std::string SizeWithBytes(std::uint64_t size) {
  return size < 1024 ? FormatBytes(size)
                     : absl::StrCat(FormatBytes(size), " (", size, " bytes)");
}

// The node, or why there is none. memctl runs on memd's machine, so its
// sysfs says how many nodes memd saw.
std::string NumaText(const BufferInfo& info) {
  if (info.numa_node >= 0) return absl::StrCat("node ", info.numa_node);
  if (absl::StartsWith(info.location, "device")) return "- (device memory is on its GPU)";
  if (numa::NodeCount() <= 1) return "- (this machine has one NUMA node)";
  return "- (not bound: numa off)";
}

// ls's STATE: "sealed", "creating", or for a buffer whose name is gone
// while its memory is not, "unlinked, N leases".
std::string ListState(const BufferInfo& info) {
  if (!info.unlinked) return StateName(info.state);
  return absl::StrCat("unlinked, ", info.lease_count,
                      info.lease_count == 1 ? " lease" : " leases");
}

// inspect's rows of who holds the buffer's leases: one per session,
// location and access the caller may see in full, then what it may only
// count.
void AddHolderRows(Table& table, const LeaseHolders& holders) {
  const char* field = "held by";
  for (const LeaseHolder& holder : holders.listed) {
    table.AddRow({field, absl::StrCat("session ", holder.session_id, ", pid ", holder.pid, " (",
                                      holder.command, "), ", UserName(holder.uid), " (uid ",
                                      holder.uid, "): ", holder.leases,
                                      holder.access == Access::kReadWrite ? " read-write"
                                                                          : " read",
                                      holder.leases == 1 ? " lease" : " leases", " at ",
                                      holder.location, " since ",
                                      FormatLocalTime(holder.since))});
    field = "";
  }
  // What may only be counted: "+ N ..." under the holders listed.
  auto counted = [&](std::uint32_t leases, const char* whose) {
    if (leases == 0) return;
    table.AddRow({field, absl::StrCat(*field == '\0' ? "+ " : "", leases,
                                      leases == 1 ? " lease" : " leases", whose)});
    field = "";
  };
  counted(holders.unlisted_leases, " of more sessions, not listed");
  counted(holders.other_users_leases, " held by other users");
}

void PrintInspect(std::ostream& out, const BufferInfo& info) {
  Table table({{"FIELD"}, {"VALUE"}});
  table.AddRow({"name", info.name});
  table.AddRow({"id", absl::StrCat(info.id)});
  table.AddRow({"size", SizeWithBytes(info.size)});
  table.AddRow({"location", info.location});
  if (!info.placement.empty()) table.AddRow({"placement", info.placement});
  if (!info.retention.empty()) table.AddRow({"retention", info.retention});
  table.AddRow({"numa", NumaText(info)});
  table.AddRow({"owner", absl::StrCat(UserName(info.owner_uid), " (uid ",
                                      info.owner_uid, ")")});
  table.AddRow({"group", absl::StrCat(GroupName(info.owner_gid), " (gid ",
                                      info.owner_gid, ")")});
  table.AddRow({"mode", FormatMode(info.mode)});
  table.AddRow({"state", StateName(info.state)});
  table.AddRow({"persistence", PersistenceName(info.persistence)});
  table.AddRow({"leases", absl::StrCat(info.lease_count)});
  AddHolderRows(table, info.holders);
  table.AddRow({"created", absl::StrCat(FormatLocalTime(info.created), " by pid ",
                                        info.creator_pid)});
  table.AddRow({"sealed", info.sealed ? FormatLocalTime(*info.sealed) : "not yet"});
  if (info.unlinked) table.AddRow({"unlinked", "yes: memory lives until the last lease ends"});
  for (const auto& [key, value] : info.attrs) table.AddRow({absl::StrCat("attr ", key), value});
  table.AddRow({"sync state", info.sync_state});
  table.AddRow({"generation", absl::StrCat(info.generation)});
  if (!info.fill_failure.empty()) table.AddRow({"fill failure", info.fill_failure});
  for (auto& [field, value] : UsageRows(info.usage)) table.AddRow({field, value});
  table.Print(out);
}

// One row per copy of the buffer, the home first.
void PrintReplicas(std::ostream& out, const BufferInfo& info) {
  Table table({{"LOCATION"},
               {"STATE"},
               {"GENERATION", true},
               {"READERS", true},
               {"WRITERS", true},
               {"BYTES", true},
               {"CHARGED TO"}});
  for (const ReplicaInfo& replica : info.replicas) {
    table.AddRow({replica.location, replica.state, absl::StrCat(replica.generation),
                  absl::StrCat(replica.readers), absl::StrCat(replica.writers),
                  FormatBytes(replica.bytes),
                  absl::StrCat(UserName(replica.charged_uid), " (uid ", replica.charged_uid,
                               ")")});
  }
  out << '\n';
  table.Print(out);
}

// What prefetch and drop print: the buffer as it is after the call.
absl::Status PrintReplicaChange(const std::string& step, absl::StatusOr<BufferInfo> info,
                                const Output& output) {
  if (!info.ok()) return Failed(step, info.status());
  if (output.json) {
    PrintJson(output.out, BufferJson(*info));
    return absl::OkStatus();
  }
  output.out << step << ": " << info->sync_state << ", generation " << info->generation
             << '\n';
  PrintReplicas(output.out, *info);
  return absl::OkStatus();
}

// "; 5 MiB in 1.2 s, ..." for copies the daemon ran; nothing when memctl
// moved the bytes through its own mapping.
std::string EngineNote(const TransferReport& report) {
  if (report.path.empty() || report.path == "cpu") return "";
  return absl::StrCat("; ", FormatTransferReport(report));
}

// {"name", "unlinked", "error"}: what unlink did with one name; "error"
// ("CODE: message") only when it failed.
Json UnlinkJson(const std::string& name, const absl::Status& status) {
  Json json;
  json["name"] = name;
  json["unlinked"] = status.ok();
  if (!status.ok()) {
    json["error"] = absl::StrCat(absl::StatusCodeToString(status.code()), ": ",
                                 status.message());
  }
  return json;
}

// The names unlink of several names or -r goes through, and the failures
// met on the way: a prefix that matched nothing is one.
struct UnlinkPlan {
  std::vector<std::string> names;
  // For -r, each name's buffer as listed and confirmed (0: any, for names
  // given as they are): one re-created since is refused, not unlinked.
  std::vector<std::uint64_t> ids;
  std::size_t unmatched = 0;  // -r prefixes that matched nothing.
  std::size_t failures = 0;
  absl::Status first_failure;

  // Counts `status` (tagged with its step) and reports it at once.
  void Fail(const absl::Status& status, const Output& output) {
    if (failures++ == 0) first_failure = status;
    if (output.errors != nullptr) *output.errors << FailureLine(status, "unlink") << '\n';
  }
};

// The -r question: the buffers by name (the first kMaxShown), then
// "unlink 17 buffers under job42/?".
std::string UnlinkQuestion(const std::vector<std::string>& names,
                           const std::vector<std::string>& prefixes) {
  constexpr std::size_t kMaxShown = 20;
  std::string question;
  for (std::size_t i = 0; i < names.size() && i < kMaxShown; ++i) {
    absl::StrAppend(&question, "  ", names[i], "\n");
  }
  if (names.size() > kMaxShown) {
    absl::StrAppend(&question, "  ... and ", names.size() - kMaxShown,
                    " more (memctl ls PREFIX lists them all)\n");
  }
  absl::StrAppend(&question, "unlink ", names.size(), names.size() == 1 ? " buffer" : " buffers",
                  " under ", absl::StrJoin(prefixes, ", "), "?");
  return question;
}

// The names unlink goes through: as given, or for -r what memctl ls lists
// under each prefix (each name once), confirmed. Errors: the listing's;
// NOT_FOUND when no prefix matched anything; CANCELLED when the answer was
// no. Nothing has been unlinked then.
absl::StatusOr<UnlinkPlan> PlanUnlink(Client& client, const UnlinkOptions& options,
                                      const Output& output) {
  UnlinkPlan plan;
  if (!options.recursive) {
    plan.names = options.names;
    plan.ids.assign(plan.names.size(), 0);
    return plan;
  }
  std::vector<std::string> unmatched;
  std::set<std::string> seen;
  for (const std::string& prefix : options.names) {
    absl::StatusOr<std::vector<BufferInfo>> listed = client.List(prefix);
    if (!listed.ok()) return Failed(absl::StrCat("unlink -r ", prefix), listed.status());
    if (listed->empty()) unmatched.push_back(prefix);
    for (const BufferInfo& info : *listed) {
      if (seen.insert(info.name).second) {
        plan.names.push_back(info.name);
        plan.ids.push_back(info.id);
      }
    }
  }
  auto nothing_under = [](const std::string& prefix) {
    return absl::NotFoundError(
        absl::StrCat("no buffer you may see has a name that starts with ", prefix));
  };
  if (plan.names.empty()) {
    return Failed(absl::StrCat("unlink -r ", absl::StrJoin(options.names, " ")),
                  nothing_under(absl::StrJoin(options.names, " or ")));
  }
  if (options.confirm != nullptr && !options.confirm(UnlinkQuestion(plan.names, options.names))) {
    return Failed(absl::StrCat("unlink -r ", absl::StrJoin(options.names, " ")),
                  absl::CancelledError("not confirmed: nothing was unlinked"));
  }
  plan.unmatched = unmatched.size();
  for (const std::string& prefix : unmatched) {
    plan.Fail(Failed(absl::StrCat("unlink -r ", prefix), nothing_under(prefix)), output);
  }
  return plan;
}

}  // namespace

absl::Status RunList(Client& client, const std::string& prefix, bool include_unlinked,
                     const Output& output) {
  absl::StatusOr<std::vector<BufferInfo>> buffers =
      client.List(prefix, ListOptions{.include_unlinked = include_unlinked});
  if (!buffers.ok()) return Failed("ls", buffers.status());
  if (output.json) {
    Json json = Json::array();
    for (const BufferInfo& info : *buffers) json.push_back(BufferJson(info));
    PrintJson(output.out, json);
    return absl::OkStatus();
  }
  if (buffers->empty()) {
    output.out << (prefix.empty() ? std::string("no buffers")
                                  : absl::StrCat("no buffers named ", prefix, "*"))
               << '\n';
    return absl::OkStatus();
  }
  Table table({{"NAME"},
               {"SIZE", true},
               {"LOCATION"},
               {"SYNC"},
               {"MODE"},
               {"OWNER"},
               {"STATE"},
               {"LEASES", true},
               {"CREATED"}});
  std::uint64_t unlinked = 0;
  for (const BufferInfo& info : *buffers) {
    unlinked += info.unlinked ? 1 : 0;
    table.AddRow({info.name, FormatBytes(info.size), info.location, info.sync_state,
                  FormatMode(info.mode), UserName(info.owner_uid), ListState(info),
                  absl::StrCat(info.lease_count), FormatLocalTime(info.created)});
  }
  table.Print(output.out);
  if (unlinked > 0) {
    output.out << unlinked
               << (unlinked == 1 ? " buffer was unlinked but still takes memory until its "
                                   "last lease ends"
                                 : " buffers were unlinked but still take memory until their "
                                   "last leases end")
               << " (memctl sessions shows who holds leases; 0 leases: copies in flight or "
                  "a restart's grace period keep it)\n";
  }
  return absl::OkStatus();
}

absl::Status RunInspect(Client& client, const std::string& name, const Output& output) {
  absl::StatusOr<BufferInfo> info = client.Stat(name);
  if (!info.ok()) return Failed(absl::StrCat("inspect ", name), info.status());
  // A safetensors buffer's tensors come from its own bytes; a header that
  // cannot be read is one line of the result, not a failed inspect.
  std::optional<absl::StatusOr<safetensors::Header>> header;
  if (IsSafetensorsBuffer(*info)) header = ReadBufferHeader(client, *info);
  if (output.json) {
    Json json = BufferJson(*info);
    if (header.has_value()) AddTensorsJson(json, *header);
    PrintJson(output.out, json);
  } else {
    PrintInspect(output.out, *info);
    PrintReplicas(output.out, *info);
    if (header.has_value()) PrintTensors(output.out, *header);
  }
  return absl::OkStatus();
}

absl::Status RunPut(Client& client, const PutOptions& options, const Output& output) {
  if (options.format == "safetensors") return RunPutSafetensors(client, options, output);
  FileToBuffer request;
  request.step = absl::StrCat("put ", options.name);
  request.file = options.file;
  request.name = options.name;
  request.create.location = options.location;
  request.create.access_hint = options.hint;
  request.create.retention = options.retention;
  request.create.numa = options.numa;
  request.create.wait_for_memory = options.wait_for_memory;
  request.create.mode = options.mode;
  request.create.persistence =
      options.ephemeral ? Persistence::kEphemeral : Persistence::kPersistent;
  request.create.attrs = options.attrs;
  request.size = options.size;
  request.max_stream_bytes = options.max_stream_bytes;
  request.transfer = options.transfer;
  request.files = options.files;
  absl::StatusOr<FileToBufferResult> result =
      CopyFileToBuffer(client, request, output.progress);
  if (!result.ok()) return result.status();
  const BufferInfo& info = result->info;
  if (output.json) {
    PrintJson(output.out, WithTransferReport(BufferJson(info), result->report));
  } else {
    output.out << "put " << info.name << ": " << SizeWithBytes(info.size) << " at "
               << info.location << ", mode " << FormatMode(info.mode) << ", "
               << StateName(info.state) << EngineNote(result->report) << '\n';
  }
  return absl::OkStatus();
}

absl::Status RunGet(Client& client, const GetOptions& options, const Output& output) {
  BufferToFile request;
  request.step = absl::StrCat("get ", options.name);
  request.name = options.name;
  request.output = options.output;
  request.open.access = Access::kRead;
  request.open.wait = options.wait;
  request.open.owner = options.owner;
  request.open.location = options.location;
  request.open.wait_for_memory = options.wait_for_memory;
  request.transfer = options.transfer;
  request.files = options.files;
  absl::StatusOr<BufferToFileResult> result =
      CopyBufferToFile(client, request, output.progress);
  if (!result.ok()) return result.status();
  if (options.output.empty() || options.output == "-") return absl::OkStatus();
  if (output.json) {
    Json json;
    json["name"] = result->info.name;
    json["size_bytes"] = result->info.size;
    json["output"] = options.output;
    PrintJson(output.out, WithTransferReport(std::move(json), result->report));
  } else {
    output.out << "get " << result->info.name << ": wrote "
               << SizeWithBytes(result->info.size) << " to " << options.output
               << EngineNote(result->report) << '\n';
  }
  return absl::OkStatus();
}

absl::Status RunUnlink(Client& client, const UnlinkOptions& options, const Output& output) {
  if (!options.recursive && options.names.size() == 1) {
    // One name: its failure is the command's, as it always was.
    const std::string& name = options.names.front();
    if (absl::Status status = client.Unlink(name); !status.ok()) {
      return Failed(absl::StrCat("unlink ", name), status);
    }
    if (output.json) {
      PrintJson(output.out, UnlinkJson(name, absl::OkStatus()));
    } else {
      output.out << "unlinked " << name << '\n';
    }
    return absl::OkStatus();
  }
  absl::StatusOr<UnlinkPlan> plan = PlanUnlink(client, options, output);
  if (!plan.ok()) return plan.status();
  // Each name is the daemon's to allow (its owner and root): one refusal
  // stops none of the others.
  Json json = Json::array();
  for (std::size_t i = 0; i < plan->names.size(); ++i) {
    const std::string& name = plan->names[i];
    absl::Status status =
        Failed(absl::StrCat("unlink ", name), client.Unlink(name, plan->ids[i]));
    json.push_back(UnlinkJson(name, status));
    if (status.ok()) {
      if (!output.json) output.out << "unlinked " << name << '\n';
    } else {
      plan->Fail(status, output);
    }
  }
  if (output.json) PrintJson(output.out, json);
  if (plan->failures == 0) return absl::OkStatus();
  const std::size_t tried = plan->names.size() + plan->unmatched;
  return Partial(Failed(
      "unlink", absl::Status(plan->first_failure.code(),
                             absl::StrCat(plan->failures, " of ", tried,
                                          tried == 1 ? " name" : " names",
                                          " failed (each said above)",
                                          plan->failures < tried ? "; the rest were unlinked"
                                                                 : ""))));
}

absl::Status RunPrefetch(Client& client, const std::string& name, const std::string& location,
                         const PrefetchOptions& options, const Output& output) {
  return PrintReplicaChange(absl::StrCat("prefetch ", name, " to ", location),
                            client.Prefetch(name, location, options), output);
}

absl::Status RunDrop(Client& client, const std::string& name, const std::string& location,
                     const Output& output) {
  return PrintReplicaChange(absl::StrCat("drop ", name, " at ", location),
                            client.DropReplica(name, location), output);
}

}  // namespace memd::memctl
