#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "daemon/durable/fd_store.h"
#include "daemon/durable/handoff.h"

namespace memd::durable {

/// The descriptors memd keeps for its successor, in memd itself: a dup of
/// each under its name, so that an in-place upgrade (exec of the new
/// binary) can hand them on without asking anyone (HandOff), and passed on
/// to the service manager's store where there is one, so that they outlive
/// a crash too. Without a manager, buffers survive an upgrade but not a
/// crash.
///
/// Owns its dups and the upstream store. Thread-safe. Errors: Store and
/// Remove return the upstream's (INVALID_ARGUMENT for a name it refuses
/// comes first); the mirror keeps what it was given either way, since the
/// upgrade path does not depend on the manager.
class MirrorStore : public FdStore {
 public:
  // `upstream`: the service manager's store, or nullptr for none.
  explicit MirrorStore(std::unique_ptr<FdStore> upstream);

  absl::Status Store(std::string_view name, int fd) override;
  absl::Status StoreMany(std::string_view name, std::span<const int> fds) override;
  absl::Status Remove(std::string_view name) override;

  // Keeps a dup of `fd` under `name` here only: for a descriptor the
  // upstream store holds already (one memd was started with), which
  // storing again would add to it. Errors: INVALID_ARGUMENT (the name),
  // the dup's errno.
  absl::Status Keep(std::string_view name, int fd);

  bool has_upstream() const { return upstream_ != nullptr; }

  // Every descriptor kept, by name (borrowed: valid while this store keeps
  // it), for ExecWithFds.
  std::vector<PassedFd> HandOff() const;

 private:
  // Dups of `fds` kept under `name`, here only.
  absl::Status KeepDups(std::string_view name, std::span<const int> fds);

  const std::unique_ptr<FdStore> upstream_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::vector<UniqueFd>, std::less<>> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::durable
