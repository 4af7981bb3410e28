#include "tools/memctl/file_transfers.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include <algorithm>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "tools/memctl/device_context.h"
#include "tools/memctl/failure.h"
#include "tools/memctl/file_io.h"
#include "tools/memctl/input_reader.h"
#include "tools/memctl/output_file.h"
#include "tools/memctl/progress.h"
#include "tools/memctl/staged_copy.h"

namespace memd::memctl {
namespace {

// memctl reads into (or writes from) a host buffer's mapping itself, in
// pieces this large so that a progress bar can follow.
constexpr std::size_t kPieceBytes = std::size_t{64} << 20;
// A regular file goes into a host buffer through the buffer's descriptor
// (Buffer::WriteFromFile, several threads), in pieces this large.
constexpr std::uint64_t kSendPieceBytes = std::uint64_t{512} << 20;

// put's input and how many bytes it brings: a regular file's size, --size,
// or (streams of unknown size) everything, collected first, bounded.
struct SizedInput {
  Input input;
  Collected collected;
  bool collected_all = false;
  std::uint64_t size = 0;
};

absl::StatusOr<SizedInput> OpenSizedInput(const FileToBuffer& request) {
  absl::StatusOr<Input> input = OpenInput(request.file, request.files);
  if (!input.ok()) return input.status();
  SizedInput sized;
  sized.input = *std::move(input);
  Input& in = sized.input;
  if (request.size.has_value()) {
    sized.size = *request.size;
    // A file that claims 0 bytes (files under /proc do) is read as a stream.
    if (in.kind == Input::Kind::kFile && in.size.value_or(0) > 0 && *in.size != sized.size) {
      return Failed(request.step, absl::InvalidArgumentError(absl::StrCat(
                                      in.label, " has ", *in.size, " bytes, not the ",
                                      sized.size, " of --size")));
    }
    in.size = sized.size;
  } else if (in.size.has_value() && *in.size > 0) {
    sized.size = *in.size;
  } else {
    // Unknown size, or a file that claims 0 bytes: collected first, bounded.
    in.size.reset();
    absl::StatusOr<Collected> bytes = ReadToEnd(in, request.max_stream_bytes);
    if (!bytes.ok()) return bytes.status();
    sized.collected = *std::move(bytes);
    sized.collected_all = true;
    sized.size = sized.collected.size;
  }
  if (sized.size == 0) {
    return Failed(request.step, absl::InvalidArgumentError(absl::StrCat(
                                    in.label, " is empty; a buffer holds at least 1 byte")));
  }
  return sized;
}

// The buffer the bytes go to, and whether this call created it.
struct Destination {
  Buffer buffer;
  bool created = false;
};

absl::StatusOr<Destination> OpenDestination(Client& client, const FileToBuffer& request,
                                            std::uint64_t size) {
  std::string location = request.create.location;
  std::optional<BufferInfo> existing;
  if (request.join_existing) {
    if (absl::StatusOr<BufferInfo> info = client.Stat(request.name); info.ok()) {
      existing = *info;
      location = info->location;
    }
  }
  if (absl::Status used = UseDeviceOf(client, location); !used.ok()) {
    return Failed(request.step, used);
  }
  Destination destination;
  if (existing.has_value()) {
    absl::StatusOr<Buffer> buffer =
        client.Open(request.name, {.access = Access::kReadWrite, .keep_descriptor = true});
    if (!buffer.ok()) return Failed(request.step, buffer.status());
    if (buffer->size() < size) {
      return Failed(request.step, absl::InvalidArgumentError(absl::StrCat(
                                      "the source has ", size, " bytes; buffer ",
                                      request.name, " holds only ", buffer->size())));
    }
    destination.buffer = *std::move(buffer);
    return destination;
  }
  CreateOptions create = request.create;
  create.location = location;
  create.keep_descriptor = true;  // For SendFile; device buffers keep none.
  absl::StatusOr<Buffer> buffer = client.Create(request.name, size, create);
  if (!buffer.ok()) return Failed(request.step, buffer.status());
  destination.buffer = *std::move(buffer);
  destination.created = true;
  return destination;
}

// A regular file into a host buffer through the buffer's descriptor: no
// page of memctl's fresh mapping faults, and several threads read
// (docs/benchmarks.md, "A file into a buffer"). The file's position ends
// past what was read, as a read's would.
absl::Status SendFile(const FileToBuffer& request, SizedInput& sized, Buffer& buffer,
                      std::ostream* progress, TransferReport& report) {
  Input& input = sized.input;
  const off_t start = ::lseek(input.fd.get(), 0, SEEK_CUR);
  if (start < 0) return Failed(absl::StrCat("read ", input.label), ErrnoStatus("lseek", errno));
  report.path = "cpu";
  report.file_io = "sendfile";
  ProgressBar bar(progress, request.step);
  const auto from = static_cast<std::uint64_t>(start);
  for (std::uint64_t done = 0; done < sized.size;) {
    const std::uint64_t piece = std::min(kSendPieceBytes, sized.size - done);
    absl::Status sent = buffer.WriteFromFile(input.fd.get(), from + done, piece, done,
                                             request.transfer.read_threads);
    if (sent.code() == absl::StatusCode::kOutOfRange) {
      // The file shrank since memctl measured it: as a read would say.
      return Failed(absl::StrCat("read ", input.label),
                    absl::FailedPreconditionError(absl::StrCat(
                        "the file ended after fewer than ", sized.size,
                        " bytes; did it change while memctl read it? (", sent.message(), ")")));
    }
    if (!sent.ok()) return Failed(absl::StrCat("read ", input.label), sent);
    if (request.transfer.cache == CachePolicy::kDrop) {
      // Advice: a failure leaves the pages cached, which is not wrong.
      (void)::posix_fadvise(input.fd.get(), static_cast<off_t>(from + done),
                            static_cast<off_t>(piece), POSIX_FADV_DONTNEED);
    }
    done += piece;
    report.bytes = done;
    bar.Update(done, sized.size);
  }
  if (::lseek(input.fd.get(), start + static_cast<off_t>(sized.size), SEEK_SET) < 0) {
    return Failed(absl::StrCat("read ", input.label), ErrnoStatus("lseek", errno));
  }
  InputReader reader(input, nullptr, request.size.has_value(), sized.size);
  return reader.CheckEnd();
}

// The reader a regular file for a device buffer gets from --direct-io,
// --read-threads and --cache. In auto mode, a file whose start the page
// cache holds is read from there: O_DIRECT would go to the disk for bytes
// memory has (a cached 2 GiB file loaded at 2.0 GB/s with it, 3.4 without).
absl::StatusOr<std::unique_ptr<ParallelFileReader>> FileReaderFor(const TransferFlags& flags,
                                                                  const Input& input,
                                                                  std::uint64_t size) {
  FileReadOptions options;
  options.threads = flags.read_threads;
  options.cache = flags.cache;
  switch (flags.direct_io) {
    case DirectIoMode::kAlways:
      options.direct = DirectIo::kRequire;
      break;
    case DirectIoMode::kNever:
      options.direct = DirectIo::kOff;
      break;
    case DirectIoMode::kAuto:
      options.direct = FileMostlyCached(input.fd.get(), 0, size) ? DirectIo::kOff
                                                                       : DirectIo::kPrefer;
      break;
  }
  absl::StatusOr<std::unique_ptr<ParallelFileReader>> reader =
      ParallelFileReader::Create(input.fd.get(), options);
  if (!reader.ok()) {
    return Failed(absl::StrCat("read ", input.label),
                  absl::Status(reader.status().code(),
                               absl::StrCat(reader.status().message(),
                                            flags.direct_io == DirectIoMode::kAlways
                                                ? " (drop --direct-io)"
                                                : "")));
  }
  return reader;
}

// A regular file into a device buffer: several threads read it into the
// staging slices while the daemon copies the slices read before
// (docs/benchmarks.md, "A file into a device buffer"). The file's position
// ends past what was read, as a read's would.
absl::Status StageInRegularFile(Client& client, const FileToBuffer& request,
                                SizedInput& sized, Staging& staging, Buffer& buffer,
                                ProgressBar& bar, TransferReport& report) {
  Input& input = sized.input;
  const off_t start = ::lseek(input.fd.get(), 0, SEEK_CUR);
  if (start < 0) return Failed(absl::StrCat("read ", input.label), ErrnoStatus("lseek", errno));
  if (request.transfer.direct_io == DirectIoMode::kAlways &&
      start % ParallelFileReader::kDirectAlignment != 0) {
    // stdin, a file something read part of: O_DIRECT needs aligned offsets.
    return Failed(absl::StrCat("read ", input.label),
                  absl::FailedPreconditionError(absl::StrCat(
                      "O_DIRECT reads from a multiple of ",
                      ParallelFileReader::kDirectAlignment, " bytes; the file is at byte ",
                      start, " (drop --direct-io)")));
  }
  {
    // Gone before the staging it reads into.
    absl::StatusOr<std::unique_ptr<ParallelFileReader>> reader =
        FileReaderFor(request.transfer, input, sized.size);
    if (!reader.ok()) return reader.status();
    absl::Status staged = StageInFile(client, staging, buffer, sized.size, **reader,
                                      static_cast<std::uint64_t>(start), input.label,
                                      CopyOptionsFor(request.transfer), bar, report);
    // After the reads: a filesystem that refused O_DIRECT part-way, or a
    // file read from an unaligned position, went through the page cache.
    report.file_io = (*reader)->direct_bytes() > 0 ? "direct" : "buffered";
    if (!staged.ok()) return staged;
  }
  if (::lseek(input.fd.get(), start + static_cast<off_t>(sized.size), SEEK_SET) < 0) {
    return Failed(absl::StrCat("read ", input.label), ErrnoStatus("lseek", errno));
  }
  InputReader reader(input, nullptr, request.size.has_value(), sized.size);
  return reader.CheckEnd();
}

// Moves the input's bytes into the buffer: a regular file through a host
// buffer's descriptor, other input straight into its mapping, through
// staging for device memory.
absl::Status Fill(Client& client, const FileToBuffer& request, SizedInput& sized,
                  Buffer& buffer, std::ostream* progress, TransferReport& report) {
  if (!buffer.mutable_data().empty() && !sized.collected_all &&
      sized.input.kind == Input::Kind::kFile) {
    return SendFile(request, sized, buffer, progress, report);
  }
  InputReader reader(sized.input, sized.collected_all ? &sized.collected : nullptr,
                     request.size.has_value(), sized.size);
  if (std::span<std::byte> mapped = buffer.mutable_data(); !mapped.empty()) {
    if (mapped.size() < sized.size) {
      return absl::InternalError(absl::StrCat("the daemon mapped ", mapped.size(),
                                              " bytes for a buffer of ", buffer.size()));
    }
    report.path = "cpu";
    report.file_io = sized.collected_all ? "" : "buffered";
    ProgressBar bar(progress, request.step);
    for (std::span<std::byte> rest = mapped.first(sized.size); !rest.empty();) {
      const std::span<std::byte> piece = rest.first(std::min(rest.size(), kPieceBytes));
      if (absl::Status status = reader.Read(piece); !status.ok()) return status;
      rest = rest.subspan(piece.size());
      report.bytes += piece.size();
      bar.Update(report.bytes, sized.size);
    }
    return reader.CheckEnd();
  }
  if (buffer.device() < 0) {
    return absl::InternalError(absl::StrCat("the daemon mapped no memory for buffer ",
                                            buffer.name()));
  }
  absl::StatusOr<Staging> staging = CreateStaging(client, sized.size);
  if (!staging.ok()) return staging.status();
  ProgressBar bar(progress, request.step);
  if (!sized.collected_all && sized.input.kind == Input::Kind::kFile) {
    return StageInRegularFile(client, request, sized, *staging, buffer, bar, report);
  }
  // A stream or a device (/dev/zero with --size): one reader, in order.
  if (!sized.collected_all) report.file_io = "buffered";
  return StageIn(client, *staging, buffer, sized.size, reader,
                 CopyOptionsFor(request.transfer), bar, report);
}

}  // namespace

CopyOptions CopyOptionsFor(const TransferFlags& flags) {
  CopyOptions options;
  options.priority = flags.priority;
  options.chunk_bytes = flags.chunk_bytes;
  if (flags.timeout.has_value()) options.deadline = absl::Now() + *flags.timeout;
  return options;
}

absl::StatusOr<FileToBufferResult> CopyFileToBuffer(Client& client,
                                                    const FileToBuffer& request,
                                                    std::ostream* progress) {
  absl::StatusOr<SizedInput> sized = OpenSizedInput(request);
  if (!sized.ok()) return sized.status();
  if (request.check_input) {
    if (absl::Status checked = request.check_input(sized->input); !checked.ok()) {
      return Failed(request.step, checked);
    }
  }
  absl::StatusOr<Destination> destination = OpenDestination(client, request, sized->size);
  if (!destination.ok()) return destination.status();
  Buffer& buffer = destination->buffer;

  FileToBufferResult result;
  result.report.source = request.file;
  result.report.destination = request.name;
  const absl::Time start = absl::Now();
  absl::Status status = Fill(client, request, *sized, buffer, progress, result.report);
  result.report.elapsed = absl::Now() - start;
  if (status.ok() && request.check_input) status = request.check_input(sized->input);
  if (status.ok() && request.seal) {
    status = Failed(absl::StrCat("seal ", request.name), buffer.Seal());
  }
  if (!status.ok()) {
    // Readers waiting for the seal would wait for nothing; a persistent
    // half-written buffer would also hold its memory until someone noticed.
    // A buffer someone else created is theirs to clean up.
    if (destination->created) (void)client.Unlink(request.name);
    return Failed(request.step, status);
  }
  result.info = buffer.info();
  return result;
}

absl::StatusOr<BufferToFileResult> CopyBufferToFile(Client& client,
                                                    const BufferToFile& request,
                                                    std::ostream* progress) {
  // A device buffer is opened in a context on its device: find out which
  // first (a buffer still being waited for is not on any device yet). An
  // open at a location maps the copy there, wherever the buffer lives.
  bool on_device = false;
  if (absl::StatusOr<BufferInfo> info = client.Stat(request.name); info.ok()) {
    const std::string& location =
        request.open.location.empty() ? info->location : request.open.location;
    on_device = location.starts_with("device:");
    if (absl::Status used = UseDeviceOf(client, location); !used.ok()) {
      return Failed(request.step, used);
    }
  }
  absl::StatusOr<Buffer> buffer = client.Open(request.name, request.open);
  if (!buffer.ok()) return Failed(request.step, buffer.status());
  if (buffer->device() >= 0 && !on_device) {
    return Failed(request.step, absl::FailedPreconditionError(
                                    "the buffer appeared on a device while memctl waited; "
                                    "run the command again"));
  }
  const bool to_stdout = request.output.empty() || request.output == "-";
  absl::StatusOr<OutputFile> file =
      to_stdout ? OutputFile::Stdout() : OutputFile::Open(request.output, request.files);
  if (!file.ok()) return Failed(request.step, file.status());

  BufferToFileResult result;
  result.info = buffer->info();
  result.report.source = request.name;
  result.report.destination = to_stdout ? std::string("-") : request.output;
  const absl::Time start = absl::Now();
  absl::Status status;
  if (buffer->device() < 0) {
    result.report.path = "cpu";
    ProgressBar bar(progress, request.step);
    for (std::span<const std::byte> rest = buffer->data(); !rest.empty() && status.ok();) {
      const std::span<const std::byte> piece = rest.first(std::min(rest.size(), kPieceBytes));
      status = file->Write(piece);
      rest = rest.subspan(piece.size());
      result.report.bytes += piece.size();
      bar.Update(result.report.bytes, buffer->size());
    }
  } else {
    absl::StatusOr<Staging> staging = CreateStaging(client, buffer->size());
    ProgressBar bar(progress, request.step);
    status = staging.ok() ? StageOut(client, *staging, *buffer, *file,
                                     CopyOptionsFor(request.transfer), bar, result.report)
                          : staging.status();
  }
  if (status.ok()) status = file->Close();
  result.report.elapsed = absl::Now() - start;
  if (!status.ok()) return Failed(request.step, status);
  return result;
}

}  // namespace memd::memctl
