#pragma once

// The commands of memd-hostile: one attack step each, run as another user
// by RunHostile (tests/support/hostile.h). An attack file adds one with
//
//   MEMD_ATTACK(open_and_write, "NAME: opens NAME read-only, then writes") {
//     ... args[0] is NAME; print what happened; return an exit code ...
//   }
//
// Exit codes: 0 the step did what the command says, 1 it failed as a
// client would see it (the reason on stderr), 2 usage; others as documented
// by each command.

#include <string>
#include <vector>

namespace memd::hostile {

using Args = std::vector<std::string>;
using Command = int (*)(const Args& args);

// Adds a command to the table memd-hostile dispatches on.
struct Registration {
  Registration(const char* name, const char* usage, Command run);
};

#define MEMD_ATTACK(name, usage)                                        \
  static int Attack_##name(const ::memd::hostile::Args& args);          \
  static const ::memd::hostile::Registration kRegistered_##name(        \
      #name, usage, &Attack_##name);                                    \
  static int Attack_##name(const ::memd::hostile::Args& args)

// The socket directory of the daemon under attack ($MEMD_SOCKET_DIR).
std::string SocketDir();

}  // namespace memd::hostile
