#include "tools/memctl/safetensors_commands.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "common/location.h"
#include "tools/memctl/device_context.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/file_transfers.h"
#include "tools/memctl/progress.h"
#include "tools/memctl/staged_copy.h"
#include "tools/memctl/table.h"

namespace memd::memctl {
namespace {

namespace st = safetensors;

std::string SizeWithBytes(std::uint64_t size) {
  return size < 1024 ? FormatBytes(size)
                     : absl::StrCat(FormatBytes(size), " (", size, " bytes)");
}

std::string Attr(const BufferInfo& info, const std::string& key) {
  auto found = info.attrs.find(key);
  return found == info.attrs.end() ? std::string() : found->second;
}

// A buffer of `name` that holds this state of the file already, or
// nullopt when the name is free. Errors: PERMISSION_DENIED (owned by
// neither this user nor root, who alone are trusted to have put the
// file's bytes there), ALREADY_EXISTS (another file's, or still being
// loaded), Stat's.
absl::StatusOr<std::optional<BufferInfo>> FindLoaded(Client& client, const std::string& name,
                                                     const st::File& file,
                                                     const std::string& location) {
  absl::StatusOr<BufferInfo> info = client.Stat(name);
  if (absl::IsNotFound(info.status())) return std::nullopt;
  if (!info.ok()) return info.status();
  const uid_t self = ::getuid();
  if (info->owner_uid != self && info->owner_uid != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "buffer ", name, " exists, owned by ", UserName(info->owner_uid), " (uid ",
        info->owner_uid, "), neither you nor root: it could hold other bytes than ",
        file.path));
  }
  std::vector<std::string> differences;
  if (Attr(*info, st::kFingerprintKey) != file.fingerprint) {
    differences.push_back(absl::StrCat("its fingerprint is '",
                                       Attr(*info, st::kFingerprintKey), "'"));
  }
  if (info->size != file.identity.size) {
    differences.push_back(absl::StrCat("it holds ", info->size, " bytes, the file ",
                                       file.identity.size));
  }
  if (info->location != location) {
    differences.push_back(absl::StrCat("it is at ", info->location));
  }
  if (!differences.empty()) {
    return absl::AlreadyExistsError(absl::StrCat("buffer ", name, " exists and is not ",
                                                 file.path, "'s: ",
                                                 absl::StrJoin(differences, "; ")));
  }
  if (info->state != BufferState::kSealed) {
    return absl::AlreadyExistsError(
        absl::StrCat("buffer ", name, " is being loaded (not sealed yet; created by pid ",
                     info->creator_pid, "): run again once it is sealed"));
  }
  return *info;
}

void PrintPut(const Output& output, const st::File& file, const BufferInfo& info,
              const TransferReport* report) {
  if (output.json) {
    Json json = BufferJson(info);
    if (report != nullptr) json = WithTransferReport(std::move(json), *report);
    json["already_loaded"] = report == nullptr;
    json["file"] = file.path;
    json["tensor_count"] = file.header.tensors.size();
    PrintJson(output.out, json);
    return;
  }
  output.out << "put " << info.name << ": " << (report == nullptr ? "already loaded: " : "")
             << SizeWithBytes(info.size) << " at " << info.location << ", mode "
             << FormatMode(info.mode) << ", " << StateName(info.state) << "; "
             << file.header.tensors.size() << " tensors from " << Printable(file.path);
  if (report != nullptr && !report->path.empty() && report->path != "cpu") {
    output.out << "; " << FormatTransferReport(*report);
  }
  output.out << '\n';
}

// The header length the attribute claims, if the buffer can hold it.
absl::StatusOr<std::uint64_t> ClaimedHeaderBytes(const BufferInfo& info) {
  const std::string text = Attr(info, st::kHeaderBytesKey);
  std::uint64_t bytes = 0;
  if (!absl::SimpleAtoi(text, &bytes) || bytes == 0 || bytes > st::kMaxHeaderBytes ||
      bytes > info.size || info.size - bytes < st::kLengthBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "attribute ", st::kHeaderBytesKey, "='", Printable(text.substr(0, 32)),
        "' is no header length for a buffer of ", info.size, " bytes (1 to ",
        st::kMaxHeaderBytes, ", and 8 more within the buffer)"));
  }
  return bytes;
}

// The buffer's first `count` bytes (count <= its size).
absl::StatusOr<std::string> ReadPrefix(Client& client, const BufferInfo& info,
                                       std::uint64_t count) {
  if (!info.location.starts_with("device:")) {
    absl::StatusOr<Buffer> buffer = client.Open(info.name, {.access = Access::kRead});
    if (!buffer.ok()) return buffer.status();
    const std::span<const std::byte> data = buffer->data();
    if (data.size() < count) {
      return absl::InternalError(absl::StrCat("the daemon mapped ", data.size(),
                                              " bytes of buffer ", info.name));
    }
    return std::string(reinterpret_cast<const char*>(data.data()), count);
  }
  // Device memory: the daemon copies the bytes to a staging buffer of
  // memctl's, slice by slice, as for get.
  if (absl::Status used = UseDeviceOf(client, info.location); !used.ok()) return used;
  absl::StatusOr<Buffer> buffer = client.Open(info.name, {.access = Access::kRead});
  if (!buffer.ok()) return buffer.status();
  if (buffer->device() < 0 || buffer->size() < count) {
    return absl::FailedPreconditionError(
        absl::StrCat("buffer ", info.name, " changed since memctl looked; run again"));
  }
  absl::StatusOr<Staging> staging = CreateStaging(client, count);
  if (!staging.ok()) return staging.status();
  std::string bytes;
  bytes.reserve(count);
  ProgressBar bar(nullptr, "");
  TransferReport report;
  while (bytes.size() < count) {
    const std::uint64_t offset = bytes.size();
    const std::uint64_t length = std::min(staging->slice_bytes(), count - offset);
    if (absl::Status copied = CopyAndWait(client, Region{&*buffer, offset, length},
                                          staging->SliceRegion(0, length), {}, bar, report);
        !copied.ok()) {
      return copied;
    }
    const std::span<std::byte> slice = staging->Slice(0, length);
    bytes.append(reinterpret_cast<const char*>(slice.data()), slice.size());
  }
  return bytes;
}

std::string ShapeText(const std::vector<std::uint64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

absl::Status RunPutSafetensors(Client& client, const PutOptions& options,
                               const Output& output) {
  const std::string file_step = "put --format safetensors";
  absl::StatusOr<st::File> file = st::ReadFile(options.file);
  if (!file.ok()) return Failed(file_step, file.status());
  absl::StatusOr<std::string> place = st::Place(options.location);
  if (!place.ok()) return Failed(file_step, place.status());
  // As the daemon names the location: "device:01" is device:1.
  const std::string location = Location::Parse(options.location)->ToString();
  const std::string name = st::BufferName(file->fingerprint, *place);
  const std::string step = absl::StrCat("put ", name);

  absl::StatusOr<std::optional<BufferInfo>> loaded = FindLoaded(client, name, *file, location);
  if (!loaded.ok()) return Failed(step, loaded.status());
  if (loaded->has_value()) {
    PrintPut(output, *file, **loaded, nullptr);
    return absl::OkStatus();
  }

  FileToBuffer request;
  request.step = step;
  request.file = options.file;
  request.name = name;
  request.create.location = location;
  request.create.mode = options.mode;
  request.create.retention = options.retention;
  request.create.numa = options.numa;
  request.create.persistence = Persistence::kPersistent;
  request.create.attrs = st::Attributes(*file);
  request.transfer = options.transfer;
  request.files = options.files;
  // Before a byte moves and again before the seal: the bytes in the buffer
  // must be those of the file state the name fingerprints.
  request.check_input = [&](const Input& input) {
    return st::CheckUnchanged(*file, input.fd.get());
  };
  absl::StatusOr<FileToBufferResult> result =
      CopyFileToBuffer(client, request, output.progress);
  if (absl::IsAlreadyExists(result.status())) {
    // Another loader created the name since FindLoaded looked.
    absl::StatusOr<std::optional<BufferInfo>> raced = FindLoaded(client, name, *file, location);
    if (!raced.ok()) return Failed(step, raced.status());
    if (raced->has_value()) {
      PrintPut(output, *file, **raced, nullptr);
      return absl::OkStatus();
    }
  }
  if (!result.ok()) return result.status();
  PrintPut(output, *file, result->info, &result->report);
  return absl::OkStatus();
}

bool IsSafetensorsBuffer(const BufferInfo& info) {
  return Attr(info, st::kFormatKey) == st::kFormatValue;
}

absl::StatusOr<st::Header> ReadBufferHeader(Client& client, const BufferInfo& info) {
  if (info.state != BufferState::kSealed) {
    return absl::FailedPreconditionError("not sealed yet: its bytes are still being written");
  }
  absl::StatusOr<std::uint64_t> claimed = ClaimedHeaderBytes(info);
  if (!claimed.ok()) return claimed.status();
  absl::StatusOr<std::string> prefix = ReadPrefix(client, info, st::kLengthBytes + *claimed);
  if (!prefix.ok()) return prefix.status();
  const std::string_view bytes = *prefix;
  absl::StatusOr<std::uint64_t> length =
      st::ParseHeaderLength(std::as_bytes(std::span(bytes.data(), st::kLengthBytes)), info.size);
  if (!length.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the buffer's first bytes: ",
                                                   length.status().message()));
  }
  if (*length != *claimed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the buffer's first 8 bytes say its header has ", *length, " bytes, attribute ",
        st::kHeaderBytesKey, " says ", *claimed));
  }
  return st::ParseHeader(bytes.substr(st::kLengthBytes), info.size);
}

void PrintTensors(std::ostream& out, const absl::StatusOr<st::Header>& header) {
  out << '\n';
  if (!header.ok()) {
    out << "tensors: cannot show them: "
        << Printable(absl::StrCat(absl::StatusCodeToString(header.status().code()), ": ",
                                  header.status().message()))
        << '\n';
    return;
  }
  out << header->tensors.size() << " tensors (header " << header->header_bytes
      << " bytes; tensor data from byte " << header->data_start() << ")\n";
  if (!header->tensors.empty()) {
    Table table({{"TENSOR"}, {"DTYPE"}, {"SHAPE"}, {"OFFSET", true}, {"BYTES", true}});
    for (const st::Tensor& tensor : header->tensors) {
      table.AddRow({tensor.name, tensor.dtype, ShapeText(tensor.shape),
                    absl::StrCat(header->data_start() + tensor.begin),
                    absl::StrCat(tensor.end - tensor.begin)});
    }
    table.Print(out);
  }
  if (header->metadata.empty()) {
    out << "metadata: none\n";
    return;
  }
  out << "\nmetadata:\n";
  Table table({{"KEY"}, {"VALUE"}});
  for (const auto& [key, value] : header->metadata) table.AddRow({key, value});
  table.Print(out);
}

void AddTensorsJson(Json& json, const absl::StatusOr<st::Header>& header) {
  if (!header.ok()) {
    json["tensors_error"] = absl::StrCat(absl::StatusCodeToString(header.status().code()),
                                         ": ", header.status().message());
    return;
  }
  Json tensors = Json::array();
  for (const st::Tensor& tensor : header->tensors) {
    Json entry;
    entry["name"] = tensor.name;
    entry["dtype"] = tensor.dtype;
    entry["shape"] = tensor.shape;
    entry["offset"] = header->data_start() + tensor.begin;
    entry["size_bytes"] = tensor.end - tensor.begin;
    tensors.push_back(std::move(entry));
  }
  json["tensors"] = std::move(tensors);
  Json metadata = Json::object();
  for (const auto& [key, value] : header->metadata) metadata[key] = value;
  json["metadata"] = std::move(metadata);
}

}  // namespace memd::memctl
