#include "tools/memctl/safetensors_commands.h"

#include <unistd.h>

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"
#include "common/location.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/file_transfers.h"
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

}  // namespace memd::memctl
