#include "client/src/daemon_trust.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/errno_status.h"

namespace memd::internal {
namespace {

constexpr mode_t kOthersWrite = S_IWGRP | S_IWOTH;

std::string Mode(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

// What to set when `uid` is memd's after all.
std::string TrustHint(uid_t uid) {
  return absl::StrCat("set MEMD_DAEMON_UID=", uid, " (or ConnectOptions::daemon_uid)");
}

}  // namespace

std::string DaemonTrust::Describe() const {
  std::string who = self == 0 ? "root (this process)"
                              : absl::StrCat("root, uid ", self, " (this process)");
  if (daemon_uid.has_value() && *daemon_uid != 0 && *daemon_uid != self) {
    absl::StrAppend(&who, " and uid ", *daemon_uid, " (MEMD_DAEMON_UID)");
  }
  return who;
}

absl::StatusOr<uid_t> CheckSocketDirChain(const std::vector<DirFacts>& chain,
                                          const DaemonTrust& trust) {
  if (chain.empty()) return absl::InternalError("no socket directory to check");
  const DirFacts& dir = chain[0];
  if ((dir.mode & kOthersWrite) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "socket directory ", dir.path, " (owner uid ", dir.owner, ", mode ",
        Mode(dir.mode), ") may be written by group or other users, who could put "
        "their own sockets there; this client does not talk to it. Whoever runs "
        "memd should make it writable by its owner alone (chmod go-w ", dir.path,
        ")"));
  }
  // Only root can make a directory in one that root alone may write: the
  // owner was given it on purpose (systemd's RuntimeDirectory=, owned by
  // User=, under /run).
  const bool given_by_root = chain.size() > 1 && chain[1].owner == 0 &&
                             (chain[1].mode & kOthersWrite) == 0;
  if (!trust.Trusts(dir.owner) && !given_by_root) {
    return absl::PermissionDeniedError(absl::StrCat(
        "socket directory ", dir.path, " belongs to uid ", dir.owner, " (mode ",
        Mode(dir.mode), "), whom this client does not trust to run memd (it trusts ",
        trust.Describe(),
        ", and the owner of a directory root made for memd, as systemd does in "
        "/run); another user may have made it to impersonate memd. If memd runs "
        "as uid ", dir.owner, " there, ", TrustHint(dir.owner),
        "; otherwise point MEMD_SOCKET_DIR at memd's own directory"));
  }
  for (std::size_t i = 1; i < chain.size(); ++i) {
    const DirFacts& above = chain[i];
    if (!trust.Trusts(above.owner) && above.owner != dir.owner) {
      return absl::PermissionDeniedError(absl::StrCat(
          above.path, ", above the socket directory ", dir.path, ", belongs to uid ",
          above.owner, " (mode ", Mode(above.mode),
          "), who could replace the socket directory; this client trusts ",
          trust.Describe(), ". If memd runs as uid ", above.owner, ", ",
          TrustHint(above.owner), "; otherwise move the socket directory"));
    }
    if ((above.mode & kOthersWrite) != 0 && (above.mode & S_ISVTX) == 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          above.path, ", above the socket directory ", dir.path, ", may be written "
          "by group or other users (mode ", Mode(above.mode),
          ", not sticky), who could replace the socket directory; make it "
          "writable by its owner alone or move the socket directory"));
    }
  }
  return dir.owner;
}

absl::Status CheckDaemonPeer(const std::string& socket_dir, uid_t dir_owner,
                             uid_t peer, const DaemonTrust& trust) {
  if (trust.Trusts(peer) || peer == dir_owner) return absl::OkStatus();
  const std::string owner =
      trust.Trusts(dir_owner)
          ? ""
          : absl::StrCat(", and uid ", dir_owner, ", the socket directory's owner");
  return absl::PermissionDeniedError(absl::StrCat(
      "memd at ", socket_dir, " runs as uid ", peer,
      ", whom this client does not trust (it trusts ", trust.Describe(), owner,
      "); if that daemon is genuine, ", TrustHint(peer)));
}

absl::StatusOr<std::vector<DirFacts>> DescribeDirChain(int dir_fd,
                                                       const std::string& path) {
  std::vector<DirFacts> chain;
  struct stat info;
  if (::fstat(dir_fd, &info) != 0) {
    return ErrnoStatus(absl::StrCat("stat ", path), errno);
  }
  chain.push_back({path, info.st_uid, info.st_mode});
  std::string above = path;
  while (above.size() > 1) {
    const std::size_t slash = above.rfind('/');
    if (slash == std::string::npos) break;  // A relative path: stop at its top.
    above = slash == 0 ? "/" : above.substr(0, slash);
    if (::stat(above.c_str(), &info) != 0) {
      return ErrnoStatus(absl::StrCat("stat ", above), errno);
    }
    chain.push_back({above, info.st_uid, info.st_mode});
  }
  return chain;
}

absl::StatusOr<std::optional<uid_t>> DaemonUidFromEnvironment() {
  const char* text = std::getenv("MEMD_DAEMON_UID");
  if (text == nullptr || *text == '\0') return std::nullopt;
  std::uint32_t uid = 0;
  if (!absl::SimpleAtoi(text, &uid) || uid == static_cast<std::uint32_t>(-1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MEMD_DAEMON_UID is '", text,
        "', not a uid: give the number memd runs as (id -u memd prints it)"));
  }
  return static_cast<uid_t>(uid);
}

}  // namespace memd::internal
