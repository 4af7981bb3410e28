#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pool/arena.h"
#include "daemon/pool/pool.h"

namespace memd::pool {
namespace arenas_internal {

// The last arena a thread looked up, and which Arenas it belongs to (by
// instance number: an address could be reused by a later pool).
struct LastUsed {
  std::uint64_t owner = 0;
  Domain domain;
  Arena* arena = nullptr;
};
inline constinit thread_local LastUsed last_used;

}  // namespace arenas_internal

/// The arenas of one pool, one per domain: made on first use and kept for
/// the pool's lifetime, so that a reference to one stays valid. Owns them.
/// Thread-safe: a lookup takes one of kShards mutexes, or none when the
/// thread's last lookup (cached per thread) was for the same pool and domain
/// — the allocation hot path.
class Arenas {
 public:
  explicit Arenas(std::size_t classes);

  Arena& For(const Domain& domain) {
    const arenas_internal::LastUsed& last = arenas_internal::last_used;
    if (last.owner == instance_ && last.domain == domain) return *last.arena;
    return Find(domain);
  }
  // A snapshot: arenas made afterwards are not in it.
  std::vector<Arena*> All() const;

 private:
  struct Shard {
    absl::Mutex mu;
    absl::flat_hash_map<Domain, std::unique_ptr<Arena>> arenas ABSL_GUARDED_BY(mu);
  };
  static constexpr std::size_t kShards = 16;
  Arena& Find(const Domain& domain);

  const std::size_t classes_;
  const std::uint64_t instance_;
  mutable Shard shards_[kShards];
};

}  // namespace memd::pool
