#pragma once

// memctl and safetensors files (docs/safetensors.md): `put --format
// safetensors FILE` loads a file into the buffer its header and stat name,
// and `inspect` shows the tensors of such a buffer, parsed from the
// buffer's own bytes.

#include <ostream>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "memd/client.h"
#include "tools/memctl/commands.h"
#include "tools/memctl/format.h"
#include "tools/memctl/safetensors.h"

namespace memd::memctl {

// put --format safetensors: validates FILE's header, names the buffer
// safetensors/<fingerprint>/<place> with the contract's six attributes and
// puts the whole file there (as RunPut), unless a sealed buffer of that
// name with this fingerprint and size is there already: then it reports
// that ("already loaded") and succeeds. Uses options.file, location, mode,
// transfer, files. Errors: ReadFile's (step "put FILE"), ALREADY_EXISTS (a
// buffer of that name that is not this file's, or not sealed yet),
// PERMISSION_DENIED (one owned by neither this user nor root), ABORTED (the
// file changed while loading: the buffer is unlinked unsealed), put's.
absl::Status RunPutSafetensors(Client& client, const PutOptions& options,
                               const Output& output);

// Whether inspect shows tensors for this buffer (attribute format=safetensors).
bool IsSafetensorsBuffer(const BufferInfo& info);

// The header of the safetensors buffer `info` describes, read from its
// first 8 + N bytes: through the mapping for host and pinned buffers, for a
// device buffer copied to a staging buffer by the daemon. N comes from
// the safetensors.header_bytes attribute, trusted only up to the buffer's
// size and kMaxHeaderBytes, and must match the buffer's first 8 bytes.
// Errors: FAILED_PRECONDITION (not sealed yet), INVALID_ARGUMENT (the
// attribute or the bytes are no valid header), the daemon's and the CUDA
// driver's (UNAVAILABLE where memctl has none for a device buffer).
absl::StatusOr<safetensors::Header> ReadBufferHeader(Client& client, const BufferInfo& info);

// Text for inspect, after the buffer's fields: the tensors (name, dtype,
// shape, offset in the buffer, bytes) and metadata, or one line saying why
// they cannot be shown.
void PrintTensors(std::ostream& out, const absl::StatusOr<safetensors::Header>& header);

// inspect --json: adds "tensors" (name, dtype, shape, offset, size_bytes)
// and "metadata", or "tensors_error" when the header cannot be read.
void AddTensorsJson(Json& json, const absl::StatusOr<safetensors::Header>& header);

}  // namespace memd::memctl
