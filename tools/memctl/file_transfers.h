#pragma once

// Moving bytes between files and named buffers, shared by put, get and cp:
// host buffers are read into or written from memctl's mapping directly;
// device buffers go through memctl's staging slices and the daemon's
// transfer engine (staged_copy.h).

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "memd/client.h"
#include "tools/memctl/commands.h"
#include "tools/memctl/file_io.h"
#include "tools/memctl/format.h"

namespace memd::memctl {

struct FileToBuffer {
  std::string step;  // Names the operation in errors: "put NAME", "cp A B".
  std::string file;  // A path, or "-" for stdin.
  std::string name;
  CreateOptions create;  // For a new buffer.
  // cp: an existing buffer still being written (and writable by this user)
  // takes the bytes at its start; put: an existing name is ALREADY_EXISTS.
  bool join_existing = false;
  bool seal = true;
  std::optional<std::uint64_t> size;  // --size
  std::uint64_t max_stream_bytes = kDefaultMaxStreamBytes;
  TransferFlags transfer;
  FileOptions files;
  // When set, runs on the opened input before a byte moves and again once
  // every byte is in, before the seal (put --format safetensors checks that
  // the file is still the one whose header named the buffer). An error
  // fails the copy as any other.
  std::function<absl::Status(const Input&)> check_input;
};

struct FileToBufferResult {
  BufferInfo info;  // After the seal.
  TransferReport report;
};

// Reads the file into the buffer and seals it (unless told not to). A
// buffer this call created is unlinked again on failure. Errors: the
// file's (step "read FILE"), INVALID_ARGUMENT (empty input; --size against
// the file's size; more bytes than an existing buffer holds), check_input's,
// the daemon's.
absl::StatusOr<FileToBufferResult> CopyFileToBuffer(Client& client,
                                                    const FileToBuffer& request,
                                                    std::ostream* progress);

struct BufferToFile {
  std::string step;
  std::string name;
  std::string output;  // Empty or "-": stdout.
  OpenOptions open;
  TransferFlags transfer;
  FileOptions files;
};

struct BufferToFileResult {
  BufferInfo info;
  TransferReport report;
};

// Writes a sealed buffer's bytes to the output (OutputFile: no link
// followed unless asked, an existing file emptied only once there are bytes
// to write).
absl::StatusOr<BufferToFileResult> CopyBufferToFile(Client& client,
                                                    const BufferToFile& request,
                                                    std::ostream* progress);

// The daemon's copy options for `flags`, the deadline counted from now.
CopyOptions CopyOptionsFor(const TransferFlags& flags);

}  // namespace memd::memctl
