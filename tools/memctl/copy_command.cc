// cp SRC DST: a buffer to a buffer through the daemon's transfer engine; a
// file to a buffer as put does it, a buffer to a file as get does.

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tools/memctl/commands.h"
#include "tools/memctl/device_context.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/file_transfers.h"
#include "tools/memctl/format.h"
#include "tools/memctl/operand.h"
#include "tools/memctl/progress.h"
#include "tools/memctl/staged_copy.h"

namespace memd::memctl {
namespace {

struct Copied {
  TransferReport report;
  bool sealed = false;
};

absl::StatusOr<Buffer> OpenSource(Client& client, const CopyCommandOptions& options,
                                  const std::string& step) {
  if (absl::StatusOr<BufferInfo> info = client.Stat(options.source); info.ok()) {
    if (absl::Status used = UseDeviceOf(client, info->location); !used.ok()) {
      return Failed(step, used);
    }
  }
  absl::StatusOr<Buffer> source = client.Open(
      options.source,
      {.access = Access::kRead, .wait = options.wait, .owner = options.owner});
  if (!source.ok()) return Failed(absl::StrCat(step, ": source"), source.status());
  return source;
}

// An existing destination still being written is joined; otherwise a new
// one is created at --location (default: where the source is).
absl::StatusOr<std::pair<Buffer, bool>> OpenDestination(Client& client,
                                                        const CopyCommandOptions& options,
                                                        const Buffer& source,
                                                        const std::string& step) {
  const std::string what = absl::StrCat(step, ": destination");
  absl::StatusOr<BufferInfo> existing = client.Stat(options.destination);
  std::string location = options.location.empty() ? source.info().location : options.location;
  if (existing.ok()) location = existing->location;
  if (absl::Status used = UseDeviceOf(client, location); !used.ok()) {
    return Failed(what, used);
  }
  if (existing.ok()) {
    absl::StatusOr<Buffer> buffer =
        client.Open(options.destination, {.access = Access::kReadWrite});
    if (!buffer.ok()) return Failed(what, buffer.status());
    if (buffer->size() < source.size()) {
      return Failed(what, absl::InvalidArgumentError(absl::StrCat(
                              "buffer ", options.destination, " holds ", buffer->size(),
                              " bytes, fewer than the ", source.size(), " of ",
                              options.source)));
    }
    return std::make_pair(*std::move(buffer), false);
  }
  CreateOptions create;
  create.location = location;
  create.mode = options.mode;
  create.persistence = options.ephemeral ? Persistence::kEphemeral : Persistence::kPersistent;
  create.attrs = source.info().attrs;  // A copy reads as its source does.
  create.wait_for_memory = options.wait_for_memory;
  absl::StatusOr<Buffer> buffer = client.Create(options.destination, source.size(), create);
  if (!buffer.ok()) return Failed(what, buffer.status());
  return std::make_pair(*std::move(buffer), true);
}

absl::StatusOr<Copied> BufferToBuffer(Client& client, const CopyCommandOptions& options,
                                      const std::string& step, std::ostream* progress) {
  absl::StatusOr<Buffer> source = OpenSource(client, options, step);
  if (!source.ok()) return source.status();
  auto destination = OpenDestination(client, options, *source, step);
  if (!destination.ok()) return destination.status();
  auto& [buffer, created] = *destination;

  Copied copied;
  copied.report.source = options.source;
  copied.report.destination = options.destination;
  ProgressBar bar(progress, step);
  const absl::Time start = absl::Now();
  absl::Status status =
      CopyAndWait(client, Region{&*source}, Region{&buffer, 0, source->size()},
                  CopyOptionsFor(options.transfer), bar, copied.report);
  copied.report.elapsed = absl::Now() - start;
  bar.Clear();
  if (status.ok() && options.seal) {
    status = Failed(absl::StrCat("seal ", options.destination), buffer.Seal());
    copied.sealed = status.ok();
  }
  if (!status.ok()) {
    if (created) (void)client.Unlink(options.destination);
    return Failed(step, status);
  }
  return copied;
}

absl::StatusOr<Copied> FileToBufferCopy(Client& client, const CopyCommandOptions& options,
                                        const std::string& step, std::ostream* progress) {
  FileToBuffer request;
  request.step = step;
  request.file = options.source;
  request.name = options.destination;
  request.create.location = options.location.empty() ? "host" : options.location;
  request.create.mode = options.mode;
  request.create.persistence =
      options.ephemeral ? Persistence::kEphemeral : Persistence::kPersistent;
  request.create.wait_for_memory = options.wait_for_memory;
  request.join_existing = true;
  request.seal = options.seal;
  request.size = options.size;
  request.max_stream_bytes = options.max_stream_bytes;
  request.transfer = options.transfer;
  request.files = options.files;
  absl::StatusOr<FileToBufferResult> result = CopyFileToBuffer(client, request, progress);
  if (!result.ok()) return result.status();
  return Copied{result->report, result->info.state == BufferState::kSealed};
}

absl::StatusOr<Copied> BufferToFileCopy(Client& client, const CopyCommandOptions& options,
                                        const std::string& step, std::ostream* progress) {
  BufferToFile request;
  request.step = step;
  request.name = options.source;
  request.output = options.destination;
  request.open = {.access = Access::kRead, .wait = options.wait, .owner = options.owner};
  request.transfer = options.transfer;
  request.files = options.files;
  absl::StatusOr<BufferToFileResult> result = CopyBufferToFile(client, request, progress);
  if (!result.ok()) return result.status();
  return Copied{result->report, false};
}

}  // namespace

absl::Status RunCopy(Client& client, const CopyCommandOptions& options,
                     const Output& output) {
  const std::string step = absl::StrCat("cp ", options.source, " ", options.destination);
  const bool from_buffer = options.source_kind == Operand::Kind::kBuffer;
  const bool to_buffer = options.destination_kind == Operand::Kind::kBuffer;
  absl::StatusOr<Copied> copied;
  if (from_buffer && to_buffer) {
    copied = BufferToBuffer(client, options, step, output.progress);
  } else if (to_buffer) {
    copied = FileToBufferCopy(client, options, step, output.progress);
  } else if (from_buffer) {
    copied = BufferToFileCopy(client, options, step, output.progress);
  } else {
    // The command line refuses this before connecting (cli.cc).
    return Failed(step, absl::InvalidArgumentError("one operand must be a buffer"));
  }
  if (!copied.ok()) return copied.status();
  // The bytes went to stdout: nothing else may go there.
  if (options.destination_kind == Operand::Kind::kStdio) return absl::OkStatus();
  if (output.json) {
    Json json = TransferReportJson(copied->report);
    json["sealed"] = copied->sealed;
    PrintJson(output.out, json);
  } else {
    output.out << "cp " << options.source << " -> " << options.destination << ": "
               << FormatTransferReport(copied->report)
               << (to_buffer && !copied->sealed ? ", not sealed" : "") << '\n';
  }
  return absl::OkStatus();
}

}  // namespace memd::memctl
