#pragma once

// Conversions between the broker's plain types and the wire protocol; the
// only place besides the handlers that sees protobuf or gRPC types. Each
// message the daemon reports (buffers, sessions, usage, pools, devices) is
// filled by one ToProto here and nowhere else; tests/daemon/service/
// convert_test.cc fails when a field of either side has no counterpart.

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/broker/advice.h"
#include "daemon/broker/copy_regions.h"
#include "daemon/broker/leaks.h"
#include "daemon/broker/types.h"
#include "daemon/durable/report.h"
#include "daemon/pool/device_memory.h"
#include "daemon/pool/pool.h"
#include "daemon/transfer/engine.h"
#include "daemon/transfer/types.h"
#include "grpcpp/support/status.h"
#include "memd/v1/memd.pb.h"

namespace memd::service {

// absl and gRPC share code numbers; the message carries over unchanged.
grpc::Status ToGrpcStatus(const absl::Status& status);

void ToProto(const broker::BufferInfo& info, v1::BufferInfo* out);
void ToProto(const broker::LeaseHolders& holders, v1::LeaseHolders* out);
v1::Access ToProto(broker::Access access);
void ToProto(const broker::SessionInfo& info, v1::SessionInfo* out);
void ToProto(const broker::UidUsage& usage, v1::UidUsage* out);
void ToProto(const pool::SizeClassStats& size_class, v1::SizeClassStats* out);
// Sends the derived free_bytes and fragmentation too. limit_rejections stays
// in the daemon (memd_quota_rejections_total{limit="pool"} shows it).
void ToProto(const pool::PoolStats& stats, v1::PoolStats* out);
// What pressure took back at the pool's location (the broker's counts).
void ToProto(const broker::PressureCounts& taken, v1::PoolStats* out);
void ToProto(const backend::DeviceInfo& device, v1::DeviceInfo* out);
// The driver's and memd's views side by side (memd_bytes, outside_memd_bytes).
void ToProto(const pool::DeviceMemory& memory, v1::DeviceInfo* out);
v1::HandleType ToProto(backend::HandleType type);
// What the transfer engine knows of a GPU: its health (health_error). The
// rest of the message is the backend's (above).
void ToProto(const transfer::DeviceStats& device, v1::DeviceInfo* out);

// A transfer's progress as of `now`, which the elapsed time runs to while
// it runs. The priority and the submission time stay in the daemon.
void ToProto(const transfer::TransferProgress& progress, absl::Time now,
             v1::TransferProgress* out);
// An unfinished transfer as ListTransfers shows it, its progress as of
// `now` (the listing's). The owner's pid and command are the session's
// (the handler adds them).
void ToProto(const transfer::ListedTransfer& listed, absl::Time now, v1::TransferInfo* out);
v1::TransferPriority ToProto(transfer::Priority priority);
// The engine's counters, summed over directions, devices and reasons.
void ToProto(const transfer::EngineStats& stats, v1::TransferStats* out);

// The recovery's summary stays in the daemon's log: a state that did not
// fit names the buffers it could not take back, which are not every
// caller's to read (docs/security.md).
void ToProto(const durable::DurabilityStatus& status, v1::DurabilityStats* out);
void ToProto(const broker::GraceCounts& grace, v1::DurabilityStats* out);

// Errors: INVALID_ARGUMENT for a value outside the enum; UNSPECIFIED is
// normal.
absl::StatusOr<transfer::Priority> FromProto(v1::TransferPriority priority);
broker::CopyRegion FromProto(const v1::Region& region);

// The location that asks memd to choose (broker::Place).
inline constexpr char kAutoLocation[] = "auto";
// Most mappable locations a create lists: host, pinned and 62 GPUs.
inline constexpr std::size_t kMaxMappableLocations = 64;

// Validates and converts a CreateRequest: location "auto" with its access
// hint and mappable locations. Errors: INVALID_ARGUMENT naming the bad text
// (unknown location, persistence or hint; a malformed or empty mappable
// location, more than kMaxMappableLocations; a hint or mappable list with a
// named location); names and sizes are the broker's to check.
absl::StatusOr<broker::CreateParams> FromProto(const v1::CreateRequest& request);

// Errors: INVALID_ARGUMENT for an access value outside the enum.
absl::StatusOr<broker::Access> FromProto(v1::Access access);

// Name, access and expected owner of an Open. Errors: as FromProto(Access).
absl::StatusOr<broker::OpenParams> FromProto(const v1::OpenRequest& request);
void ToProto(const broker::BufferUsage& usage, v1::BufferUsage* out);
void ToProto(const broker::Recommendation& recommendation, v1::Recommendation* out);
void ToProto(const broker::Leak& leak, v1::Leak* out);
void ToProto(const broker::LeakReport& report, v1::LeaksReply* out);
// The report's rules: older_than_seconds unset (or 0 from a client without
// presence) and many_leases 0 are the defaults (LeakRules{}). Values past
// what absl::Duration holds saturate, for the broker to refuse with the
// number.
broker::LeakRules FromProto(const v1::LeaksRequest& request);

// A Prefetch is an open at its location that grants nothing.
absl::StatusOr<broker::OpenParams> FromProto(const v1::PrefetchRequest& request);
// The location a replica call names: INVALID_ARGUMENT when empty or not
// "host", "pinned" or "device:N".
absl::StatusOr<Location> ReplicaLocation(const std::string& text);

// The create part, with the expected owner of an existing buffer. Errors:
// as FromProto(CreateRequest).
absl::StatusOr<broker::CreateParams> FromProto(const v1::OpenOrCreateRequest& request);

}  // namespace memd::service
