#include "daemon/broker/leaks.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "daemon/broker/advice.h"

namespace memd::broker {
namespace {

int KindOrder(const std::string& kind) {
  if (kind == "never_opened") return 0;
  if (kind == "unsealed_idle") return 1;
  if (kind == "idle_lease") return 2;
  return 3;
}

std::string Pid(pid_t pid) { return pid > 0 ? absl::StrCat(", pid ", pid) : ""; }

}  // namespace

std::vector<Leak> FindLeaks(absl::Span<const LeakBufferFacts> buffers,
                            absl::Span<const LeakLeaseFacts> leases,
                            absl::Span<const LeakSessionFacts> sessions, absl::Time now,
                            const LeakRules& rules) {
  std::vector<Leak> found;
  for (const LeakBufferFacts& buffer : buffers) {
    const absl::Duration age = now - buffer.created;
    if (age < rules.older_than) continue;
    if (buffer.persistent && buffer.sealed && !buffer.last_opened.has_value()) {
      found.push_back({buffer.owner, "never_opened", buffer.name, buffer.bytes, age,
                       buffer.creator_pid,
                       absl::StrCat(FormatBytes(buffer.bytes), ", sealed, never opened in ",
                                    FormatAge(age), " since it was created",
                                    Pid(buffer.creator_pid))});
    } else if (!buffer.sealed) {
      found.push_back({buffer.owner, "unsealed_idle", buffer.name, buffer.bytes, age,
                       buffer.creator_pid,
                       absl::StrCat(FormatBytes(buffer.bytes), ", still not sealed ",
                                    FormatAge(age), " after it was created",
                                    Pid(buffer.creator_pid))});
    }
  }
  for (const LeakLeaseFacts& lease : leases) {
    const absl::Duration age = now - lease.granted;
    if (age < rules.older_than) continue;
    found.push_back({lease.uid, "idle_lease",
                     absl::StrCat("lease ", lease.lease, " on ", lease.buffer), lease.bytes, age,
                     lease.pid,
                     absl::StrCat(FormatBytes(lease.bytes), " held for ", FormatAge(age),
                                  Pid(lease.pid))});
  }
  for (const LeakSessionFacts& session : sessions) {
    if (session.leases < rules.many_leases) continue;
    found.push_back({session.uid, "many_leases",
                     absl::StrCat("session ", session.session, " (", session.command, ")"), 0,
                     absl::ZeroDuration(), session.pid,
                     absl::StrCat(session.leases, " leases held (the report's mark is ",
                                  rules.many_leases, ")", Pid(session.pid))});
  }
  std::sort(found.begin(), found.end(), [](const Leak& a, const Leak& b) {
    return std::make_tuple(a.uid, KindOrder(a.kind), -a.age, a.subject) <
           std::make_tuple(b.uid, KindOrder(b.kind), -b.age, b.subject);
  });
  return found;
}

}  // namespace memd::broker
