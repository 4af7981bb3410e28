#include "daemon/broker/uid_counts.h"

#include <cstddef>

#include "absl/strings/str_cat.h"

namespace memd::broker {
namespace {

// How a refusal names each kind: "uid 61003 <verb> 16 <noun>; the limit is
// 16 (<key>)".
struct Words {
  const char* verb;
  const char* noun;
  const char* key;
};
constexpr Words kWords[] = {
    {"holds", "sessions", "max_sessions_per_uid"},
    {"owns", "buffers", "max_buffers_per_uid"},
    {"holds", "leases", "max_leases_per_uid"},
};

std::size_t Index(UidCounts::Kind kind) { return static_cast<std::size_t>(kind); }

}  // namespace

absl::Status UidCounts::Admit(uid_t uid, Kind kind, std::uint64_t limit) const {
  const std::uint64_t held = Of(uid, kind);
  if (held < limit) return absl::OkStatus();
  const Words& words = kWords[Index(kind)];
  return absl::ResourceExhaustedError(absl::StrCat("uid ", uid, " ", words.verb, " ", held,
                                                   " ", words.noun, "; the limit is ", limit,
                                                   " (", words.key, ")"));
}

void UidCounts::Add(uid_t uid, Kind kind) { ++by_uid_[uid][Index(kind)]; }

void UidCounts::Remove(uid_t uid, Kind kind) {
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end() || it->second[Index(kind)] == 0) return;
  --it->second[Index(kind)];
  if (it->second == Held{}) by_uid_.erase(it);
}

std::uint64_t UidCounts::Of(uid_t uid, Kind kind) const {
  auto it = by_uid_.find(uid);
  return it == by_uid_.end() ? 0 : it->second[Index(kind)];
}

}  // namespace memd::broker
