// ls, inspect, put, get, unlink: named buffers one at a time.

#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "common/location.h"
#include "tools/memctl/commands.h"
#include "tools/memctl/device_copy.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/file_io.h"
#include "tools/memctl/format.h"
#include "tools/memctl/table.h"

namespace memd::memctl {
namespace {

std::string SizeWithBytes(std::uint64_t size) {
  return size < 1024 ? FormatBytes(size)
                     : absl::StrCat(FormatBytes(size), " (", size, " bytes)");
}

void PrintInspect(std::ostream& out, const BufferInfo& info) {
  Table table({{"FIELD"}, {"VALUE"}});
  table.AddRow({"name", info.name});
  table.AddRow({"id", absl::StrCat(info.id)});
  table.AddRow({"size", SizeWithBytes(info.size)});
  table.AddRow({"location", info.location});
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
  table.Print(out);
}

// The bytes to publish: read straight into the buffer when the size is
// known (a file's, or --size), else (pipes) collected first because the
// buffer's size is fixed at creation.
absl::Status Fill(Input& input, const Collected& collected, bool sized_by_flag,
                  std::span<std::byte> into) {
  if (!input.size.has_value()) {
    collected.CopyTo(into);
    return absl::OkStatus();
  }
  if (absl::Status status = ReadExactly(input, into, sized_by_flag ? "--size" : "");
      !status.ok()) {
    return status;
  }
  // A device such as /dev/zero never ends: --size takes its first bytes.
  if (sized_by_flag && input.kind == Input::Kind::kDevice) return absl::OkStatus();
  absl::StatusOr<bool> at_end = AtEnd(input);
  if (!at_end.ok()) return at_end.status();
  if (!*at_end && sized_by_flag) {
    return Failed(absl::StrCat("read ", input.label),
                  absl::FailedPreconditionError(absl::StrCat(
                      input.label, " has more than the ", into.size(),
                      " bytes --size promised")));
  }
  if (!*at_end) {
    return Failed(absl::StrCat("read ", input.label),
                  absl::FailedPreconditionError(absl::StrCat(
                      "the file grew past ", into.size(),
                      " bytes while memctl read it; try again")));
  }
  return absl::OkStatus();
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
               {"MODE"},
               {"OWNER"},
               {"STATE"},
               {"LEASES", true},
               {"CREATED"}});
  for (const BufferInfo& info : *buffers) {
    table.AddRow({info.name, FormatBytes(info.size), info.location,
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
  if (output.json) {
    PrintJson(output.out, BufferJson(*info));
  } else {
    PrintInspect(output.out, *info);
  }
  return absl::OkStatus();
}

absl::Status RunPut(Client& client, const PutOptions& options, const Output& output) {
  const std::string step = absl::StrCat("put ", options.name);
  absl::StatusOr<Input> input = OpenInput(options.file);
  if (!input.ok()) return input.status();
  Collected collected;
  std::uint64_t size = 0;
  const bool sized_by_flag = options.size.has_value();
  if (sized_by_flag) {
    size = *options.size;
    // A file that claims 0 bytes (files under /proc do) is read as a stream.
    if (input->kind == Input::Kind::kFile && input->size.value_or(0) > 0 &&
        *input->size != size) {
      return Failed(step, absl::InvalidArgumentError(absl::StrCat(
                              input->label, " has ", *input->size, " bytes, not the ",
                              size, " of --size")));
    }
    input->size = size;
  } else if (input->size.has_value() && *input->size > 0) {
    size = *input->size;
  } else {
    // Unknown size, or a file that claims 0 bytes: collected first, bounded.
    input->size.reset();
    absl::StatusOr<Collected> bytes = ReadToEnd(*input, options.max_stream_bytes);
    if (!bytes.ok()) return bytes.status();
    collected = std::move(*bytes);
    size = collected.size;
  }
  if (size == 0) {
    return Failed(step, absl::InvalidArgumentError(absl::StrCat(
                            input->label, " is empty; a buffer holds at least 1 byte")));
  }

  // Device buffers are written through the driver, from host memory.
  absl::StatusOr<Location> location = Location::Parse(options.location);
  std::shared_ptr<const cuda::Driver> driver;
  if (location.ok() && location->kind == Location::Kind::kDevice) {
    // memctl's CUDA may number the GPUs otherwise than memd's.
    absl::StatusOr<int> cuda_device = client.CudaDevice(options.location);
    if (!cuda_device.ok()) return Failed(step, cuda_device.status());
    auto used = UseDevice(*cuda_device);
    if (!used.ok()) return Failed(step, used.status());
    driver = *std::move(used);
  }
  CreateOptions create;
  create.location = options.location;
  create.mode = options.mode;
  create.persistence = Persistence::kPersistent;
  absl::StatusOr<Buffer> buffer = client.Create(options.name, size, create);
  if (!buffer.ok()) return Failed(step, buffer.status());

  absl::Status status;
  if (driver != nullptr) {
    std::vector<std::byte> staging(size);
    status = Fill(*input, collected, sized_by_flag, staging);
    if (status.ok()) status = CopyToDevice(*driver, buffer->device_pointer(), staging);
  } else if (std::span<std::byte> into = buffer->mutable_data(); into.size() != size) {
    status = absl::InternalError(absl::StrCat("the daemon mapped ", into.size(),
                                              " bytes for a buffer of ", size));
  } else {
    status = Fill(*input, collected, sized_by_flag, into);
  }
  if (status.ok()) status = Failed(absl::StrCat("seal ", options.name), buffer->Seal());
  if (!status.ok()) {
    // Readers waiting for the seal would wait for nothing; a persistent
    // half-written buffer would also hold its memory until someone noticed.
    (void)client.Unlink(options.name);
    return Failed(step, status);
  }
  const BufferInfo info = buffer->info();
  if (output.json) {
    PrintJson(output.out, BufferJson(info));
  } else {
    output.out << "put " << info.name << ": " << SizeWithBytes(info.size) << " at "
               << info.location << ", mode " << FormatMode(info.mode) << ", "
               << StateName(info.state) << '\n';
  }
  return absl::OkStatus();
}

absl::Status RunGet(Client& client, const GetOptions& options, const Output& output) {
  const std::string step = absl::StrCat("get ", options.name);
  // A device buffer is opened in a context on its device: find out which
  // first (a buffer still being waited for is not on any device yet; those
  // are host buffers, or device ones opened once they exist).
  std::shared_ptr<const cuda::Driver> driver;
  if (absl::StatusOr<BufferInfo> info = client.Stat(options.name); info.ok()) {
    absl::StatusOr<Location> location = Location::Parse(info->location);
    if (location.ok() && location->kind == Location::Kind::kDevice) {
      absl::StatusOr<int> cuda_device = client.CudaDevice(info->location);
      if (!cuda_device.ok()) return Failed(step, cuda_device.status());
      auto used = UseDevice(*cuda_device);
      if (!used.ok()) return Failed(step, used.status());
      driver = *std::move(used);
    }
  }
  OpenOptions open;
  open.access = Access::kRead;
  open.wait = options.wait;
  open.owner = options.owner;
  absl::StatusOr<Buffer> buffer = client.Open(options.name, open);
  if (!buffer.ok()) return Failed(step, buffer.status());
  std::vector<std::byte> staging;
  std::span<const std::byte> bytes = buffer->data();
  if (buffer->device() >= 0) {
    if (driver == nullptr) {
      return Failed(step, absl::FailedPreconditionError(
                              "the buffer appeared on a device while memctl waited; "
                              "run get again"));
    }
    staging.resize(buffer->size());
    if (absl::Status copied = CopyFromDevice(*driver, staging, buffer->device_pointer());
        !copied.ok()) {
      return Failed(step, copied);
    }
    bytes = staging;
  }
  const bool to_stdout = options.output.empty() || options.output == "-";
  absl::Status written = to_stdout ? WriteAll(STDOUT_FILENO, bytes, "stdout")
                                   : WriteFile(options.output, bytes);
  if (!written.ok()) return Failed(step, written);
  if (to_stdout) return absl::OkStatus();
  if (output.json) {
    Json json;
    json["name"] = buffer->name();
    json["size_bytes"] = buffer->size();
    json["output"] = options.output;
    PrintJson(output.out, json);
  } else {
    output.out << "get " << buffer->name() << ": wrote " << SizeWithBytes(buffer->size())
               << " to " << options.output << '\n';
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

}  // namespace memd::memctl
