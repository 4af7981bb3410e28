#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"

#include "common/location.h"
#include "daemon/pool/pool.h"

namespace memd::pool {

/// The pools of the daemon, one per location. Owns them. Built once at
/// start-up, read-only afterwards, so thread-safe for lookups.
class PoolSet {
 public:
  void Add(std::unique_ptr<Pool> pool) { pools_.push_back(std::move(pool)); }

  // The pool for `location`, or nullptr when this node has none.
  Pool* Find(const Location& location) const {
    for (const auto& pool : pools_) {
      if (pool->location() == location) return pool.get();
    }
    return nullptr;
  }

  std::vector<Pool*> All() const {
    std::vector<Pool*> all;
    for (const auto& pool : pools_) all.push_back(pool.get());
    return all;
  }

  // Trims every pool (Pool::Trim); returns the bytes given back.
  std::uint64_t Trim(absl::Duration min_idle) const {
    std::uint64_t bytes = 0;
    for (const auto& pool : pools_) bytes += pool->Trim(min_idle);
    return bytes;
  }

  std::vector<PoolStats> Stats() const {
    std::vector<PoolStats> stats;
    stats.reserve(pools_.size());
    for (const auto& pool : pools_) stats.push_back(pool->Stats());
    return stats;
  }

  // "host, pinned": for messages.
  std::string LocationNames() const {
    std::string names;
    for (const auto& pool : pools_) {
      if (!names.empty()) names += ", ";
      names += pool->location().ToString();
    }
    return names;
  }

 private:
  std::vector<std::unique_ptr<Pool>> pools_;
};

}  // namespace memd::pool
