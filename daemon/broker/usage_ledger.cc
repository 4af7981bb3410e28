#include "daemon/broker/usage_ledger.h"

#include "absl/strings/str_cat.h"
#include "common/bytes.h"

namespace memd::broker {
namespace {

std::string Bytes(std::uint64_t bytes) {
  return absl::StrCat(FormatBytes(bytes), " (", bytes, " bytes)");
}

// Takes one buffer of `bytes` off, dropping the entry at zero buffers so the
// maps hold only live users.
template <typename Map, typename Key>
void Subtract(Map& map, const Key& key, std::uint64_t bytes) {
  auto it = map.find(key);
  if (it == map.end()) return;
  it->second.bytes = it->second.bytes > bytes ? it->second.bytes - bytes : 0;
  if (--it->second.buffers == 0) map.erase(it);
}

}  // namespace

absl::Status UsageLedger::Admit(const Charge& charge, std::uint64_t asked,
                                const std::string& name, const Quota& uid_quota,
                                const Quota& session_quota) {
  const std::string where = charge.location.ToString();
  auto refuse = [&](const char* quota, const std::string& who, std::uint64_t held,
                    std::uint64_t limit) {
    ++rejections_[{quota, where}];
    // What the pool would set aside is what counts; say so where it is not
    // the size asked, or the numbers would not add up to the reader.
    const std::string taking =
        asked == charge.bytes ? "" : absl::StrCat(", taking ", Bytes(charge.bytes));
    return absl::ResourceExhaustedError(absl::StrCat(
        "buffer '", name, "' (", Bytes(asked), " at ", where, taking, ") would take ",
        who, " over its quota of ", Bytes(limit), " at ", where, " (", quota, "): ",
        "its buffers there take ", Bytes(held), "; unlink some, or ask the operator"));
  };
  if (const std::uint64_t limit = uid_quota.For(charge.location); limit != 0) {
    const std::uint64_t held = uid_bytes(charge.uid, charge.location);
    if (charge.bytes > limit || held > limit - charge.bytes) {
      return refuse("max_uid_bytes", absl::StrCat("uid ", charge.uid), held, limit);
    }
  }
  if (const std::uint64_t limit = session_quota.For(charge.location); limit != 0) {
    const std::uint64_t held = session_bytes(charge.session, charge.location);
    if (charge.bytes > limit || held > limit - charge.bytes) {
      return refuse("max_session_bytes",
                    absl::StrCat("session ", charge.session, " (pid ", charge.pid, ")"),
                    held, limit);
    }
  }
  return absl::OkStatus();
}

void UsageLedger::Add(const Charge& charge) {
  for (Held* held : {&by_uid_[{charge.uid, charge.location}],
                     &by_session_[{charge.session, charge.location}]}) {
    held->bytes += charge.bytes;
    ++held->buffers;
  }
}

void UsageLedger::Remove(const Charge& charge) {
  Subtract(by_uid_, std::make_pair(charge.uid, charge.location), charge.bytes);
  Subtract(by_session_, std::make_pair(charge.session, charge.location), charge.bytes);
}

void UsageLedger::ForgetSession(std::uint64_t session) {
  for (auto it = by_session_.begin(); it != by_session_.end();) {
    if (it->first.first == session) {
      by_session_.erase(it++);
    } else {
      ++it;
    }
  }
}

std::uint64_t UsageLedger::uid_bytes(uid_t uid, const Location& location) const {
  auto it = by_uid_.find({uid, location});
  return it == by_uid_.end() ? 0 : it->second.bytes;
}

std::uint64_t UsageLedger::session_bytes(std::uint64_t session,
                                         const Location& location) const {
  auto it = by_session_.find({session, location});
  return it == by_session_.end() ? 0 : it->second.bytes;
}

std::uint64_t UsageLedger::session_total(std::uint64_t session) const {
  std::uint64_t total = 0;
  for (const auto& [key, held] : by_session_) {
    if (key.first == session) total += held.bytes;
  }
  return total;
}

}  // namespace memd::broker
