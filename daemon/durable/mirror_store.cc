#include "daemon/durable/mirror_store.h"

#include <fcntl.h>

#include <cerrno>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/status_macros.h"

namespace memd::durable {

MirrorStore::MirrorStore(std::unique_ptr<FdStore> upstream) : upstream_(std::move(upstream)) {}

absl::Status MirrorStore::Store(std::string_view name, int fd) {
  return StoreMany(name, {&fd, 1});
}

absl::Status MirrorStore::StoreMany(std::string_view name, std::span<const int> fds) {
  MEMD_RETURN_IF_ERROR(KeepDups(name, fds));
  return upstream_ == nullptr ? absl::OkStatus() : upstream_->StoreMany(name, fds);
}

absl::Status MirrorStore::Keep(std::string_view name, int fd) { return KeepDups(name, {&fd, 1}); }

absl::Status MirrorStore::KeepDups(std::string_view name, std::span<const int> fds) {
  if (!FdNameIsValid(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", std::string(name), "' cannot name a stored descriptor"));
  }
  std::vector<UniqueFd> dups;
  for (int fd : fds) {
    UniqueFd dup(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
    if (!dup.valid()) return ErrnoStatus("fcntl(F_DUPFD_CLOEXEC)", errno);
    dups.push_back(std::move(dup));
  }
  absl::MutexLock lock(&mu_);
  auto& kept = kept_[std::string(name)];
  for (UniqueFd& dup : dups) kept.push_back(std::move(dup));
  return absl::OkStatus();
}

absl::Status MirrorStore::Remove(std::string_view name) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = kept_.find(name); it != kept_.end()) kept_.erase(it);
  }
  return upstream_ == nullptr ? absl::OkStatus() : upstream_->Remove(name);
}

std::vector<PassedFd> MirrorStore::HandOff() const {
  absl::MutexLock lock(&mu_);
  std::vector<PassedFd> fds;
  for (const auto& [name, kept] : kept_) {
    for (const UniqueFd& fd : kept) fds.push_back({name, fd.get()});
  }
  return fds;
}

}  // namespace memd::durable
