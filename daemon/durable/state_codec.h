#pragma once

// The durable state's records as bytes (proto/memd/durable/v1/state.proto):
// batches of changes, the state file's frames, and snapshots, its first.
// Decoding checks each record on its own (types, a change of a known kind,
// each id and attribute key once); whether the state makes sense as a whole
// is Validate's to say.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/durable/state.h"

namespace memd::durable {

// Replaces `out` with the batch's bytes (reusing its capacity: the append
// path encodes into one scratch string).
void EncodeBatch(std::span<const Change> batch, std::string& out);
std::string EncodeBatch(std::span<const Change> batch);

// Errors: DATA_LOSS saying what is wrong (not a batch, a change of no or an
// unknown kind, an attribute key twice).
absl::StatusOr<std::vector<Change>> DecodeBatch(std::string_view bytes);

std::string EncodeSnapshot(const DurableState& state);

// Errors: DATA_LOSS saying what is wrong (not a snapshot, an id twice, an
// attribute key twice).
absl::StatusOr<DurableState> DecodeSnapshot(std::string_view bytes);

}  // namespace memd::durable
