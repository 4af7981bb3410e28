#include "daemon/broker/leaks.h"

#include <algorithm>
#include <cstddef>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "daemon/broker/advice.h"

namespace memd::broker {
namespace {

// The longest older_than a report takes: ten years is no leak rule any more
// but a typo, and bounds the arithmetic with absl::Time.
constexpr absl::Duration kMaxOlderThan = absl::Hours(24 * 3650);

std::size_t KindOrder(std::string_view kind) {
  return static_cast<std::size_t>(
      std::find(kLeakKinds.begin(), kLeakKinds.end(), kind) - kLeakKinds.begin());
}

std::string Pid(pid_t pid) { return pid > 0 ? absl::StrCat(", pid ", pid) : ""; }

// The kind a buffer is reported as, if any. FindLeaks and CountLeaks both
// judge by these three, so that the metrics count what the report lists.
std::optional<std::string_view> BufferKind(const LeakBufferFacts& buffer, absl::Time now,
                                           const LeakRules& rules) {
  if (now - buffer.created < rules.older_than) return std::nullopt;
  if (buffer.persistent && buffer.sealed && !buffer.last_opened.has_value()) {
    return kLeakKinds[0];
  }
  if (!buffer.sealed) return kLeakKinds[1];
  return std::nullopt;
}

bool IdleLease(const LeakLeaseFacts& lease, absl::Time now, const LeakRules& rules) {
  return now - lease.granted >= rules.older_than;
}

bool ManyLeases(const LeakSessionFacts& session, const LeakRules& rules) {
  return session.leases >= rules.many_leases;
}

}  // namespace

std::vector<Leak> FindLeaks(absl::Span<const LeakBufferFacts> buffers,
                            absl::Span<const LeakLeaseFacts> leases,
                            absl::Span<const LeakSessionFacts> sessions, absl::Time now,
                            const LeakRules& rules) {
  std::vector<Leak> found;
  for (const LeakBufferFacts& buffer : buffers) {
    const std::optional<std::string_view> kind = BufferKind(buffer, now, rules);
    if (!kind.has_value()) continue;
    const absl::Duration age = now - buffer.created;
    const std::string what = *kind == kLeakKinds[0]
                                 ? absl::StrCat(", sealed, never opened in ", FormatAge(age),
                                                " since it was created")
                                 : absl::StrCat(", still not sealed ", FormatAge(age),
                                                " after it was created");
    found.push_back({buffer.owner, std::string(*kind), buffer.name, buffer.bytes, age,
                     buffer.creator_pid,
                     absl::StrCat(FormatBytes(buffer.bytes), what, Pid(buffer.creator_pid))});
  }
  for (const LeakLeaseFacts& lease : leases) {
    if (!IdleLease(lease, now, rules)) continue;
    const absl::Duration age = now - lease.granted;
    found.push_back({lease.uid, std::string(kLeakKinds[2]),
                     absl::StrCat("lease ", lease.lease, " on ", lease.buffer), lease.bytes, age,
                     lease.pid,
                     absl::StrCat(FormatBytes(lease.bytes), " held for ", FormatAge(age),
                                  Pid(lease.pid))});
  }
  for (const LeakSessionFacts& session : sessions) {
    if (!ManyLeases(session, rules)) continue;
    found.push_back({session.uid, std::string(kLeakKinds[3]),
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

LeakReport CapLeaks(std::vector<Leak> leaks, std::size_t most) {
  LeakReport report;
  if (leaks.size() > most) {
    report.omitted = leaks.size() - most;
    leaks.erase(leaks.begin() + static_cast<std::ptrdiff_t>(most), leaks.end());
  }
  report.leaks = std::move(leaks);
  return report;
}

std::vector<LeakTotal> CountLeaks(const LeakFacts& facts, absl::Time now,
                                  const LeakRules& rules) {
  std::vector<LeakTotal> totals;
  for (std::string_view kind : kLeakKinds) totals.push_back({std::string(kind), 0, 0});
  auto add = [&](std::string_view kind, std::uint64_t bytes) {
    LeakTotal& total = totals[KindOrder(kind)];
    ++total.count;
    total.bytes += bytes;
  };
  for (const LeakBufferFacts& buffer : facts.buffers) {
    if (auto kind = BufferKind(buffer, now, rules)) add(*kind, buffer.bytes);
  }
  for (const LeakLeaseFacts& lease : facts.leases) {
    if (IdleLease(lease, now, rules)) add(kLeakKinds[2], lease.bytes);
  }
  for (const LeakSessionFacts& session : facts.sessions) {
    if (ManyLeases(session, rules)) add(kLeakKinds[3], 0);
  }
  return totals;
}

absl::Status ValidateLeakRules(const LeakRules& rules) {
  if (rules.older_than < absl::ZeroDuration() || rules.older_than > kMaxOlderThan) {
    return absl::InvalidArgumentError(
        absl::StrCat("older_than is ", absl::FormatDuration(rules.older_than),
                     "; it must be from 0 to 3650 days (",
                     absl::ToInt64Seconds(kMaxOlderThan), " s)"));
  }
  if (rules.many_leases < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("many_leases is ", rules.many_leases, "; it must be at least 1"));
  }
  return absl::OkStatus();
}

}  // namespace memd::broker
