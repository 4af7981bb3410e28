#include "daemon/transfer/admission.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"

namespace memd::transfer {
namespace {

bool CountFull(const TransferActivity& charge, int most) {
  return charge.transfers >= static_cast<std::uint64_t>(std::max(most, 0));
}

// Whether `bytes` more would pass `most` (written so that nothing wraps).
bool BytesOver(const TransferActivity& charge, std::uint64_t bytes, std::uint64_t most) {
  return charge.bytes > most || bytes > most - charge.bytes;
}

TransferActivity Find(const auto& charges, const auto& key) {
  const auto it = charges.find(key);
  return it == charges.end() ? TransferActivity{} : it->second;
}

// Removes `bytes` and one transfer from `charges[key]`, forgetting it at none.
void Uncharge(auto& charges, const auto& key, std::uint64_t bytes) {
  auto it = charges.find(key);
  if (it == charges.end()) return;
  it->second.bytes -= bytes;
  if (--it->second.transfers == 0) charges.erase(it);
}

}  // namespace

absl::Status Admission::RefuseCount(const std::string& who, const TransferActivity& charge,
                                    int most, const char* key) {
  return Refuse(key, absl::StrCat(who, " has ", charge.transfers,
                                  " unfinished transfers; the limit is ", most, " (", key,
                                  "); wait for one to end"));
}

absl::Status Admission::RefuseBytes(const std::string& who, const TransferActivity& charge,
                                    std::uint64_t bytes, std::uint64_t most, const char* key) {
  return Refuse(key, absl::StrCat(who, " has ", FormatBytes(charge.bytes),
                                  " in flight; this copy of ", FormatBytes(bytes),
                                  " would exceed the limit of ", FormatBytes(most), " (", key,
                                  ")"));
}

absl::Status Admission::Refuse(const char* key, std::string message) {
  ++rejections_;
  ++rejections_by_limit_[key];
  return absl::ResourceExhaustedError(std::move(message));
}

absl::Status Admission::Admit(SessionId session, uid_t uid, std::uint64_t bytes) {
  const TransferActivity of_session = Find(sessions_, session);
  const TransferActivity of_uid = Find(uids_, uid);
  if (CountFull(of_session, limits_.max_session_transfers)) {
    return RefuseCount(absl::StrCat("session ", session), of_session,
                       limits_.max_session_transfers, "transfer_max_session_transfers");
  }
  if (BytesOver(of_session, bytes, limits_.max_session_bytes)) {
    return RefuseBytes(absl::StrCat("session ", session), of_session, bytes,
                       limits_.max_session_bytes, "transfer_max_session_bytes");
  }
  if (CountFull(of_uid, limits_.max_uid_transfers)) {
    return RefuseCount(absl::StrCat("uid ", uid), of_uid, limits_.max_uid_transfers,
                       "transfer_max_uid_transfers");
  }
  if (BytesOver(of_uid, bytes, limits_.max_uid_bytes)) {
    return RefuseBytes(absl::StrCat("uid ", uid), of_uid, bytes, limits_.max_uid_bytes,
                       "transfer_max_uid_bytes");
  }
  if (BytesOver(total_, bytes, limits_.max_total_bytes)) {
    return RefuseBytes("the daemon", total_, bytes, limits_.max_total_bytes,
                       "transfer_max_total_bytes");
  }
  for (TransferActivity* charge : {&sessions_[session], &uids_[uid], &total_}) {
    charge->bytes += bytes;
    ++charge->transfers;
  }
  return absl::OkStatus();
}

void Admission::Release(SessionId session, uid_t uid, std::uint64_t bytes) {
  if (!sessions_.contains(session)) return;  // Never admitted.
  Uncharge(sessions_, session, bytes);
  Uncharge(uids_, uid, bytes);
  total_.bytes -= bytes;
  --total_.transfers;
}

TransferActivity Admission::uid_activity(uid_t uid) const { return Find(uids_, uid); }

}  // namespace memd::transfer
