#pragma once

#include <string>
#include <vector>

namespace memd {

// The socket directory when none is configured: /run/memd for root, else
// $XDG_RUNTIME_DIR/memd, else /tmp/memd-$UID.
std::string DefaultSocketDir();

// Where memd listens as a system service (systemd's RuntimeDirectory=memd).
inline constexpr char kSystemSocketDir[] = "/run/memd";

// The socket directories a client tries, in order: MEMD_SOCKET_DIR alone
// when set and non-empty (exact: nothing else is tried); else
// DefaultSocketDir() (the user's own daemon) and then, for a user other
// than root, kSystemSocketDir (the node's system service).
std::vector<std::string> ClientSocketDirs();

inline constexpr char kControlSocketName[] = "memd.sock";
inline constexpr char kSessionSocketName[] = "session.sock";

std::string ControlSocketPath(const std::string& socket_dir);
std::string SessionSocketPath(const std::string& socket_dir);

}  // namespace memd
