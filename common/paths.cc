#include "common/paths.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace memd {

std::string DefaultSocketDir() {
  uid_t uid = ::geteuid();
  if (uid == 0) return "/run/memd";
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime != nullptr && runtime[0] != '\0') {
    return absl::StrCat(runtime, "/memd");
  }
  return absl::StrCat("/tmp/memd-", uid);
}

std::vector<std::string> ClientSocketDirs() {
  const char* dir = std::getenv("MEMD_SOCKET_DIR");
  if (dir != nullptr && dir[0] != '\0') return {dir};
  std::vector<std::string> dirs = {DefaultSocketDir()};
  if (dirs.front() != kSystemSocketDir) dirs.push_back(kSystemSocketDir);
  return dirs;
}

std::string ControlSocketPath(const std::string& socket_dir) {
  return absl::StrCat(socket_dir, "/", kControlSocketName);
}

std::string SessionSocketPath(const std::string& socket_dir) {
  return absl::StrCat(socket_dir, "/", kSessionSocketName);
}

}  // namespace memd
