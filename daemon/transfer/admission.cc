#include "daemon/transfer/admission.h"

#include "absl/strings/str_cat.h"
#include "common/bytes.h"

namespace memd::transfer {

absl::Status Admission::Admit(SessionId session, std::uint64_t bytes) {
  const auto it = sessions_.find(session);
  const Charge charge = it == sessions_.end() ? Charge{} : it->second;
  absl::Status refusal;
  if (charge.transfers >= limits_.max_session_transfers) {
    refusal = absl::ResourceExhaustedError(absl::StrCat(
        "session ", session, " has ", charge.transfers,
        " unfinished transfers, the limit (transfer_max_session_transfers); wait for one "
        "to end"));
  } else if (bytes > limits_.max_session_bytes - charge.bytes ||
             charge.bytes > limits_.max_session_bytes) {
    refusal = absl::ResourceExhaustedError(absl::StrCat(
        "session ", session, " has ", FormatBytes(charge.bytes), " in flight; this copy of ",
        FormatBytes(bytes), " would exceed the limit of ",
        FormatBytes(limits_.max_session_bytes), " (transfer_max_session_bytes)"));
  } else if (bytes > limits_.max_total_bytes - total_bytes_ ||
             total_bytes_ > limits_.max_total_bytes) {
    refusal = absl::ResourceExhaustedError(absl::StrCat(
        "the daemon has ", FormatBytes(total_bytes_), " in flight; this copy of ",
        FormatBytes(bytes), " would exceed the limit of ", FormatBytes(limits_.max_total_bytes),
        " (transfer_max_total_bytes)"));
  }
  if (!refusal.ok()) {
    ++rejections_;
    return refusal;
  }
  Charge& charged = sessions_[session];
  charged.bytes += bytes;
  ++charged.transfers;
  total_bytes_ += bytes;
  ++total_transfers_;
  return absl::OkStatus();
}

void Admission::Release(SessionId session, std::uint64_t bytes) {
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  it->second.bytes -= bytes;
  if (--it->second.transfers == 0) sessions_.erase(it);
  total_bytes_ -= bytes;
  --total_transfers_;
}

}  // namespace memd::transfer
