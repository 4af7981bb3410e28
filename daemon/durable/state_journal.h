#pragma once

// The durable state as memd changes it: each change batch appended to the
// current state file, and the file compacted into a new one (the next epoch)
// when its journal grows or fills.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/durable/state.h"
#include "daemon/durable/state_file.h"

namespace memd::durable {

// Where state files go: the service manager's descriptor store in memd,
// a map in tests. `store` must keep its own duplicate of `fd` (the journal
// closes its copy when it moves on); `remove` drops the named descriptor.
struct StateStoreHooks {
  std::function<absl::Status(const std::string& name, int fd)> store;
  std::function<absl::Status(const std::string& name)> remove;
};

struct StateJournalOptions {
  // A journal part past max(compact_floor, 4 x the snapshot) is compacted.
  std::uint64_t compact_floor = std::uint64_t{1} << 20;
  // Room for appends in each file: max(journal_room, 8 x the snapshot), so
  // that compaction normally comes first.
  std::uint64_t journal_room = 2 * (std::uint64_t{1} << 20);
  // Names in the store that the first file supersedes (the state files this
  // start adopted from), removed once it is stored.
  std::vector<std::string> superseded;
};

/// Keeps the durable state: owns the current StateFile and a mirror of the
/// state it holds, and stores each new file through the hooks before it
/// removes the one it replaces, so the store always holds a whole state (a
/// crash in between leaves two, and LoadNewest takes the newer).
/// Thread-safe (one mutex, held across the hooks: they must not call back).
/// Errors: Create: those of StateFile::Create and of the store hook.
/// Record: those of the hooks, or of StateFile::Create while compacting;
/// the change is in the mirror whatever is returned, and the journal catches
/// up (a new file, stored again) at the next Record.
class StateJournal {
 public:
  // Stores a first file of `epoch` holding `initial`, then removes
  // options.superseded (one that fails is tried again, and reported, at the
  // first Record). Fails only when the first file cannot be made or stored.
  static absl::StatusOr<std::unique_ptr<StateJournal>> Create(DurableState initial,
                                                              std::uint64_t epoch,
                                                              StateStoreHooks hooks,
                                                              StateJournalOptions options = {});

  // Applies `batch` to the state as one atomic change, and makes it durable:
  // one frame appended, no system call unless the file compacts.
  absl::Status Record(std::span<const Change> batch);

  DurableState state() const;
  // The current file's epoch (StateFdName(epoch) in the store once stored).
  std::uint64_t epoch() const;
  // The current file's descriptor, owned by the journal (tests read it).
  int fd() const;

 private:
  StateJournal(DurableState state, StateFile file, StateStoreHooks hooks,
               StateJournalOptions options);

  std::uint64_t CompactAfter() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Replaces file_ by a new file of the next epoch holding mirror_.
  absl::Status Compact() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores file_ if it is not yet, then removes what it supersedes.
  absl::Status StoreCurrent() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes to_remove_. A name whose removal fails is dropped, or kept for
  // the next try with `keep_failed`: a superseded file left behind is
  // harmless (LoadNewest skips older epochs unread), but retrying on every
  // Record would put a hook call on the append path.
  absl::Status RemoveSuperseded(bool keep_failed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StateStoreHooks hooks_;
  const StateJournalOptions options_;
  mutable absl::Mutex mu_;
  IndexedState mirror_ ABSL_GUARDED_BY(mu_);
  StateFile file_ ABSL_GUARDED_BY(mu_);
  // file_ lacks a batch the mirror has (an append failed): never append to
  // it again, compact first.
  bool behind_ ABSL_GUARDED_BY(mu_) = false;
  bool stored_ ABSL_GUARDED_BY(mu_) = false;
  // Names in the store that file_ supersedes, removed once it is stored.
  std::vector<std::string> to_remove_ ABSL_GUARDED_BY(mu_);
};

// A descriptor from the store and the name it was stored under.
struct NamedFd {
  std::string name;
  int fd = -1;
};

struct NewestState {
  LoadedState loaded;
  std::string name;  // StateFdName(loaded.epoch).
  // Every state file not adopted, and why (older than the one adopted).
  struct Skipped {
    std::string name;
    std::string why;
  };
  std::vector<Skipped> skipped;
};

// The state to adopt among the descriptors of a store: the state file of the
// highest epoch (names not "memd.state.<epoch>" are not state files and are
// ignored). Older ones are skipped unread: a file is stored only once whole,
// so the newest is the truth, and an older one lacks its later changes.
// Hence an unreadable newest file is never answered with an older one.
// Errors: NOT_FOUND (no state file: a first start); DATA_LOSS when the
// newest does not load (or its header's epoch is not its name's) or two
// files claim the highest epoch; FAILED_PRECONDITION when the newest is of
// another format version.
absl::StatusOr<NewestState> LoadNewest(std::span<const NamedFd> fds);

}  // namespace memd::durable
