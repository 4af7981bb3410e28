#include "client/src/mapping_cache.h"

#include <sys/mman.h>

#include <cerrno>

#include "common/errno_status.h"

namespace memd::internal {
namespace {

// Sweep dead entries when the tables grow past this.
constexpr std::size_t kSweepSize = 1024;

}  // namespace

Mapping::~Mapping() { ::munmap(base, length); }

std::shared_ptr<Mapping> MappingCache::FindReadOnly(std::uint64_t generation,
                                                    const std::string& name) {
  PlainMutexLock lock(&mu_);
  auto named = by_name_.find(name);
  if (named == by_name_.end() || named->second.generation != generation) {
    return nullptr;
  }
  auto live = live_.find(named->second);
  return live == live_.end() ? nullptr : live->second.lock();
}

absl::StatusOr<std::shared_ptr<Mapping>> MappingCache::MapOrShare(
    const Key& key, const std::string& name, int fd, std::uint64_t offset,
    std::uint64_t length, bool populate) {
  PlainMutexLock lock(&mu_);
  std::weak_ptr<Mapping>& slot = live_[key];
  std::shared_ptr<Mapping> mapping = slot.lock();
  if (mapping == nullptr) {
    void* base = ::mmap(nullptr, length,
                        PROT_READ | (key.writable ? PROT_WRITE : 0),
                        MAP_SHARED | (populate ? MAP_POPULATE : 0), fd,
                        static_cast<off_t>(offset));
    if (base == MAP_FAILED) {
      int error = errno;
      live_.erase(key);
      return ErrnoStatus("mmap", error);
    }
    mapping = std::make_shared<Mapping>(base, length, key.writable, key.buffer_id);
    slot = mapping;
  }
  TouchLocked(key, name, mapping);
  if (live_.size() > kSweepSize) {
    for (auto it = live_.begin(); it != live_.end();) {
      if (it->second.expired()) {
        live_.erase(it++);
      } else {
        ++it;
      }
    }
    for (auto it = by_name_.begin(); it != by_name_.end();) {
      if (!live_.contains(it->second)) {
        by_name_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  return mapping;
}

void MappingCache::Touch(const Key& key, const std::string& name,
                         const std::shared_ptr<Mapping>& mapping) {
  PlainMutexLock lock(&mu_);
  TouchLocked(key, name, mapping);
}

void MappingCache::TouchLocked(const Key& key, const std::string& name,
                               const std::shared_ptr<Mapping>& mapping) {
  if (key.writable || mapping->length > retain_bytes_) return;
  by_name_[name] = key;
  auto at = retained_at_.find(key);
  if (at != retained_at_.end()) {
    retained_.splice(retained_.begin(), retained_, at->second);
    return;
  }
  retained_.emplace_front(key, mapping);
  retained_at_[key] = retained_.begin();
  retained_total_ += mapping->length;
  // Dropping the cache's reference unmaps only what no Buffer holds.
  while (retained_total_ > retain_bytes_) {
    retained_total_ -= retained_.back().second->length;
    retained_at_.erase(retained_.back().first);
    retained_.pop_back();
  }
}

std::uint64_t MappingCache::retained_bytes() const {
  PlainMutexLock lock(&mu_);
  return retained_total_;
}

}  // namespace memd::internal
