// Client::Copy and the Transfer handle: the client's half of the daemon's
// transfer engine.

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/src/client_core.h"
#include "client/src/convert.h"
#include "common/status_macros.h"
#include "memd/client.h"

namespace memd {
namespace internal {
namespace {

// The longest one WaitTransfer call waits (the daemon allows a minute):
// a longer Wait asks again, so that a call never outlives the caller's
// interest for long and a daemon restart is noticed.
constexpr absl::Duration kWaitSlice = absl::Seconds(20);

const char* SideName(bool source) { return source ? "source" : "destination"; }

}  // namespace

absl::StatusOr<std::shared_ptr<Connection>> ClientCore::TransferConnection(
    std::uint64_t generation, std::uint64_t transfer) {
  MEMD_ASSIGN_OR_RETURN(std::shared_ptr<Connection> connection, Current());
  if (connection->generation != generation) {
    return absl::NotFoundError(absl::StrCat(
        "transfer ", transfer, " ended with its session (the daemon restarted); "
        "its copy may not have finished"));
  }
  return connection;
}

absl::StatusOr<Transfer> ClientCore::Copy(const Region& source, const Region& destination,
                                          const CopyOptions& options) {
  MEMD_ASSIGN_OR_RETURN(std::shared_ptr<Connection> connection, Current());
  v1::CopyRequest request;
  MEMD_ASSIGN_OR_RETURN(*request.mutable_source(),
                        RegionOf(source, true, connection->generation));
  MEMD_ASSIGN_OR_RETURN(*request.mutable_destination(),
                        RegionOf(destination, false, connection->generation));
  request.set_priority(ToProto(options.priority));
  if (options.deadline.has_value()) {
    const absl::Duration left = *options.deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("the copy's deadline passed before it started");
    }
    // Rounded up: a deadline 0.5 ms away must not read as none (0).
    request.set_deadline_ms(static_cast<std::uint64_t>(
        absl::ToInt64Milliseconds(left + absl::Nanoseconds(999999))));
  }
  request.set_chunk_bytes(options.chunk_bytes);
  v1::CopyReply reply;
  grpc::ClientContext context;
  Prepare(*connection, context);
  MEMD_RETURN_IF_ERROR(FromGrpc(connection->stub->Copy(&context, request, &reply)));
  Transfer transfer;
  transfer.core_ = shared_from_this();
  transfer.id_ = reply.transfer_id();
  transfer.session_generation_ = connection->generation;
  return transfer;
}

absl::StatusOr<v1::Region> ClientCore::RegionOf(const Region& region, bool source,
                                                std::uint64_t generation) const {
  const char* side = SideName(source);
  if (region.buffer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the copy's ", side, " names no buffer"));
  }
  const Buffer& buffer = *region.buffer;
  if (!buffer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the copy's ", side, " Buffer holds no lease (released already, or moved from)"));
  }
  if (buffer.core_.get() != this) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the copy's ", side, " buffer '", buffer.name(),
        "' was opened by another Client; a copy names leases of its own Client"));
  }
  if (buffer.ticket_->generation.load() != generation) {
    return absl::NotFoundError(absl::StrCat(
        "lease ", buffer.lease_id(), " on buffer '", buffer.name(),
        "' ended with its session (the daemon restarted)"));
  }
  if (region.offset > buffer.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the copy's ", side, " offset ", region.offset, " is past the end of buffer '",
        buffer.name(), "' (", buffer.size(), " bytes)"));
  }
  v1::Region out;
  out.set_lease_id(buffer.lease_id());
  out.set_offset(region.offset);
  out.set_length(region.length.value_or(buffer.size() - region.offset));
  return out;
}

absl::StatusOr<TransferProgress> ClientCore::WaitTransfer(std::uint64_t generation,
                                                          std::uint64_t transfer,
                                                          absl::Duration wait) {
  MEMD_ASSIGN_OR_RETURN(std::shared_ptr<Connection> connection,
                        TransferConnection(generation, transfer));
  v1::WaitTransferRequest request;
  request.set_transfer_id(transfer);
  request.set_wait_ms(static_cast<std::uint64_t>(
      absl::ToInt64Milliseconds(std::max(wait, absl::ZeroDuration()))));
  v1::TransferProgress reply;
  grpc::ClientContext context;
  Prepare(*connection, context, wait);
  MEMD_RETURN_IF_ERROR(FromGrpc(connection->stub->WaitTransfer(&context, request, &reply)));
  return FromProto(reply);
}

absl::StatusOr<TransferProgress> ClientCore::CancelTransfer(std::uint64_t generation,
                                                            std::uint64_t transfer) {
  MEMD_ASSIGN_OR_RETURN(std::shared_ptr<Connection> connection,
                        TransferConnection(generation, transfer));
  v1::CancelTransferRequest request;
  request.set_transfer_id(transfer);
  v1::TransferProgress reply;
  grpc::ClientContext context;
  Prepare(*connection, context);
  MEMD_RETURN_IF_ERROR(
      FromGrpc(connection->stub->CancelTransfer(&context, request, &reply)));
  return FromProto(reply);
}

}  // namespace internal

// ---- Transfer ----

Transfer::Transfer() = default;
Transfer::Transfer(Transfer&& other) noexcept { *this = std::move(other); }
Transfer& Transfer::operator=(Transfer&& other) noexcept {
  if (this != &other) {
    core_ = std::move(other.core_);
    id_ = std::exchange(other.id_, 0);
    session_generation_ = std::exchange(other.session_generation_, 0);
  }
  return *this;
}
Transfer::~Transfer() = default;

namespace {

absl::Status Empty() {
  return absl::FailedPreconditionError("this Transfer names no copy (moved from, or empty)");
}

// How a finished transfer ended, as Wait returns it.
absl::Status Outcome(const TransferProgress& progress) {
  if (!progress.status.ok()) return progress.status;
  switch (progress.state) {
    case TransferState::kCancelled:
      return absl::CancelledError(absl::StrCat("transfer ", progress.id, " was cancelled"));
    case TransferState::kFailed:
      return absl::UnknownError(absl::StrCat("transfer ", progress.id, " failed"));
    default:
      return absl::OkStatus();
  }
}

}  // namespace

absl::Status Transfer::Wait(absl::Time deadline) {
  if (core_ == nullptr) return Empty();
  while (true) {
    const absl::Duration wait =
        std::clamp(deadline - absl::Now(), absl::ZeroDuration(), internal::kWaitSlice);
    MEMD_ASSIGN_OR_RETURN(TransferProgress progress,
                          core_->WaitTransfer(session_generation_, id_, wait));
    if (progress.finished()) return Outcome(progress);
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "transfer ", id_, " has moved ", progress.bytes_done, " of ",
          progress.bytes_total, " bytes and goes on; this wait ran out"));
    }
  }
}

absl::StatusOr<TransferProgress> Transfer::Progress() {
  if (core_ == nullptr) return Empty();
  return core_->WaitTransfer(session_generation_, id_, absl::ZeroDuration());
}

absl::Status Transfer::Cancel() {
  if (core_ == nullptr) return Empty();
  return core_->CancelTransfer(session_generation_, id_).status();
}

// ---- Client::Copy ----

absl::StatusOr<Transfer> Client::Copy(const Region& source, const Region& destination,
                                      const CopyOptions& options) {
  return core_->Copy(source, destination, options);
}

}  // namespace memd
