#include "daemon/transfer/plan.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/bytes.h"

namespace memd::transfer {
namespace {

constexpr std::uint64_t kMinChunk = std::uint64_t{1} << 20;

// The endpoint's device index, -1 for host memory; an error when the
// engine cannot reach it.
absl::StatusOr<int> Reach(const Endpoint& endpoint, absl::string_view side,
                          const std::vector<int>& ordinals) {
  if (endpoint.offset + endpoint.length < endpoint.offset) {
    return absl::InvalidArgumentError(absl::StrCat("the ", side, " range at offset ",
                                                   endpoint.offset, " of ", endpoint.length,
                                                   " bytes wraps around"));
  }
  if (!endpoint.memory.on_device()) {
    if (endpoint.memory.host == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the ", side, " is host memory the daemon has not mapped (no address)"));
    }
    return -1;
  }
  auto it = std::find(ordinals.begin(), ordinals.end(), endpoint.memory.device);
  if (it == ordinals.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", side, " is on device ", endpoint.memory.device,
        ", which the transfer engine does not drive (devices: ",
        ordinals.empty() ? "none" : absl::StrJoin(ordinals, ", "), ")"));
  }
  return static_cast<int>(it - ordinals.begin());
}

absl::Status CheckSizes(const TransferSpec& spec, const EngineOptions& options) {
  if (spec.source.length != spec.destination.length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the source has ", spec.source.length, " bytes and the destination ",
        spec.destination.length, "; a copy needs equal lengths"));
  }
  if (spec.source.length == 0) {
    return absl::InvalidArgumentError("a copy needs at least one byte; both lengths are 0");
  }
  if (spec.chunk_bytes != 0 &&
      (spec.chunk_bytes < kMinChunk || spec.chunk_bytes > options.slot_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk size ", spec.chunk_bytes, " bytes is outside ", FormatBytes(kMinChunk), " .. ",
        FormatBytes(options.slot_bytes), " (the staging slot size)"));
  }
  const Endpoint& source = spec.source;
  const Endpoint& destination = spec.destination;
  if (source.buffer_id != 0 && source.buffer_id == destination.buffer_id &&
      source.offset < destination.offset + destination.length &&
      destination.offset < source.offset + source.length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "source [", source.offset, ", +", source.length, ") and destination [",
        destination.offset, ", +", destination.length, ") overlap in buffer ",
        source.buffer_id));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RecordPtr> PlanTransfer(TransferSpec spec, const EngineOptions& options,
                                       const std::vector<int>& ordinals) {
  if (absl::Status sizes = CheckSizes(spec, options); !sizes.ok()) return sizes;
  absl::StatusOr<int> from = Reach(spec.source, "source", ordinals);
  if (!from.ok()) return from.status();
  absl::StatusOr<int> to = Reach(spec.destination, "destination", ordinals);
  if (!to.ok()) return to.status();

  auto record = std::make_shared<TransferRecord>();
  record->session = spec.session;
  record->uid = spec.uid;
  record->priority = spec.priority;
  record->deadline = spec.deadline;
  record->chunk_bytes = spec.chunk_bytes != 0 ? spec.chunk_bytes : options.chunk_bytes;
  if (*from < 0 && *to < 0) {
    record->direction = Direction::kHostToHost;
    record->path = DataPath::kCpu;
  } else if (*from < 0) {
    record->direction = Direction::kHostToDevice;
    record->path = spec.source.memory.registered ? DataPath::kDirect : DataPath::kStaged;
    record->device_index = *to;
  } else if (*to < 0) {
    record->direction = Direction::kDeviceToHost;
    record->path = spec.destination.memory.registered ? DataPath::kDirect : DataPath::kStaged;
    record->device_index = *from;
  } else {
    record->direction = Direction::kDeviceToDevice;
    record->path = *from == *to ? DataPath::kDevice : DataPath::kPeerStaged;
    record->device_index = *from;
    record->peer_index = *to;
  }
  record->lane = record->device_index < 0 ? kHostLane : DeviceLaneOf(record->device_index);
  record->source = std::move(spec.source);
  record->destination = std::move(spec.destination);
  return record;
}

}  // namespace memd::transfer
