#pragma once

// memctl and safetensors files (docs/safetensors.md): `put --format
// safetensors FILE` loads a file into the buffer its header and stat name.

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

}  // namespace memd::memctl
