// ls, inspect, put, get, unlink, prefetch, drop: named buffers one at a time.

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

}  // namespace

absl::Status RunList(Client& client, const std::string& prefix, const Output& output) {
  absl::StatusOr<std::vector<BufferInfo>> buffers = client.List(prefix);
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
  for (const BufferInfo& info : *buffers) {
    table.AddRow({info.name, FormatBytes(info.size), info.location, info.sync_state,
                  FormatMode(info.mode), UserName(info.owner_uid),
                  StateName(info.state), absl::StrCat(info.lease_count),
                  FormatLocalTime(info.created)});
  }
  table.Print(output.out);
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

absl::Status RunUnlink(Client& client, const std::string& name, const Output& output) {
  if (absl::Status status = client.Unlink(name); !status.ok()) {
    return Failed(absl::StrCat("unlink ", name), status);
  }
  if (output.json) {
    Json json;
    json["name"] = name;
    json["unlinked"] = true;
    PrintJson(output.out, json);
  } else {
    output.out << "unlinked " << name << '\n';
  }
  return absl::OkStatus();
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
