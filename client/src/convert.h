#pragma once

// The client's one place from the wire protocol to the public structs of
// memd/client.h, which stay free of protobuf. One function per message; a
// field the daemon sends and the public struct has is read here and nowhere
// else (tests/client/convert_test.cc fails when a field of either side has
// no counterpart). The records with a field table (client/src/
// record_fields.h: pools, size classes, devices, transfer and durability
// statistics, memory waits, usage, sessions, replicas, advice, leaks,
// listed transfers) are
// read by walking it; the rest field by field.

#include "memd/client.h"
#include "memd/v1/memd.pb.h"

namespace memd::internal {

BufferInfo FromProto(const v1::BufferInfo& info);
BufferUsage FromProto(const v1::BufferUsage& usage);
Recommendation FromProto(const v1::Recommendation& recommendation);
Leak FromProto(const v1::Leak& leak);
LeakReport FromProto(const v1::LeaksReply& reply);
SizeClassStats FromProto(const v1::SizeClassStats& size_class);
PoolStats FromProto(const v1::PoolStats& pool);
DeviceInfo FromProto(const v1::DeviceInfo& device);
DaemonStats FromProto(const v1::StatsReply& reply);
SessionInfo FromProto(const v1::SessionInfo& session);
UidUsage FromProto(const v1::UidUsage& usage);
TransferStats FromProto(const v1::TransferStats& stats);
DurabilityStats FromProto(const v1::DurabilityStats& durability);
TransferProgress FromProto(const v1::TransferProgress& progress);
TransferInfo FromProto(const v1::TransferInfo& transfer);
TransferList FromProto(const v1::ListTransfersReply& reply);
Priority FromProto(v1::TransferPriority priority);

v1::TransferPriority ToProto(Priority priority);

}  // namespace memd::internal
