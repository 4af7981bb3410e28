#include "daemon/broker/advice.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/bytes.h"

namespace memd::broker {
namespace {

using Locations = std::set<Location, LocationOrder>;

// The name up to and including its last '/'; a name without one is its own.
std::string_view GroupOf(std::string_view name) {
  const std::size_t slash = name.rfind('/');
  return slash == std::string_view::npos ? name : name.substr(0, slash + 1);
}

const ReplicaFacts* ReplicaAt(const BufferFacts& buffer, const Location& at) {
  for (const ReplicaFacts& replica : buffer.replicas) {
    if (replica.location == at) return &replica;
  }
  return nullptr;
}

const LocationActivity* ActivityAt(const BufferFacts& buffer, const Location& at) {
  for (const LocationActivity& activity : buffer.activity.locations) {
    if (activity.location == at) return &activity;
  }
  return nullptr;
}

std::uint64_t RecentOpensAt(const BufferFacts& buffer, const Location& at) {
  const LocationActivity* activity = ActivityAt(buffer, at);
  return activity == nullptr ? 0 : activity->recent_opens;
}

bool Leased(const BufferFacts& buffer) {
  return std::any_of(buffer.replicas.begin(), buffer.replicas.end(),
                     [](const ReplicaFacts& r) { return r.leased; });
}

// How long since `last` (never: since counting began).
absl::Duration IdleFor(const BufferFacts& buffer, std::optional<absl::Time> last, absl::Time now) {
  return now - std::max(last.value_or(buffer.counted_since), buffer.counted_since);
}

// "host", "host and device:0", "device:0, device:1 and device:2".
std::string JoinLocations(const Locations& locations) {
  std::string text;
  std::size_t i = 0;
  for (const Location& location : locations) {
    if (i > 0) absl::StrAppend(&text, i + 1 == locations.size() ? " and " : ", ");
    absl::StrAppend(&text, location.ToString());
    ++i;
  }
  return text;
}

std::vector<std::string> Names(const Locations& locations) {
  std::vector<std::string> names;
  for (const Location& location : locations) names.push_back(location.ToString());
  return names;
}

std::string Count(std::size_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// "3 buffers, " before a group's evidence; nothing for one buffer.
std::string BuffersPrefix(std::size_t n) {
  return n > 1 ? absl::StrCat(Count(n, "buffer", "buffers"), ", ") : "";
}

// The homes and recent copies of the buffers a recommendation is about.
struct Involved {
  std::vector<const BufferFacts*> buffers;
  Locations Homes() const {
    Locations homes;
    for (const BufferFacts* b : buffers) homes.insert(b->home);
    return homes;
  }
  std::uint64_t RecentBytesCopied() const {
    std::uint64_t bytes = 0;
    for (const BufferFacts* b : buffers) bytes += b->activity.recent_bytes_copied;
    return bytes;
  }
};

// One group's buffers and what the rules found.
class GroupJudge {
 public:
  GroupJudge(std::string subject, std::vector<const BufferFacts*> buffers, absl::Time now,
             const AdviceRules& rules)
      : subject_(std::move(subject)), buffers_(std::move(buffers)), now_(now), rules_(rules) {}

  // Appends the group's recommendations in action order.
  void Judge(std::vector<Recommendation>& out) {
    std::optional<Location> moved_to;
    std::optional<Recommendation> move = Move(moved_to);
    std::vector<const BufferFacts*> unlinkable;
    std::vector<const BufferFacts*> kept;
    for (const BufferFacts* b : buffers_) {
      const bool idle = IdleFor(*b, b->usage.last_used, now_) >= rules_.unlink_idle;
      (idle && !Leased(*b) ? unlinkable : kept).push_back(b);
    }
    if (!move.has_value()) Add(out, Prefetch());
    Add(out, std::move(move));
    Add(out, DropReplicas(kept, moved_to));
    Add(out, Unlink(unlinkable));
  }

 private:
  static void Add(std::vector<Recommendation>& out, std::optional<Recommendation> r) {
    if (r.has_value()) out.push_back(*std::move(r));
  }

  Recommendation Make(std::string_view action, const Locations& locations, std::string evidence,
                      std::uint64_t bytes) const {
    return Recommendation{subject_, std::string(action), Names(locations), std::move(evidence),
                          bytes};
  }

  // ", 96 GiB copied in the last hour", or nothing when nothing was.
  static std::string CopiedClause(std::uint64_t bytes) {
    return bytes == 0 ? "" : absl::StrCat(", ", FormatBytes(bytes), " copied in the last hour");
  }

  std::optional<Recommendation> Prefetch() const {
    Locations targets;
    std::set<const BufferFacts*> opened;
    std::uint64_t opens = 0;
    std::uint64_t bytes = 0;
    // Every device any buffer of the group was opened on.
    Locations devices;
    for (const BufferFacts* b : buffers_) {
      for (const LocationActivity& a : b->activity.locations) {
        if (a.location.kind == Location::Kind::kDevice) devices.insert(a.location);
      }
    }
    for (const Location& device : devices) {
      std::uint64_t device_opens = 0;
      std::vector<const BufferFacts*> missing;
      for (const BufferFacts* b : buffers_) {
        const std::uint64_t n = RecentOpensAt(*b, device);
        if (n == 0 || b->home == device || ReplicaAt(*b, device) != nullptr) continue;
        device_opens += n;
        missing.push_back(b);
      }
      if (device_opens < rules_.prefetch_opens) continue;
      targets.insert(device);
      opens += device_opens;
      for (const BufferFacts* b : missing) {
        bytes += b->size;
        opened.insert(b);
      }
    }
    if (targets.empty()) return std::nullopt;
    Involved involved{{opened.begin(), opened.end()}};
    const std::uint64_t copied = involved.RecentBytesCopied();
    return Make("prefetch", targets,
                absl::StrCat(BuffersPrefix(opened.size()), "opened ", opens, " times on ",
                             JoinLocations(targets), copied == 0 ? " in the last hour" : "",
                             ", lives on ", JoinLocations(involved.Homes()),
                             CopiedClause(copied)),
                bytes);
  }

  // Sets `target` to the move's destination when there is one.
  std::optional<Recommendation> Move(std::optional<Location>& target) const {
    Locations where;
    Involved involved;
    std::uint64_t opens = 0;
    for (const BufferFacts* b : buffers_) {
      bool opened = false;
      for (const LocationActivity& a : b->activity.locations) {
        if (a.recent_opens == 0) continue;
        where.insert(a.location);
        opens += a.recent_opens;
        opened = true;
      }
      if (opened) involved.buffers.push_back(b);
    }
    if (where.size() != 1 || opens < rules_.move_opens) return std::nullopt;
    const Location to = *where.begin();
    std::uint64_t bytes = 0;
    for (const BufferFacts* b : involved.buffers) {
      if (b->home == to) return std::nullopt;  // Opened at home: nothing to move.
      if (ReplicaAt(*b, to) == nullptr) bytes += b->size;
    }
    target = to;
    return Make("move", where,
                absl::StrCat(BuffersPrefix(involved.buffers.size()), "opened ", opens,
                             " times in the last hour, all on ", to.ToString(), ", lives on ",
                             JoinLocations(involved.Homes()),
                             CopiedClause(involved.RecentBytesCopied())),
                bytes);
  }

  std::optional<Recommendation> DropReplicas(const std::vector<const BufferFacts*>& kept,
                                             const std::optional<Location>& moved_to) const {
    Locations where;
    std::size_t replicas = 0;
    std::uint64_t bytes = 0;
    std::optional<absl::Duration> least_idle;
    for (const BufferFacts* b : kept) {
      for (const ReplicaFacts& r : b->replicas) {
        if (r.location == b->home || r.leased || r.location == moved_to) continue;
        const LocationActivity* a = ActivityAt(*b, r.location);
        const absl::Duration idle =
            IdleFor(*b, a == nullptr ? std::nullopt : std::make_optional(a->last_opened), now_);
        if (idle < rules_.replica_idle) continue;
        where.insert(r.location);
        ++replicas;
        bytes += r.bytes;
        least_idle = std::min(least_idle.value_or(idle), idle);
      }
    }
    if (replicas == 0) return std::nullopt;
    return Make("drop_replica", where,
                absl::StrCat(Count(replicas, "replica", "replicas"), " on ", JoinLocations(where),
                             ", ", FormatBytes(bytes), ", not opened there for ",
                             FormatAge(*least_idle)),
                bytes);
  }

  std::optional<Recommendation> Unlink(const std::vector<const BufferFacts*>& candidates) const {
    if (candidates.empty()) return std::nullopt;
    Locations where;
    std::uint64_t bytes = 0;
    std::size_t never_opened = 0;
    std::size_t unsealed = 0;
    absl::Duration least_idle = absl::InfiniteDuration();
    for (const BufferFacts* b : candidates) {
      for (const ReplicaFacts& r : b->replicas) {
        where.insert(r.location);
        bytes += r.bytes;
      }
      if (b->replicas.empty()) {  // The caller knows no copy: the home holds its size.
        where.insert(b->home);
        bytes += b->size;
      }
      if (!b->usage.last_used.has_value()) ++never_opened;
      if (!b->sealed) ++unsealed;
      least_idle = std::min(least_idle, IdleFor(*b, b->usage.last_used, now_));
    }
    std::string evidence =
        absl::StrCat(Count(candidates.size(), "buffer", "buffers"), ", ", FormatBytes(bytes),
                     never_opened == candidates.size() ? ", never opened in "
                                                       : ", not opened for ",
                     FormatAge(least_idle));
    if (never_opened != 0 && never_opened != candidates.size()) {
      absl::StrAppend(&evidence, ", ", never_opened, " never opened");
    }
    if (unsealed != 0) absl::StrAppend(&evidence, ", ", unsealed, " never sealed");
    return Make("unlink", where, std::move(evidence), bytes);
  }

  std::string subject_;
  std::vector<const BufferFacts*> buffers_;
  absl::Time now_;
  const AdviceRules& rules_;
};

}  // namespace

std::string FormatAge(absl::Duration age) {
  struct Unit {
    absl::Duration length;
    const char* one;
    const char* many;
  };
  static constexpr Unit kUnits[] = {{absl::Hours(24), "day", "days"},
                                    {absl::Hours(1), "hour", "hours"},
                                    {absl::Minutes(1), "minute", "minutes"}};
  for (const Unit& unit : kUnits) {
    if (age >= unit.length) {
      return Count(static_cast<std::size_t>(absl::IDivDuration(age, unit.length, &age)),
                   unit.one, unit.many);
    }
  }
  return Count(static_cast<std::size_t>(std::max<std::int64_t>(0, absl::ToInt64Seconds(age))),
               "second", "seconds");
}

std::vector<Recommendation> Advise(absl::Span<const BufferFacts> buffers,
                                   std::string_view prefix, absl::Time now,
                                   const AdviceRules& rules) {
  // std::map: groups in bytewise order of their subject.
  std::map<std::string, std::vector<const BufferFacts*>, std::less<>> groups;
  for (const BufferFacts& buffer : buffers) {
    if (buffer.name.compare(0, prefix.size(), prefix) != 0) continue;
    groups[std::string(GroupOf(buffer.name))].push_back(&buffer);
  }
  std::vector<Recommendation> out;
  for (auto& [subject, members] : groups) {
    GroupJudge(subject, std::move(members), now, rules).Judge(out);
  }
  return out;
}

}  // namespace memd::broker
