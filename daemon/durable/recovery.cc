#include "daemon/durable/recovery.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/bytes.h"
#include "daemon/durable/state_journal.h"
#include "spdlog/spdlog.h"

namespace memd::durable {
namespace {

constexpr char kStatePrefix[] = "memd.state.";
constexpr char kSegmentPrefix[] = "memd.segment.";

void Forget(FdStore* store, const std::string& name) {
  if (store == nullptr) return;
  if (absl::Status removed = store->Remove(name); !removed.ok()) {
    spdlog::warn("recovery: could not drop {} from the descriptor store: {}", name,
                 removed.ToString());
  }
}

// The GPU at `location` must be the one the segment was made on: ordinals
// follow the driver's order, which a changed CUDA_VISIBLE_DEVICES or a
// replaced card changes.
absl::Status SameDevice(const backend::Backend& backend, const Location& location,
                        const SegmentEntry& entry) {
  if (location.kind != Location::Kind::kDevice) return absl::OkStatus();
  for (const backend::DeviceInfo& device : backend.devices()) {
    if (device.ordinal != location.device) continue;
    if (device.uuid == entry.device_uuid) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        location.ToString(), " is now GPU ", device.uuid, ", not ", entry.device_uuid));
  }
  return absl::FailedPreconditionError(absl::StrCat(location.ToString(), " is not served now"));
}

broker::BufferInfo InfoOf(const BufferEntry& entry, const Location& location) {
  broker::BufferInfo info;
  info.name = entry.name;
  info.id = entry.id;
  info.size = entry.size;
  info.location = location;
  info.owner_uid = entry.owner_uid;
  info.owner_gid = entry.owner_gid;
  info.mode = entry.mode;
  info.state = entry.sealed ? broker::BufferState::kSealed : broker::BufferState::kCreating;
  info.persistence =
      entry.ephemeral ? broker::Persistence::kEphemeral : broker::Persistence::kPersistent;
  info.unlinked = entry.unlinked;
  info.created = absl::FromUnixNanos(entry.created_unix_ns);
  if (entry.sealed) info.sealed = absl::FromUnixNanos(entry.sealed_unix_ns);
  info.creator_pid = entry.creator_pid;
  info.attrs = entry.attrs;
  // A word this memd does not know (written by a newer one) keeps the
  // buffer: pinned is the retention that loses nothing.
  info.retention = broker::ParseRetention(entry.retention).value_or(broker::Retention::kPinned);
  info.numa_node = entry.numa_node;
  return info;
}

}  // namespace

Recovered Recover(std::vector<ListenedFd> fds, backend::Backend& backend,
                  pool::PoolSet& pools, broker::Broker& broker, FdStore* store,
                  const Clock& clock,
                  const std::function<void(const std::string& name, int fd)>& keep) {
  Recovered out;
  out.state.generation = out.report.generation;  // 1 until a state says more.
  const absl::Time start = clock.Now();
  std::vector<ListenedFd> states;
  std::map<std::string, UniqueFd> segment_fds;
  for (ListenedFd& fd : fds) {
    if (absl::StartsWith(fd.name, kStatePrefix)) {
      states.push_back(std::move(fd));
    } else if (absl::StartsWith(fd.name, kSegmentPrefix)) {
      segment_fds[fd.name] = std::move(fd.fd);
    } else {
      spdlog::warn("recovery: ignoring a descriptor named '{}', which memd does not store",
                   fd.name);
    }
  }
  if (states.empty()) {
    out.report.summary = segment_fds.empty()
                             ? "fresh start: no state from a previous memd"
                             : absl::StrCat("fresh start: ", segment_fds.size(),
                                            " segment descriptors but no state; dropped");
    for (auto& [name, fd] : segment_fds) Forget(store, name);
    return out;
  }
  std::vector<NamedFd> named;
  for (const ListenedFd& state : states) {
    out.stale_names.push_back(state.name);
    named.push_back({state.name, state.fd.get()});
    // The next file's epoch is past every name seen, read or not: it must
    // never be one of the names about to be dropped.
    std::uint64_t epoch = 0;
    if (absl::SimpleAtoi(state.name.substr(sizeof(kStatePrefix) - 1), &epoch)) {
      out.epoch = std::max(out.epoch, epoch + 1);
    }
  }
  auto newest = LoadNewest(named);
  if (!newest.ok()) {
    out.report.summary =
        absl::StrCat("started EMPTY: the previous memd's state cannot be read (",
                     newest.status().ToString(), "); its ", segment_fds.size(),
                     " segments are dropped and their buffers lost");
    spdlog::error("recovery: {}", out.report.summary);
    out.report.lost_segments = segment_fds.size();
    for (auto& [name, fd] : segment_fds) Forget(store, name);
    return out;
  }
  for (const NewestState::Skipped& skipped : newest->skipped) {
    spdlog::info("recovery: state file {} not read: {}", skipped.name, skipped.why);
  }
  const LoadedState* loaded = &newest->loaded;
  if (loaded->torn_tail) {
    spdlog::warn("recovery: the state's last change was cut short by the crash: ignored");
  }
  DurableState& previous = newest->loaded.state;
  out.epoch = std::max(out.epoch, loaded->epoch + 1);
  out.report.recovered = true;
  out.report.when = start;
  out.report.generation = previous.generation + 1;
  out.state.generation = out.report.generation;

  // Buffers by segment, in the order of their ids.
  std::map<std::uint64_t, std::vector<const BufferEntry*>> in_segment;
  for (const auto& [id, entry] : previous.buffers) in_segment[entry.segment_id].push_back(&entry);

  std::vector<broker::Broker::AdoptedBuffer> adopted;
  for (const auto& [id, entry] : previous.segments) {
    const std::string name = SegmentFdName(id);
    const auto& buffers = in_segment[id];
    auto lose = [&](const absl::Status& why) {
      spdlog::error("recovery: segment {} ({} at {}) and its {} buffers are lost: {}", id,
                    FormatBytes(entry.bytes), entry.location, buffers.size(), why.ToString());
      out.report.lost_buffers += buffers.size();
      ++out.report.lost_segments;
      Forget(store, name);
    };
    auto fd = segment_fds.extract(name);
    if (fd.empty()) {
      lose(absl::NotFoundError("its descriptor was not handed back"));
      continue;
    }
    auto location = Location::Parse(entry.location);
    pool::Pool* pool = location.ok() ? pools.Find(*location) : nullptr;
    if (pool == nullptr) {
      lose(absl::FailedPreconditionError(absl::StrCat(entry.location, " has no pool now")));
      continue;
    }
    if (absl::Status same = SameDevice(backend, *location, entry); !same.ok()) {
      lose(same);
      continue;
    }
    auto segment = backend.Adopt(*location, entry.bytes, std::move(fd.mapped()));
    if (!segment.ok()) {
      lose(segment.status());
      continue;
    }
    keep(name, (*segment)->DurableFd());
    pool::AdoptedSegment taken;
    taken.id = id;
    taken.small = entry.small;
    // The node is not in the segment's record but in its buffers' (one
    // domain, one node): placed pages keep serving only their node.
    taken.domain = pool::Domain{entry.uid, entry.gid, entry.mode,
                                buffers.empty() ? -1 : buffers.front()->numa_node};
    taken.segment = std::move(*segment);
    for (const BufferEntry* buffer : buffers) {
      taken.live.emplace_back(buffer->offset, buffer->allocation_bytes);
    }
    auto allocations = pool->Adopt(std::move(taken));
    if (!allocations.ok()) {
      lose(allocations.status());
      continue;
    }
    out.state.segments.emplace(id, entry);
    ++out.report.segments;
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      out.state.buffers.emplace(buffers[i]->id, *buffers[i]);
      out.report.bytes += (*allocations)[i].bytes;
      adopted.push_back({InfoOf(*buffers[i], *location), std::move((*allocations)[i])});
    }
  }
  for (auto& [name, fd] : segment_fds) {
    spdlog::warn("recovery: segment descriptor {} is in no state: dropped", name);
    Forget(store, name);
  }
  out.report.buffers = adopted.size();
  // The sessions and the leases they held on buffers adopted now: each may
  // be re-claimed by its client until the grace period ends.
  std::vector<broker::Broker::AdoptedSession> sessions;
  std::vector<broker::Broker::AdoptedLease> leases;
  for (const auto& [id, lease] : previous.leases) {
    if (!out.state.buffers.contains(lease.buffer_id)) continue;  // Lost with its segment.
    out.state.leases.emplace(id, lease);
    leases.push_back({lease.id, lease.session_id, lease.buffer_id,
                      lease.writable ? backend::Access::kReadWrite : backend::Access::kRead});
  }
  for (const auto& [id, session] : previous.sessions) {
    out.state.sessions.emplace(id, session);
    sessions.push_back({session.id, session.uid, session.token_digest});
  }
  if (absl::Status taken = broker.Adopt(std::move(adopted), std::move(sessions), std::move(leases));
      !taken.ok()) {
    // The state read but does not fit together: nothing of it is adopted.
    out.report.summary = absl::StrCat("started EMPTY: the previous memd's buffers do not fit (",
                                      taken.ToString(), ")");
    spdlog::error("recovery: {}", out.report.summary);
    for (const auto& [id, entry] : out.state.segments) Forget(store, SegmentFdName(id));
    out.state = DurableState();
    out.state.generation = out.report.generation;
    out.report.lost_buffers += out.report.buffers;
    out.report.lost_segments += out.report.segments;
    out.report.buffers = out.report.bytes = out.report.segments = 0;
  }
  // A limit lowered across the restart: the memory is kept all the same.
  for (pool::Pool* pool : pools.All()) {
    const pool::PoolStats stats = pool->Stats();
    if (stats.reserved_bytes > stats.limit_bytes) {
      spdlog::warn(
          "recovery: the {} pool holds {} adopted, past its limit of {}; it reserves no more "
          "until buffers go",
          pool->location().ToString(), FormatBytes(stats.reserved_bytes),
          FormatBytes(stats.limit_bytes));
    }
  }
  out.report.took = clock.Now() - start;
  if (out.report.summary.empty()) {
    out.report.summary = absl::StrCat(
        "generation ", out.report.generation, ": adopted ", out.report.buffers, " buffers (",
        FormatBytes(out.report.bytes), ") in ", out.report.segments, " segments from state epoch ",
        loaded->epoch, " in ", absl::FormatDuration(out.report.took), "; ",
        out.state.leases.size(), " leases of ", previous.sessions.size(),
        " earlier sessions may be re-claimed",
        out.report.lost_buffers > 0 ? absl::StrCat("; LOST ", out.report.lost_buffers) : "");
  }
  return out;
}

}  // namespace memd::durable
