#include "daemon/broker/replica_set.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace memd::broker {
namespace {

bool HostSide(const Location& at) { return at.kind != Location::Kind::kDevice; }

// Report order: host, pinned, device:0, device:1, ...
bool Before(const Location& a, const Location& b) {
  if (a.kind != b.kind) return static_cast<int>(a.kind) < static_cast<int>(b.kind);
  return a.device < b.device;
}

std::string Leases(const ReplicaReport& r) {
  return absl::StrCat(r.readers, " read and ", r.writers, " writable leases");
}

}  // namespace

namespace {
// absl::string_view is its own type in Debian's Abseil: StrCat takes this.
absl::string_view Name(ReplicaState state) {
  const std::string_view name = ReplicaStateName(state);
  return {name.data(), name.size()};
}
}  // namespace

std::string_view ReplicaStateName(ReplicaState state) {
  switch (state) {
    case ReplicaState::kCurrent: return "current";
    case ReplicaState::kStale: return "stale";
    case ReplicaState::kFilling: return "filling";
  }
  return "unknown";
}

std::string_view SyncStateName(SyncState state) {
  switch (state) {
    case SyncState::kHostOnly: return "host_only";
    case SyncState::kDeviceOnly: return "device_only";
    case SyncState::kSynchronized: return "synchronized";
    case SyncState::kHostDirty: return "host_dirty";
    case SyncState::kDeviceDirty: return "device_dirty";
    case SyncState::kMixed: return "mixed";
  }
  return "unknown";
}

ReplicaSet::ReplicaSet(const Location& primary, std::size_t max_replicas)
    : max_replicas_(max_replicas) {
  Replica replica;
  replica.report = {primary, ReplicaState::kCurrent, generation_, 0, 0};
  replicas_.push_back(replica);
}

absl::StatusOr<ReplicaSet> ReplicaSet::Created(const Location& primary,
                                               std::size_t max_replicas) {
  if (max_replicas == 0) {
    return absl::InvalidArgumentError(
        "max_replicas is 0: a buffer has at least the replica it was created in");
  }
  return ReplicaSet(primary, max_replicas);
}

ReplicaSet::Replica* ReplicaSet::Find(const Location& at) {
  for (Replica& r : replicas_) {
    if (r.report.location == at) return &r;
  }
  return nullptr;
}

absl::StatusOr<ReplicaSet::Replica*> ReplicaSet::Existing(const Location& at) {
  Replica* r = Find(at);
  if (r == nullptr) {
    return absl::NotFoundError(absl::StrCat("no replica at ", at.ToString()));
  }
  return r;
}

const ReplicaSet::Replica* ReplicaSet::Find(const Location& at) const {
  for (const Replica& r : replicas_) {
    if (r.report.location == at) return &r;
  }
  return nullptr;
}

std::size_t ReplicaSet::CurrentCount() const {
  return static_cast<std::size_t>(std::count_if(
      replicas_.begin(), replicas_.end(),
      [](const Replica& r) { return r.report.state == ReplicaState::kCurrent; }));
}

absl::Status ReplicaSet::RoomForOneMore(const Location& at) const {
  if (replicas_.size() < max_replicas_) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "a replica at ", at.ToString(), " would make ", replicas_.size() + 1,
      " replicas of this buffer; it may have at most ", max_replicas_,
      " (drop one nobody holds first)"));
}

std::optional<Location> ReplicaSet::SourceFor(const Location& at) const {
  // The first current replica of each kind; replicas_ is sorted, so the
  // device found first has the lowest ordinal.
  std::optional<Location> host, pinned, device;
  for (const Replica& r : replicas_) {
    const Location& loc = r.report.location;
    if (r.report.state != ReplicaState::kCurrent || loc == at) continue;
    std::optional<Location>& slot = loc.kind == Location::Kind::kHost     ? host
                                    : loc.kind == Location::Kind::kPinned ? pinned
                                                                          : device;
    if (!slot.has_value()) slot = loc;
  }
  // Same side first: a device from a peer device, a host-side replica by
  // memcpy. Then the other side, pinned before host.
  for (const std::optional<Location>& choice :
       HostSide(at) ? std::vector{pinned, host, device} : std::vector{device, pinned, host}) {
    if (choice.has_value()) return choice;
  }
  return std::nullopt;
}

absl::StatusOr<OpenPlan> ReplicaSet::PlanOpen(const Location& at, bool for_write) const {
  const Replica* r = Find(at);
  if (r == nullptr) {
    if (absl::Status room = RoomForOneMore(at); !room.ok()) return room;
    return OpenPlan{OpenPlan::Action::kFill, SourceFor(at)};
  }
  const ReplicaReport& rep = r->report;
  switch (rep.state) {
    case ReplicaState::kFilling:
      return OpenPlan{OpenPlan::Action::kWait, std::nullopt};
    case ReplicaState::kCurrent:
      if (for_write && rep.readers > 0) return OpenPlan{OpenPlan::Action::kBusy, std::nullopt};
      return OpenPlan{OpenPlan::Action::kServe, std::nullopt};
    case ReplicaState::kStale:
      if (rep.readers > 0 || rep.writers > 0) {
        return OpenPlan{OpenPlan::Action::kBusy, std::nullopt};
      }
      return OpenPlan{OpenPlan::Action::kFill, SourceFor(at)};
  }
  return absl::InternalError("unknown replica state");
}

absl::StatusOr<FillTicket> ReplicaSet::BeginFill(const Location& at) {
  Replica* r = Find(at);
  if (r == nullptr) {
    if (absl::Status room = RoomForOneMore(at); !room.ok()) return room;
  } else if (r->report.state == ReplicaState::kCurrent) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the replica at ", at.ToString(), " is current (generation ", generation_,
        "): nothing to fill"));
  } else if (r->report.state == ReplicaState::kFilling) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a fill of ", at.ToString(), " to generation ", generation_,
        " is running already: wait for it"));
  } else if (r->report.readers > 0 || r->report.writers > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the stale replica at ", at.ToString(), " (generation ", r->report.generation,
        ") has ", Leases(r->report), ": refilling it would change bytes under them"));
  }
  std::optional<Location> source = SourceFor(at);
  if (!source.has_value()) {
    // Unreachable while the invariant holds: one replica is always current
    // and `at` is not it.
    return absl::InternalError(absl::StrCat("no current replica to fill ", at.ToString(), " from"));
  }
  const bool created = r == nullptr;
  if (created) {
    Replica fresh;
    fresh.report = {at, ReplicaState::kFilling, 0, 0, 0};
    auto pos = std::find_if(replicas_.begin(), replicas_.end(), [&](const Replica& x) {
      return Before(at, x.report.location);
    });
    r = &*replicas_.insert(pos, fresh);
  }
  r->report.state = ReplicaState::kFilling;
  r->fill = next_fill_++;
  r->created = created;
  return FillTicket{r->fill, at, *source, generation_, created};
}

absl::StatusOr<FillResult> ReplicaSet::FinishFill(const FillTicket& ticket,
                                                  const absl::Status& copy_status) {
  Replica* r = Find(ticket.at);
  if (r == nullptr || r->report.state != ReplicaState::kFilling || r->fill != ticket.fill) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fill ", ticket.fill, " of ", ticket.at.ToString(), " is not running"));
  }
  r->fill = 0;
  if (!copy_status.ok()) {
    last_failure_ = FillFailure{ticket.at, ticket.generation, copy_status};
    if (r->created) {
      replicas_.erase(replicas_.begin() + (r - replicas_.data()));
      return FillResult::kRemoved;
    }
    r->report.state = ReplicaState::kStale;
    return FillResult::kStaleAgain;
  }
  r->created = false;
  r->report.generation = ticket.generation;
  if (last_failure_.has_value() && last_failure_->at == ticket.at) last_failure_.reset();
  if (ticket.generation == generation_) {
    r->report.state = ReplicaState::kCurrent;
    return FillResult::kCurrent;
  }
  r->report.state = ReplicaState::kStale;
  return FillResult::kOutdated;
}

absl::Status ReplicaSet::AddReader(const Location& at) {
  MEMD_ASSIGN_OR_RETURN(Replica* r, Existing(at));
  if (r->report.state != ReplicaState::kCurrent) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the replica at ", at.ToString(), " is ", Name(r->report.state),
        " (generation ", r->report.generation, ", buffer at ", generation_,
        "): readers get a current replica"));
  }
  ++r->report.readers;
  return absl::OkStatus();
}

absl::Status ReplicaSet::AddWriter(const Location& at) {
  MEMD_ASSIGN_OR_RETURN(Replica* r, Existing(at));
  if (r->report.state != ReplicaState::kCurrent) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the replica at ", at.ToString(), " is ", Name(r->report.state),
        " (generation ", r->report.generation, ", buffer at ", generation_,
        "): writers need a current replica"));
  }
  if (r->report.readers > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the replica at ", at.ToString(), " has ", r->report.readers,
        " read leases: readers never see a replica being updated"));
  }
  ++r->report.writers;
  return absl::OkStatus();
}

absl::Status ReplicaSet::RemoveReader(const Location& at) {
  return RemoveLease(at, &ReplicaReport::readers, "read leases");
}

absl::Status ReplicaSet::RemoveWriter(const Location& at) {
  return RemoveLease(at, &ReplicaReport::writers, "writable leases");
}

absl::Status ReplicaSet::RemoveLease(const Location& at, std::uint32_t ReplicaReport::*count,
                                     std::string_view what) {
  MEMD_ASSIGN_OR_RETURN(Replica* r, Existing(at));
  std::uint32_t& leases = r->report.*count;
  if (leases == 0) {
    return absl::InternalError(
        absl::StrCat("the replica at ", at.ToString(), " has 0 ", std::string(what), " to remove"));
  }
  --leases;
  return absl::OkStatus();
}

absl::Status ReplicaSet::Written(const Location& at) {
  MEMD_ASSIGN_OR_RETURN(Replica* r, Existing(at));
  if (r->report.state != ReplicaState::kCurrent) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the replica at ", at.ToString(), " is ", Name(r->report.state),
        ": only a current replica is written"));
  }
  if (r->report.writers == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the replica at ", at.ToString(), " has 0 writable leases: nobody wrote it"));
  }
  ++generation_;
  for (Replica& other : replicas_) {
    if (other.report.state == ReplicaState::kCurrent) other.report.state = ReplicaState::kStale;
  }
  r->report.state = ReplicaState::kCurrent;
  r->report.generation = generation_;
  return absl::OkStatus();
}

std::vector<Location> ReplicaSet::SyncTargets() const {
  std::vector<Location> targets;
  for (const Replica& r : replicas_) {
    if (r.report.state == ReplicaState::kStale && r.report.readers == 0 &&
        r.report.writers == 0) {
      targets.push_back(r.report.location);
    }
  }
  return targets;
}

absl::Status ReplicaSet::Drop(const Location& at) {
  MEMD_RETURN_IF_ERROR(MayDrop(at));
  const Replica* r = Find(at);
  replicas_.erase(replicas_.begin() + (r - replicas_.data()));
  return absl::OkStatus();
}

absl::Status ReplicaSet::MayDrop(const Location& at) const {
  const Replica* r = Find(at);
  if (r == nullptr) {
    return absl::NotFoundError(absl::StrCat("no replica at ", at.ToString()));
  }
  if (r->report.readers > 0 || r->report.writers > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the replica at ", at.ToString(), " has ", Leases(r->report)));
  }
  if (r->report.state == ReplicaState::kFilling) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a fill of ", at.ToString(), " is running: drop it after FinishFill"));
  }
  if (r->report.state == ReplicaState::kCurrent && CurrentCount() == 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the replica at ", at.ToString(), " is the only current one (generation ",
        generation_, "): the buffer's content would be lost"));
  }
  return absl::OkStatus();
}

std::vector<ReplicaReport> ReplicaSet::Replicas() const {
  std::vector<ReplicaReport> reports;
  reports.reserve(replicas_.size());
  for (const Replica& r : replicas_) reports.push_back(r.report);
  return reports;
}

SyncState ReplicaSet::State() const {
  bool host = false, device = false, host_current = false, device_current = false;
  bool all_current = true;
  for (const Replica& r : replicas_) {
    const bool current = r.report.state == ReplicaState::kCurrent;
    all_current = all_current && current;
    if (HostSide(r.report.location)) {
      host = true;
      host_current = host_current || current;
    } else {
      device = true;
      device_current = device_current || current;
    }
  }
  if (!device) return SyncState::kHostOnly;
  if (!host) return SyncState::kDeviceOnly;
  if (all_current) return SyncState::kSynchronized;
  if (!device_current) return SyncState::kHostDirty;
  if (!host_current) return SyncState::kDeviceDirty;
  return SyncState::kMixed;
}

}  // namespace memd::broker
