#include "daemon/pool/arenas.h"

#include <atomic>

#include "absl/hash/hash.h"

namespace memd::pool {
namespace {

std::atomic<std::uint64_t> next_instance{1};

}  // namespace

Arenas::Arenas(std::size_t classes)
    : classes_(classes), instance_(next_instance.fetch_add(1)) {}

Arena& Arenas::Find(const Domain& domain) {
  Shard& shard = shards_[absl::Hash<Domain>{}(domain) % kShards];
  Arena* arena;
  {
    absl::MutexLock lock(&shard.mu);
    std::unique_ptr<Arena>& slot = shard.arenas[domain];
    if (slot == nullptr) slot = std::make_unique<Arena>(domain, classes_);
    arena = slot.get();
  }
  arenas_internal::last_used = arenas_internal::LastUsed{instance_, domain, arena};
  return *arena;
}

std::vector<Arena*> Arenas::All() const {
  std::vector<Arena*> arenas;
  for (Shard& shard : shards_) {
    absl::MutexLock lock(&shard.mu);
    for (auto& [domain, arena] : shard.arenas) arenas.push_back(arena.get());
  }
  return arenas;
}

}  // namespace memd::pool
