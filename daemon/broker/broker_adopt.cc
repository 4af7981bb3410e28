// Durable recovery's side of the broker: buffers a previous memd left, taken
// back with the ids, names and owners they had, and the grace period in
// which their holders may come back (docs/design.md, "Durability").

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "daemon/broker/broker.h"
#include "daemon/broker/with_lock.h"

namespace memd::broker {
namespace {

// Whether a holder may come back for the buffer: a sealed, persistent,
// linked buffer lives without one; every other kind went with its last
// lease, which the recovery cannot tell from one about to be re-claimed.
bool AwaitsHolders(const BufferInfo& info) {
  return info.unlinked || info.persistence == Persistence::kEphemeral ||
         info.state != BufferState::kSealed;
}

}  // namespace

absl::Status Broker::Adopt(std::vector<AdoptedBuffer> buffers) {
  return WithLock([&](AfterUnlock& after) -> absl::Status {
    auto refuse = [&](absl::Status status) {
      for (AdoptedBuffer& adopted : buffers) {
        pool::Pool* pool = pools_.Find(adopted.info.location);
        if (pool == nullptr) continue;  // Not this broker's to free.
        auto buffer = std::make_unique<Buffer>();
        buffer->allocation = std::move(adopted.allocation);
        after.freed.emplace_back(pool, std::move(buffer));
      }
      return status;
    };
    if (!sessions_.empty() || !buffers_.empty()) {
      return refuse(absl::FailedPreconditionError(absl::StrCat(
          "buffers are adopted before anything else: ", sessions_.size(), " sessions and ",
          buffers_.size(), " buffers exist already")));
    }
    absl::flat_hash_set<BufferId> ids;
    absl::flat_hash_set<std::string> names;
    for (const AdoptedBuffer& adopted : buffers) {
      const BufferInfo& info = adopted.info;
      if (info.id == 0 || !ids.insert(info.id).second) {
        return refuse(absl::InvalidArgumentError(
            absl::StrCat("adopted buffer '", info.name, "' has id ", info.id,
                         ", which is 0 or another adopted buffer's")));
      }
      if (!info.unlinked && !names.insert(info.name).second) {
        return refuse(absl::InvalidArgumentError(
            absl::StrCat("two adopted buffers are named '", info.name, "'")));
      }
      if (pools_.Find(info.location) == nullptr) {
        return refuse(absl::InvalidArgumentError(absl::StrCat(
            "adopted buffer '", info.name, "' lives at ", info.location.ToString(),
            ", which this memd does not serve (it serves ", pools_.LocationNames(), ")")));
      }
    }
    for (AdoptedBuffer& adopted : buffers) {
      auto buffer = std::make_unique<Buffer>();
      buffer->info = std::move(adopted.info);
      buffer->info.lease_count = 0;
      buffer->pool = pools_.Find(buffer->info.location);
      buffer->allocation = std::move(adopted.allocation);
      buffer->awaiting_holders = AwaitsHolders(buffer->info);
      const BufferInfo& info = buffer->info;
      buffer->pin = std::make_shared<CopyPin>([this, id = info.id] { CopiesLetGo(id); });
      // Charged to no session: the one that created it is gone.
      buffer->charge = Charge{info.owner_uid, 0, info.creator_pid, info.location,
                              buffer->allocation.bytes};
      usage_.Add(buffer->charge);
      uid_counts_.Add(info.owner_uid, UidCounts::Kind::kBuffers);
      if (!info.unlinked) names_.emplace(info.name, info.id);
      in_grace_ = in_grace_ || buffer->awaiting_holders;
      buffers_.emplace(info.id, std::move(buffer));
    }
    return absl::OkStatus();
  });
}

std::uint64_t Broker::EndGrace() {
  return WithLock([&](AfterUnlock& after) -> std::uint64_t {
    if (!in_grace_) return 0;
    in_grace_ = false;
    std::vector<Buffer*> waiting;
    for (auto& [id, buffer] : buffers_) {
      if (buffer->awaiting_holders) waiting.push_back(buffer.get());
    }
    std::uint64_t gone = 0;
    for (Buffer* buffer : waiting) {
      buffer->awaiting_holders = false;
      if (buffer->info.lease_count > 0) continue;  // Re-claimed.
      ++gone;
      LastLeaseEndedLocked(*buffer, after);
    }
    return gone;
  });
}

}  // namespace memd::broker
