#pragma once

// The leak report (issue 26; Broker::Leaks, `memctl leaks`): what memory
// looks forgotten, per uid, with the numbers an operator acts on. Four kinds:
//   never_opened   a persistent sealed buffer nobody opened since it was
//                  created, older than `older_than`;
//   unsealed_idle  a buffer still being written whose creation is older
//                  than `older_than` (its writer holds it and never sealed);
//   idle_lease     a lease held longer than `older_than` (memd cannot see
//                  mapped bytes being used; age is what it knows);
//   many_leases    a session holding at least `many_leases` leases.
// Pure: no broker state, no locks, no clock.

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace memd::broker {

// The kinds, in the order a report lists them (per uid).
inline constexpr std::array<std::string_view, 4> kLeakKinds = {
    "never_opened", "unsealed_idle", "idle_lease", "many_leases"};

// The most leaks one report carries: what one call formats and sends stays
// bounded (a reply well under gRPC's 4 MiB) whatever a client holds.
inline constexpr std::size_t kMaxLeaksPerReport = 4096;

struct LeakBufferFacts {
  std::string name;
  uid_t owner = 0;
  std::uint64_t bytes = 0;  // Every copy's, as the pools count them.
  bool persistent = true;
  bool sealed = false;
  absl::Time created;
  std::optional<absl::Time> last_opened;  // Unset: never since created.
  pid_t creator_pid = 0;
};

struct LeakLeaseFacts {
  std::uint64_t lease = 0;
  std::string buffer;
  uid_t uid = 0;  // The holder's.
  pid_t pid = 0;
  absl::Time granted;
  std::uint64_t bytes = 0;  // Of the memory it maps.
};

struct LeakSessionFacts {
  std::uint64_t session = 0;
  uid_t uid = 0;
  pid_t pid = 0;
  std::string command;
  std::uint64_t leases = 0;
};

// What the broker knows, read under its lock, judged after it.
struct LeakFacts {
  std::vector<LeakBufferFacts> buffers;
  std::vector<LeakLeaseFacts> leases;
  std::vector<LeakSessionFacts> sessions;
};

struct LeakRules {
  absl::Duration older_than = absl::Hours(1);
  std::uint64_t many_leases = 1024;
};

struct Leak {
  uid_t uid = 0;          // Whose: the owner's, the holder's.
  std::string kind;       // "never_opened", "unsealed_idle", "idle_lease", "many_leases".
  std::string subject;    // A buffer name, "lease N on NAME", "session N (command)".
  std::uint64_t bytes = 0;
  absl::Duration age;     // Since creation or grant; 0 for many_leases.
  pid_t pid = 0;          // The holder or creator, where memd knows it.
  std::string evidence;   // In words, with the numbers.
};

// The first leaks of a report and how many more there were.
struct LeakReport {
  std::vector<Leak> leaks;
  std::uint64_t omitted = 0;
};

// How many leaks of one kind, and their bytes: what metrics show.
struct LeakTotal {
  std::string kind;
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;
};

// Everything the facts show as forgotten at `now`, ordered by uid, then
// kind (in kLeakKinds' order), then age (oldest first), then subject.
std::vector<Leak> FindLeaks(absl::Span<const LeakBufferFacts> buffers,
                            absl::Span<const LeakLeaseFacts> leases,
                            absl::Span<const LeakSessionFacts> sessions, absl::Time now,
                            const LeakRules& rules = {});

// The first `most` of `leaks` (kept in their order), and how many did not fit.
LeakReport CapLeaks(std::vector<Leak> leaks, std::size_t most = kMaxLeaksPerReport);

// What FindLeaks would find, counted: one total per kind of kLeakKinds, in
// that order, 0 where none. Formats nothing, so that a metrics scrape over
// every uid stays cheap.
std::vector<LeakTotal> CountLeaks(const LeakFacts& facts, absl::Time now,
                                  const LeakRules& rules = {});

// INVALID_ARGUMENT, with the numbers, unless 0 <= older_than <= 3650 days
// and many_leases >= 1.
absl::Status ValidateLeakRules(const LeakRules& rules);

}  // namespace memd::broker
