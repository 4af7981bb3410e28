// DeviceImports' keeping of read-only imports after their last Buffer goes
// (the class comment in device_imports.h says why and when they go).

#include <utility>

#include "client/src/device_imports.h"

namespace memd::internal {

std::optional<DeviceImports::Kept> DeviceImports::FindKept(std::uint64_t generation,
                                                           const std::string& name) {
  PlainMutexLock lock(&kept_mu_);
  auto found = kept_by_name_.find(name);
  if (found == kept_by_name_.end() || found->second->generation != generation) {
    return std::nullopt;
  }
  return Kept{found->second->buffer_id, found->second->import};
}

void DeviceImports::Keep(std::uint64_t generation, const std::string& name,
                         std::uint64_t buffer_id, std::uint64_t bytes,
                         std::shared_ptr<DeviceImport> import) {
  std::vector<std::shared_ptr<DeviceImport>> dropped;  // As in Forget.
  {
    PlainMutexLock lock(&kept_mu_);
    if (bytes > keep_bytes_) return;
    auto known = kept_by_id_.find({generation, buffer_id});
    if (known != kept_by_id_.end()) {
      kept_.splice(kept_.begin(), kept_, known->second);
      if (known->second->name != name) {
        // Kept under the name it was last opened by.
        if (auto old = kept_by_name_.find(known->second->name);
            old != kept_by_name_.end() && old->second == known->second) {
          kept_by_name_.erase(old);
        }
        known->second->name = name;
      }
    } else {
      kept_.push_front(KeptEntry{generation, buffer_id, name, bytes, std::move(import)});
      kept_by_id_[{generation, buffer_id}] = kept_.begin();
      kept_total_ += bytes;
    }
    // A name now means this buffer: one it meant before is still kept (by
    // id) until memd frees it or the budget takes it.
    kept_by_name_[name] = kept_.begin();
    while (kept_total_ > keep_bytes_) EraseKeptLocked(std::prev(kept_.end()), dropped);
  }
}

void DeviceImports::Forget(std::uint64_t generation,
                           const std::vector<std::uint64_t>& buffer_ids) {
  // Declared first, so that the imports go after the lock: unmaps call
  // the driver.
  std::vector<std::shared_ptr<DeviceImport>> dropped;
  PlainMutexLock lock(&kept_mu_);
  for (std::uint64_t id : buffer_ids) {
    auto found = kept_by_id_.find({generation, id});
    if (found != kept_by_id_.end()) EraseKeptLocked(found->second, dropped);
  }
}

void DeviceImports::ForgetAll() {
  KeptList dropped;  // As in Forget: released after the lock.
  PlainMutexLock lock(&kept_mu_);
  dropped.swap(kept_);
  kept_by_id_.clear();
  kept_by_name_.clear();
  kept_total_ = 0;
}

std::uint64_t DeviceImports::kept_bytes() const {
  PlainMutexLock lock(&kept_mu_);
  return kept_total_;
}

void DeviceImports::EraseKeptLocked(KeptList::iterator at,
                                    std::vector<std::shared_ptr<DeviceImport>>& dropped) {
  if (auto named = kept_by_name_.find(at->name);
      named != kept_by_name_.end() && named->second == at) {
    kept_by_name_.erase(named);
  }
  kept_by_id_.erase({at->generation, at->buffer_id});
  kept_total_ -= at->bytes;
  dropped.push_back(std::move(at->import));
  kept_.erase(at);
}

}  // namespace memd::internal
