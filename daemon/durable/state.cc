#include "daemon/durable/state.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/attrs.h"
#include "common/location.h"
#include "common/names.h"

namespace memd::durable {
namespace {

constexpr std::uint32_t kMaxMode = 07777;

using LeasesByBuffer = std::set<std::pair<std::uint64_t, std::uint64_t>>;

struct Applier {
  DurableState& state;
  // The (buffer id, lease id) of every lease in `state`, kept so; null:
  // DropBuffer scans every lease instead.
  LeasesByBuffer* by_buffer = nullptr;

  void operator()(const SegmentEntry& entry) const { state.segments[entry.id] = entry; }
  void operator()(const DropSegment& drop) const { state.segments.erase(drop.id); }
  void operator()(const BufferEntry& entry) const { state.buffers[entry.id] = entry; }
  void operator()(const DropBuffer& drop) const {
    state.buffers.erase(drop.id);
    if (by_buffer != nullptr) {
      auto it = by_buffer->lower_bound({drop.id, 0});
      while (it != by_buffer->end() && it->first == drop.id) {
        state.leases.erase(it->second);
        it = by_buffer->erase(it);
      }
      return;
    }
    // Usually none: memd frees a buffer once its leases ended.
    if (state.leases.empty()) return;
    std::erase_if(state.leases,
                  [&](const auto& lease) { return lease.second.buffer_id == drop.id; });
  }
  void operator()(const SetGeneration& set) const { state.generation = set.generation; }
  void operator()(const SessionEntry& entry) const { state.sessions[entry.id] = entry; }
  void operator()(const DropSession& drop) const {
    state.sessions.erase(drop.id);
    std::erase_if(state.leases, [&](const auto& lease) {
      if (lease.second.session_id != drop.id) return false;
      Unindex(lease.first, lease.second);
      return true;
    });
  }
  void operator()(const LeaseEntry& entry) const {
    auto [it, added] = state.leases.try_emplace(entry.id, entry);
    if (!added) {
      Unindex(it->first, it->second);
      it->second = entry;
    }
    if (by_buffer != nullptr) by_buffer->emplace(entry.buffer_id, entry.id);
  }
  void operator()(const DropLease& drop) const {
    auto it = state.leases.find(drop.id);
    if (it == state.leases.end()) return;
    Unindex(it->first, it->second);
    state.leases.erase(it);
  }

  void Unindex(std::uint64_t id, const LeaseEntry& lease) const {
    if (by_buffer != nullptr) by_buffer->erase({lease.buffer_id, id});
  }
};

absl::Status SessionLoss(const SessionEntry& session, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("durable state: session ", session.id, " ", why));
}

absl::Status LeaseLoss(const LeaseEntry& lease, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("durable state: lease ", lease.id, " ", why));
}

absl::Status SegmentLoss(const SegmentEntry& segment, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("durable state: segment ", segment.id, " ", why));
}

absl::Status BufferLoss(const BufferEntry& buffer, absl::string_view why) {
  return absl::DataLossError(absl::StrCat("durable state: buffer ", buffer.id, " (",
                                          QuotedForMessage(buffer.name), ") ", why));
}

absl::Status ValidateSegment(std::uint64_t key, const SegmentEntry& segment) {
  if (segment.id == 0) return SegmentLoss(segment, "has id 0");
  if (segment.id != key) {
    return SegmentLoss(segment, absl::StrCat("is stored under id ", key));
  }
  if (segment.bytes == 0) return SegmentLoss(segment, "has 0 bytes");
  if (absl::StatusOr<Location> location = Location::Parse(segment.location); !location.ok()) {
    return SegmentLoss(segment, absl::StrCat("has a bad location: ", location.status().message()));
  }
  if (segment.mode > kMaxMode) {
    return SegmentLoss(segment, absl::StrFormat("has mode 0%o, beyond 07777", segment.mode));
  }
  return absl::OkStatus();
}

// One buffer against its own rules and its segment's; not against other
// buffers (ValidateLayout, ValidateNames).
absl::Status ValidateBuffer(std::uint64_t key, const BufferEntry& buffer,
                            const DurableState& state) {
  if (buffer.id == 0) return BufferLoss(buffer, "has id 0");
  if (buffer.id != key) return BufferLoss(buffer, absl::StrCat("is stored under id ", key));
  if (absl::Status name = ValidateBufferName(buffer.name); !name.ok()) {
    return BufferLoss(buffer, absl::StrCat("has a bad name: ", name.message()));
  }
  if (absl::Status attrs = ValidateAttrs(buffer.attrs); !attrs.ok()) {
    return BufferLoss(buffer, absl::StrCat("has bad attributes: ", attrs.message()));
  }
  if (buffer.mode > kMaxMode) {
    return BufferLoss(buffer, absl::StrFormat("has mode 0%o, beyond 07777", buffer.mode));
  }
  if (buffer.sealed != (buffer.sealed_unix_ns != 0)) {
    return BufferLoss(buffer, absl::StrCat("is ", buffer.sealed ? "" : "not ",
                                           "sealed but its seal time is ",
                                           buffer.sealed_unix_ns));
  }
  absl::StatusOr<Location> location = Location::Parse(buffer.location);
  if (!location.ok()) return BufferLoss(buffer, absl::StrCat("has a bad location: ", location.status().message()));
  if (buffer.size == 0) return BufferLoss(buffer, "has size 0");
  if (buffer.size > buffer.allocation_bytes) {
    return BufferLoss(buffer, absl::StrCat("has size ", buffer.size, " in an allocation of ",
                                           buffer.allocation_bytes, " bytes"));
  }
  auto it = state.segments.find(buffer.segment_id);
  if (it == state.segments.end()) {
    return BufferLoss(buffer, absl::StrCat("is in unknown segment ", buffer.segment_id));
  }
  const SegmentEntry& segment = it->second;
  // The segment already passed ValidateSegment, so its location parses.
  if (*location != *Location::Parse(segment.location)) {
    return BufferLoss(buffer, absl::StrCat("is at ", location->ToString(), " but its segment ",
                                           segment.id, " is at ", segment.location));
  }
  if (buffer.owner_uid != segment.uid || buffer.owner_gid != segment.gid ||
      buffer.mode != segment.mode) {
    return BufferLoss(buffer, absl::StrFormat(
                                  "is uid %d gid %d mode 0%o but its segment %d serves "
                                  "uid %d gid %d mode 0%o",
                                  buffer.owner_uid, buffer.owner_gid, buffer.mode, segment.id,
                                  segment.uid, segment.gid, segment.mode));
  }
  // end = offset + allocation_bytes, without wrapping.
  if (buffer.offset > segment.bytes || buffer.allocation_bytes > segment.bytes - buffer.offset) {
    return BufferLoss(buffer, absl::StrCat("spans [", buffer.offset, ", +",
                                           buffer.allocation_bytes, ") outside segment ",
                                           segment.id, " of ", segment.bytes, " bytes"));
  }
  return absl::OkStatus();
}

// No two buffers of one segment overlap (each is inside its segment already).
absl::Status ValidateLayout(const DurableState& state) {
  struct Span {
    std::uint64_t segment_id, offset, bytes, id;
    auto operator<=>(const Span&) const = default;
  };
  std::vector<Span> spans;
  spans.reserve(state.buffers.size());
  for (const auto& [id, buffer] : state.buffers) {
    spans.push_back({buffer.segment_id, buffer.offset, buffer.allocation_bytes, id});
  }
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    const Span& before = spans[i - 1];
    const Span& after = spans[i];
    if (before.segment_id == after.segment_id && before.offset + before.bytes > after.offset) {
      return BufferLoss(state.buffers.at(after.id),
                        absl::StrCat("at [", after.offset, ", +", after.bytes,
                                     ") overlaps buffer ", before.id, " at [", before.offset,
                                     ", +", before.bytes, ") in segment ", after.segment_id));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNames(const DurableState& state) {
  std::set<std::string_view> names;
  for (const auto& [id, buffer] : state.buffers) {
    if (buffer.unlinked) continue;
    if (!names.insert(buffer.name).second) {
      return BufferLoss(buffer, "has the name of another linked buffer");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSession(std::uint64_t key, const SessionEntry& session) {
  if (session.id == 0) return SessionLoss(session, "has id 0");
  if (session.id != key) return SessionLoss(session, absl::StrCat("is stored under id ", key));
  if (session.token_digest.size() != kTokenDigestBytes) {
    return SessionLoss(session, absl::StrCat("has a token digest of ", session.token_digest.size(),
                                             " bytes, not ", kTokenDigestBytes));
  }
  return absl::OkStatus();
}

absl::Status ValidateLease(std::uint64_t key, const LeaseEntry& lease, const DurableState& state) {
  if (lease.id == 0) return LeaseLoss(lease, "has id 0");
  if (lease.id != key) return LeaseLoss(lease, absl::StrCat("is stored under id ", key));
  if (!state.sessions.contains(lease.session_id)) {
    return LeaseLoss(lease, absl::StrCat("is of unknown session ", lease.session_id));
  }
  if (!state.buffers.contains(lease.buffer_id)) {
    return LeaseLoss(lease, absl::StrCat("is on unknown buffer ", lease.buffer_id));
  }
  return absl::OkStatus();
}

}  // namespace

void Apply(const Change& change, DurableState& state) { std::visit(Applier{state}, change); }

IndexedState::IndexedState(DurableState state) : state_(std::move(state)) {
  for (const auto& [id, lease] : state_.leases) leases_by_buffer_.emplace(lease.buffer_id, id);
}

void IndexedState::Apply(const Change& change) {
  std::visit(Applier{state_, &leases_by_buffer_}, change);
}

DurableState IndexedState::Take() && {
  DurableState taken = std::exchange(state_, {});
  leases_by_buffer_.clear();
  return taken;
}

absl::Status Validate(const DurableState& state) {
  for (const auto& [id, segment] : state.segments) {
    if (absl::Status status = ValidateSegment(id, segment); !status.ok()) return status;
  }
  for (const auto& [id, buffer] : state.buffers) {
    if (absl::Status status = ValidateBuffer(id, buffer, state); !status.ok()) return status;
  }
  if (absl::Status status = ValidateLayout(state); !status.ok()) return status;
  if (absl::Status status = ValidateNames(state); !status.ok()) return status;
  for (const auto& [id, session] : state.sessions) {
    if (absl::Status status = ValidateSession(id, session); !status.ok()) return status;
  }
  for (const auto& [id, lease] : state.leases) {
    if (absl::Status status = ValidateLease(id, lease, state); !status.ok()) return status;
  }
  return absl::OkStatus();
}

std::string SegmentFdName(std::uint64_t segment_id) {
  return absl::StrCat("memd.segment.", segment_id);
}

std::string StateFdName(std::uint64_t epoch) { return absl::StrCat("memd.state.", epoch); }

}  // namespace memd::durable
