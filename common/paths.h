#pragma once

#include <string>

namespace memd {

// The socket directory when none is configured: /run/memd for root, else
// $XDG_RUNTIME_DIR/memd, else /tmp/memd-$UID.
std::string DefaultSocketDir();

// What a client uses: MEMD_SOCKET_DIR when set and non-empty, else
// DefaultSocketDir().
std::string ClientSocketDir();

inline constexpr char kControlSocketName[] = "memd.sock";
inline constexpr char kSessionSocketName[] = "session.sock";

std::string ControlSocketPath(const std::string& socket_dir);
std::string SessionSocketPath(const std::string& socket_dir);

}  // namespace memd
