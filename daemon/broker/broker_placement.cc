// Broker's half of automatic placement: the candidates and their free bytes.
// The policy itself is Place() (placement.h), which knows no broker.

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/broker/broker.h"

namespace memd::broker {
namespace {

// The memory every process can map: shared memory, locked or not.
bool MappableByDefault(const Location& location) {
  return location.kind != Location::Kind::kDevice;
}

bool Listed(const std::vector<Location>& mappable, const Location& location) {
  if (mappable.empty()) return MappableByDefault(location);
  return std::find(mappable.begin(), mappable.end(), location) != mappable.end();
}

// What `pool` could hand out now: what it holds idle (it trims idle
// segments before refusing, so all of it counts), plus what it may still
// reserve within its limit and the memory outside it has (`outside`; none
// known: the limit alone).
PlacementCandidate CandidateOf(const pool::Pool& pool, const std::optional<Capacity>& outside) {
  const pool::PoolStats stats = pool.Stats();
  const std::uint64_t idle = stats.reserved_bytes - std::min(stats.used_bytes, stats.reserved_bytes);
  const std::uint64_t room =
      stats.limit_bytes > stats.reserved_bytes ? stats.limit_bytes - stats.reserved_bytes : 0;
  PlacementCandidate candidate;
  candidate.location = pool.location();
  candidate.free_bytes = idle + std::min(room, outside ? outside->free_bytes : room);
  // The whole memory when known (what headroom is a share of), else the
  // pool's limit; never less than what is free.
  candidate.total_bytes = std::max(
      outside && outside->total_bytes != 0 ? outside->total_bytes : stats.limit_bytes,
      candidate.free_bytes);
  return candidate;
}

}  // namespace

void Broker::SetPlacementRules(const PlacementRules& rules) {
  absl::MutexLock lock(&mu_);
  placement_rules_ = rules;
}

void Broker::SetCapacitySource(const CapacitySource* source) {
  absl::MutexLock lock(&mu_);
  capacity_source_ = source;
}

void Broker::SetNumaPlacement(std::shared_ptr<const NumaPlacement> placement) {
  absl::MutexLock lock(&mu_);
  numa_placement_ = std::move(placement);
}

absl::StatusOr<pool::Domain> Broker::CreateDomain(SessionId session,
                                                  const CreateParams& params) {
  // Buffers with the same owner, group and mode are open to the same
  // clients, so their memory may share a segment (whose handle exposes all
  // of it); the node keeps pages placed on one node from serving another.
  pool::Domain domain;
  pid_t creator = 0;
  std::shared_ptr<const NumaPlacement> numa;
  {
    absl::MutexLock lock(&mu_);
    MEMD_ASSIGN_OR_RETURN(Session * caller, FindSessionLocked(session));
    domain = pool::Domain{caller->peer.uid, caller->peer.gid, params.mode};
    creator = caller->peer.pid;
    numa = numa_placement_;
  }
  // Automatic placement may choose a device: its memory is on its GPU, and
  // whatever NUMA placement was asked applies to host and pinned only.
  if (params.auto_location && params.location.kind == Location::Kind::kDevice) return domain;
  if (numa != nullptr) {
    MEMD_ASSIGN_OR_RETURN(domain.numa_node, numa->Choose(params.numa, params.location, creator));
  } else if (params.numa.kind != NumaRequest::Kind::kDefault) {
    // Without a placement (tests that set none) a request is checked as on
    // a machine of one node with numa off.
    NumaFacts one_node;
    one_node.nodes = 1;
    MEMD_ASSIGN_OR_RETURN(domain.numa_node,
                          ChooseNumaNode(params.numa, NumaRequest{NumaRequest::Kind::kOff, -1},
                                         params.location, one_node));
  }
  return domain;
}

absl::StatusOr<CreateParams> Broker::ResolvePlacement(const CreateParams& params,
                                                      bool may_open) const {
  if (!params.auto_location) return params;
  CreateParams resolved = params;
  PlacementRules rules;
  const CapacitySource* source = nullptr;
  std::optional<Location> existing;
  {
    absl::MutexLock lock(&mu_);
    rules = placement_rules_;
    source = capacity_source_;
    // A size Create refuses anyway is refused by ValidateCreate with the
    // same message as for a named location, not by Place as a lack of room.
    if (params.size == 0 || params.size > limits_.max_buffer_bytes) {
      resolved.location = Location::Host();
      return resolved;
    }
    if (auto name = names_.find(params.name); may_open && name != names_.end()) {
      existing = buffers_.at(name->second)->info.location;
    }
  }
  // OpenOrCreate of an existing name opens it wherever it lives; its
  // location is passed on only where the caller may map it, so that a
  // create after a racing unlink never lands anywhere else.
  if (existing.has_value() && Listed(params.mappable, *existing) &&
      pools_.Find(*existing) != nullptr) {
    resolved.location = *existing;
    resolved.placement = absl::StrCat("the name existed at ", existing->ToString(),
                                      " when asked: created there after it went");
    return resolved;
  }

  // Every pool is a candidate, those the caller may not map marked so (Place
  // skips them and says so); only the mappable ones' memory is asked for.
  std::vector<PlacementCandidate> candidates;
  std::vector<const pool::Pool*> asked;
  std::vector<Location> asked_locations;
  for (const pool::Pool* pool : pools_.All()) {
    if (Listed(params.mappable, pool->location())) {
      asked.push_back(pool);
      asked_locations.push_back(pool->location());
    } else {
      candidates.push_back(PlacementCandidate{pool->location(), 0, 0, /*mappable=*/false});
    }
  }
  std::vector<std::optional<Capacity>> outside(asked.size());
  if (source != nullptr && !asked.empty()) outside = source->Of(asked_locations);
  for (std::size_t i = 0; i < asked.size(); ++i) {
    candidates.push_back(
        CandidateOf(*asked[i], i < outside.size() ? outside[i] : std::nullopt));
  }
  auto decision = Place(PlacementRequest{params.size, params.hint}, candidates, rules);
  if (!decision.ok()) {
    return absl::Status(decision.status().code(),
                        absl::StrCat("buffer '", params.name, "' (location auto): ",
                                     decision.status().message()));
  }
  resolved.location = decision->location;
  resolved.placement = std::move(decision->rule);
  return resolved;
}

}  // namespace memd::broker
