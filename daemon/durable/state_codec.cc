#include "daemon/durable/state_codec.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/proto_wire.h"
#include "memd/durable/v1/state.pb.h"

namespace memd::durable {
namespace {

namespace pb = ::memd::durable::v1;

// A node number's bound (broker::kMaxNumaNodes, the kernel's MAX_NUMNODES).
constexpr int kMaxNumaNodes = 1024;

// Every proto field has exactly its struct field's type (uint32 for uid_t,
// int32 for a pid, ...), so no number is ever out of range on the way back;
// what a value means is Validate's to check.

void ToProto(const SegmentEntry& entry, pb::Segment& out) {
  out.set_id(entry.id);
  out.set_location(entry.location);
  out.set_device_uuid(entry.device_uuid);
  out.set_bytes(entry.bytes);
  out.set_small(entry.small);
  out.set_uid(entry.uid);
  out.set_gid(entry.gid);
  out.set_mode(entry.mode);
}

SegmentEntry FromProto(const pb::Segment& in) {
  return SegmentEntry{in.id(),  in.location(), in.device_uuid(), in.bytes(),
                      in.small(), in.uid(),    in.gid(),         in.mode()};
}

void ToProto(const BufferEntry& entry, pb::Buffer& out) {
  out.set_id(entry.id);
  out.set_name(entry.name);
  out.set_size(entry.size);
  out.set_location(entry.location);
  out.set_owner_uid(entry.owner_uid);
  out.set_owner_gid(entry.owner_gid);
  out.set_mode(entry.mode);
  out.set_sealed(entry.sealed);
  out.set_ephemeral(entry.ephemeral);
  out.set_unlinked(entry.unlinked);
  out.set_created_unix_ns(entry.created_unix_ns);
  out.set_sealed_unix_ns(entry.sealed_unix_ns);
  out.set_creator_pid(entry.creator_pid);
  for (const auto& [key, value] : entry.attrs) {
    pb::Attr* attr = out.add_attrs();
    attr->set_key(key);
    attr->set_value(value);
  }
  out.set_segment_id(entry.segment_id);
  out.set_offset(entry.offset);
  out.set_allocation_bytes(entry.allocation_bytes);
  out.set_retention(entry.retention);
  if (entry.numa_node >= 0) out.set_numa_node(entry.numa_node);
}

absl::StatusOr<BufferEntry> FromProto(const pb::Buffer& in) {
  BufferEntry entry;
  entry.id = in.id();
  entry.name = in.name();
  entry.size = in.size();
  entry.location = in.location();
  entry.owner_uid = in.owner_uid();
  entry.owner_gid = in.owner_gid();
  entry.mode = in.mode();
  entry.sealed = in.sealed();
  entry.ephemeral = in.ephemeral();
  entry.unlinked = in.unlinked();
  entry.created_unix_ns = in.created_unix_ns();
  entry.sealed_unix_ns = in.sealed_unix_ns();
  entry.creator_pid = in.creator_pid();
  for (const pb::Attr& attr : in.attrs()) {
    if (!entry.attrs.emplace(attr.key(), attr.value()).second) {
      return absl::DataLossError(
          absl::StrCat("durable state: buffer ", in.id(), " has an attribute key twice"));
    }
  }
  entry.segment_id = in.segment_id();
  entry.offset = in.offset();
  entry.allocation_bytes = in.allocation_bytes();
  entry.retention = in.retention();
  if (in.has_numa_node()) {
    if (in.numa_node() < 0 || in.numa_node() >= kMaxNumaNodes) {
      return absl::DataLossError(absl::StrCat("durable state: buffer ", in.id(),
                                              " has NUMA node ", in.numa_node()));
    }
    entry.numa_node = in.numa_node();
  }
  return entry;
}

void ToProto(const SessionEntry& entry, pb::Session& out) {
  out.set_id(entry.id);
  out.set_uid(entry.uid);
  out.set_token_digest(entry.token_digest);
}

SessionEntry FromProto(const pb::Session& in) {
  return SessionEntry{in.id(), in.uid(), in.token_digest()};
}

void ToProto(const LeaseEntry& entry, pb::Lease& out) {
  out.set_id(entry.id);
  out.set_session_id(entry.session_id);
  out.set_buffer_id(entry.buffer_id);
  out.set_writable(entry.writable);
}

LeaseEntry FromProto(const pb::Lease& in) {
  return LeaseEntry{in.id(), in.session_id(), in.buffer_id(), in.writable()};
}

struct ChangeToProto {
  pb::Change& out;
  void operator()(const SegmentEntry& entry) const { ToProto(entry, *out.mutable_put_segment()); }
  void operator()(const DropSegment& drop) const { out.mutable_drop_segment()->set_id(drop.id); }
  void operator()(const BufferEntry& entry) const { ToProto(entry, *out.mutable_put_buffer()); }
  void operator()(const DropBuffer& drop) const { out.mutable_drop_buffer()->set_id(drop.id); }
  void operator()(const SetGeneration& set) const {
    out.mutable_set_generation()->set_generation(set.generation);
  }
  void operator()(const SessionEntry& entry) const { ToProto(entry, *out.mutable_put_session()); }
  void operator()(const DropSession& drop) const { out.mutable_drop_session()->set_id(drop.id); }
  void operator()(const LeaseEntry& entry) const { ToProto(entry, *out.mutable_put_lease()); }
  void operator()(const DropLease& drop) const { out.mutable_drop_lease()->set_id(drop.id); }
};

absl::StatusOr<Change> FromProto(const pb::Change& in) {
  switch (in.kind_case()) {
    case pb::Change::kPutSegment:
      return FromProto(in.put_segment());
    case pb::Change::kDropSegment:
      return DropSegment{in.drop_segment().id()};
    case pb::Change::kPutBuffer: {
      absl::StatusOr<BufferEntry> entry = FromProto(in.put_buffer());
      if (!entry.ok()) return entry.status();
      return *std::move(entry);
    }
    case pb::Change::kDropBuffer:
      return DropBuffer{in.drop_buffer().id()};
    case pb::Change::kSetGeneration:
      return SetGeneration{in.set_generation().generation()};
    case pb::Change::kPutSession:
      return FromProto(in.put_session());
    case pb::Change::kDropSession:
      return DropSession{in.drop_session().id()};
    case pb::Change::kPutLease:
      return FromProto(in.put_lease());
    case pb::Change::kDropLease:
      return DropLease{in.drop_lease().id()};
    case pb::Change::KIND_NOT_SET:
      break;
  }
  return absl::DataLossError(
      "durable state: a change of no kind, or of one this build does not know");
}

template <typename Message>
bool Parse(std::string_view bytes, Message& message) {
  return bytes.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()) &&
         message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// A batch of one lease put or dropped, as protobuf writes it, without its
// message objects: the journal records one on every open and release over
// the fast control path (issue 28, target 4). Batch{changes: [Change{put_lease
// | drop_lease}]}, field numbers from the contract. False for any other
// batch.
bool EncodeLeaseBatch(std::span<const Change> batch, std::string& out) {
  using proto_wire::MessageFieldSize;
  using proto_wire::PutMessageHead;
  using proto_wire::PutVarintField;
  using proto_wire::VarintFieldSize;
  if (batch.size() != 1) return false;
  const auto* put = std::get_if<LeaseEntry>(&batch[0]);
  const auto* drop = std::get_if<DropLease>(&batch[0]);
  if (put == nullptr && drop == nullptr) return false;
  const std::size_t lease =
      put != nullptr ? VarintFieldSize(put->id) + VarintFieldSize(put->session_id) +
                           VarintFieldSize(put->buffer_id) + VarintFieldSize(put->writable)
                     : VarintFieldSize(drop->id);
  const std::size_t change = MessageFieldSize(lease);
  out.clear();
  out.reserve(MessageFieldSize(change));
  PutMessageHead(pb::Batch::kChangesFieldNumber, change, out);
  PutMessageHead(put != nullptr ? pb::Change::kPutLeaseFieldNumber
                                : pb::Change::kDropLeaseFieldNumber,
                 lease, out);
  if (put != nullptr) {
    PutVarintField(pb::Lease::kIdFieldNumber, put->id, out);
    PutVarintField(pb::Lease::kSessionIdFieldNumber, put->session_id, out);
    PutVarintField(pb::Lease::kBufferIdFieldNumber, put->buffer_id, out);
    PutVarintField(pb::Lease::kWritableFieldNumber, put->writable, out);
  } else {
    PutVarintField(pb::Drop::kIdFieldNumber, drop->id, out);
  }
  return true;
}

}  // namespace

void EncodeBatch(std::span<const Change> batch, std::string& out) {
  if (EncodeLeaseBatch(batch, out)) return;
  pb::Batch proto;
  for (const Change& change : batch) std::visit(ChangeToProto{*proto.add_changes()}, change);
  proto.SerializeToString(&out);
}

std::string EncodeBatch(std::span<const Change> batch) {
  std::string out;
  EncodeBatch(batch, out);
  return out;
}

absl::StatusOr<std::vector<Change>> DecodeBatch(std::string_view bytes) {
  pb::Batch proto;
  if (!Parse(bytes, proto)) return absl::DataLossError("durable state: a frame is not a batch");
  std::vector<Change> batch;
  batch.reserve(proto.changes_size());
  for (const pb::Change& change : proto.changes()) {
    absl::StatusOr<Change> decoded = FromProto(change);
    if (!decoded.ok()) return decoded.status();
    batch.push_back(*std::move(decoded));
  }
  return batch;
}

std::string EncodeSnapshot(const DurableState& state) {
  pb::Snapshot proto;
  proto.set_whole(true);
  proto.set_generation(state.generation);
  for (const auto& [id, segment] : state.segments) ToProto(segment, *proto.add_segments());
  for (const auto& [id, buffer] : state.buffers) ToProto(buffer, *proto.add_buffers());
  for (const auto& [id, session] : state.sessions) ToProto(session, *proto.add_sessions());
  for (const auto& [id, lease] : state.leases) ToProto(lease, *proto.add_leases());
  return proto.SerializeAsString();
}

absl::StatusOr<DurableState> DecodeSnapshot(std::string_view bytes) {
  pb::Snapshot proto;
  if (!Parse(bytes, proto) || !proto.whole()) {
    return absl::DataLossError("durable state: the first frame is not a snapshot");
  }
  DurableState state;
  state.generation = proto.generation();
  for (const pb::Segment& segment : proto.segments()) {
    if (!state.segments.emplace(segment.id(), FromProto(segment)).second) {
      return absl::DataLossError(
          absl::StrCat("durable state: the snapshot holds segment ", segment.id(), " twice"));
    }
  }
  for (const pb::Buffer& buffer : proto.buffers()) {
    absl::StatusOr<BufferEntry> entry = FromProto(buffer);
    if (!entry.ok()) return entry.status();
    if (!state.buffers.emplace(buffer.id(), *std::move(entry)).second) {
      return absl::DataLossError(
          absl::StrCat("durable state: the snapshot holds buffer ", buffer.id(), " twice"));
    }
  }
  for (const pb::Session& session : proto.sessions()) {
    if (!state.sessions.emplace(session.id(), FromProto(session)).second) {
      return absl::DataLossError(
          absl::StrCat("durable state: the snapshot holds session ", session.id(), " twice"));
    }
  }
  for (const pb::Lease& lease : proto.leases()) {
    if (!state.leases.emplace(lease.id(), FromProto(lease)).second) {
      return absl::DataLossError(
          absl::StrCat("durable state: the snapshot holds lease ", lease.id(), " twice"));
    }
  }
  return state;
}

}  // namespace memd::durable
