#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/plain_mutex.h"

namespace memd::internal {

/// One mmap of a buffer's memory in this process; unmapped when the last
/// holder lets go. Immutable, so thread-safe.
struct Mapping {
  Mapping(void* base, std::size_t length, bool writable, std::uint64_t buffer_id)
      : base(base), length(length), writable(writable), buffer_id(buffer_id) {}
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  void* const base;
  const std::size_t length;
  const bool writable;
  const std::uint64_t buffer_id;
};

/// This process's mappings of memd buffers. Every Buffer on the same memory
/// shares one mapping. Read-only mappings also stay for a while after their
/// last Buffer is released — the most recently used ones, up to a byte
/// budget — so that opening the same buffer again needs neither a new
/// descriptor nor a new mmap. That is safe because a buffer's memory never
/// changes while its id lives, and ids are never reused; the daemon still
/// grants (and checks) every lease. Thread-safe.
class MappingCache {
 public:
  // `retain_bytes`: most bytes of released read-only mappings kept; 0 keeps
  // none.
  explicit MappingCache(std::uint64_t retain_bytes) : retain_bytes_(retain_bytes) {}

  // Ids restart with the daemon, so the connection generation is part of
  // the key.
  struct Key {
    std::uint64_t generation = 0;
    std::uint64_t buffer_id = 0;
    bool writable = false;
    friend bool operator==(const Key&, const Key&) = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& key) {
      return H::combine(std::move(h), key.generation, key.buffer_id, key.writable);
    }
  };

  // The read-only mapping this process holds or retains for the latest
  // buffer it opened under `name` in `generation`, or nullptr.
  std::shared_ptr<Mapping> FindReadOnly(std::uint64_t generation,
                                        const std::string& name);

  // The mapping for `key`: the existing one, or a new mmap of `fd` at
  // `offset` for `length` bytes (`populate`: with every page mapped now).
  // Errors: the errno mapping of mmap.
  absl::StatusOr<std::shared_ptr<Mapping>> MapOrShare(const Key& key,
                                                      const std::string& name,
                                                      int fd, std::uint64_t offset,
                                                      std::uint64_t length,
                                                      bool populate = false);

  // Marks a mapping used now (it moves to the front of the retained ones).
  void Touch(const Key& key, const std::string& name,
             const std::shared_ptr<Mapping>& mapping);

  std::uint64_t retained_bytes() const;

 private:
  using Retained = std::list<std::pair<Key, std::shared_ptr<Mapping>>>;

  void TouchLocked(const Key& key, const std::string& name,
                   const std::shared_ptr<Mapping>& mapping)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::uint64_t retain_bytes_;
  mutable PlainMutex mu_;
  // Every mapping alive (held by a Buffer or retained).
  absl::flat_hash_map<Key, std::weak_ptr<Mapping>> live_ ABSL_GUARDED_BY(mu_);
  // Read-only mappings kept alive by the cache, most recently used first.
  Retained retained_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Key, Retained::iterator> retained_at_ ABSL_GUARDED_BY(mu_);
  std::uint64_t retained_total_ ABSL_GUARDED_BY(mu_) = 0;
  // Name -> key of the latest read-only mapping opened under it.
  absl::flat_hash_map<std::string, Key> by_name_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::internal
