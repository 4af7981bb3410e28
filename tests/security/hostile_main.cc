// memd-hostile: one step of an attack on memd, run as another user.
//
//   memd-hostile [--uid UID] COMMAND ARGS...
//
// --uid drops to UID (group UID, no supplementary groups) first. The
// commands are in tests/security/attacks_*.cc; `memd-hostile` alone lists
// them.

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "tests/security/attacks.h"
#include "tests/support/hostile.h"

namespace memd::hostile {
namespace {

struct Entry {
  const char* usage;
  Command run;
};

std::map<std::string, Entry>& Table() {
  static std::map<std::string, Entry> table;
  return table;
}

}  // namespace

Registration::Registration(const char* name, const char* usage, Command run) {
  Table()[name] = Entry{usage, run};
}

std::string SocketDir() {
  const char* dir = std::getenv("MEMD_SOCKET_DIR");
  return dir != nullptr ? dir : "";
}

}  // namespace memd::hostile

int main(int argc, char** argv) {
  using memd::hostile::Table;
  memd::hostile::Args args(argv + 1, argv + argc);
  if (args.size() >= 2 && args[0] == "--uid") {
    const uid_t uid = static_cast<uid_t>(std::stoul(args[1]));
    if (!memd::test::DropPrivileges(uid, uid)) {
      std::perror("memd-hostile: drop privileges");
      return 3;
    }
    args.erase(args.begin(), args.begin() + 2);
  }
  auto command = args.empty() ? Table().end() : Table().find(args[0]);
  if (command == Table().end()) {
    std::fprintf(stderr, "usage: memd-hostile [--uid UID] COMMAND ARGS...\n");
    for (const auto& [name, entry] : Table()) {
      std::fprintf(stderr, "  %s %s\n", name.c_str(), entry.usage);
    }
    return 2;
  }
  args.erase(args.begin());
  return command->second.run(args);
}
