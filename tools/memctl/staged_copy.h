#pragma once

// The copies memctl asks the daemon for, waited on with a progress bar and
// tallied for --json: one buffer to another, and a device buffer filled
// from (or drained to) a file through memctl's staging slices, pipelined so
// that reading slice i overlaps the daemon's copy of slice i-1. The staging
// and the file pipeline are libmemd's (client/src/staging.h: what
// Buffer::WriteFromFile does for a device buffer); memctl adds its reader
// flags, its progress bar and its report.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/src/staging.h"
#include "common/file_reader.h"
#include "memd/client.h"
#include "tools/memctl/format.h"
#include "tools/memctl/input_reader.h"
#include "tools/memctl/output_file.h"
#include "tools/memctl/progress.h"

namespace memd::memctl {

using internal::Staging;

// memctl's staging buffer for a copy of `total` bytes (> 0), named
// ".memctl/staging-..." (Staging::Create); errors name the step "staging".
absl::StatusOr<Staging> CreateStaging(Client& client, std::uint64_t total);

// Copies `source` to `destination` (Client::Copy) and waits for the end,
// drawing `bar`. Adds bytes, path and retries to `report`. Errors: Copy's
// and the transfer's (Transfer::Wait); the caller names the step.
absl::Status CopyAndWait(Client& client, const Region& source, const Region& destination,
                         const CopyOptions& options, ProgressBar& bar,
                         TransferReport& report);

// Fills the first `size` bytes of the device buffer `destination` from
// `reader`, slice by slice through `staging`. Returns once every copy
// finished; on failure the copies still running are cancelled.
absl::Status StageIn(Client& client, Staging& staging, const Buffer& destination,
                     std::uint64_t size, InputReader& reader, const CopyOptions& options,
                     ProgressBar& bar, TransferReport& report);

// Fills the first `size` bytes of the device buffer `destination` with the
// file's bytes from `file_offset` (internal::StageInFile), drawing `bar`.
// Errors as StageIn's; the file ending early is FAILED_PRECONDITION naming
// `label`. The reader must be done with the staging before it goes: the
// caller destroys the reader first.
absl::Status StageInFile(Client& client, Staging& staging, const Buffer& destination,
                         std::uint64_t size, ParallelFileReader& reader,
                         std::uint64_t file_offset, const std::string& label,
                         const CopyOptions& options, ProgressBar& bar,
                         TransferReport& report);

// Writes the device buffer `source` to `out`, slice by slice through
// `staging`.
absl::Status StageOut(Client& client, Staging& staging, const Buffer& source,
                      OutputFile& out, const CopyOptions& options, ProgressBar& bar,
                      TransferReport& report);

}  // namespace memd::memctl
