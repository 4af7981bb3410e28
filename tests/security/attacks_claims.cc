// Steps around who made a buffer: publishing one (a producer, or a forger
// who claims the name first), reading one with or without demanding its
// producer, and OpenOrCreate on a name the caller may not read (issue 9,
// findings 9 and 10). Also the plain steps other users take to show that an
// attack left them unaffected. All through libmemd, as real clients.
//
// Each prints what it got, or the failure as "CODE: message" with exit 1.

#include <cstdio>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "memd/client.h"
#include "tests/security/attacks.h"

namespace memd::hostile {
namespace {

int Fail(const absl::Status& status) {
  std::printf("%s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
              std::string(status.message()).c_str());
  return 1;
}

absl::StatusOr<std::unique_ptr<Client>> Connect() {
  ConnectOptions options;
  options.socket_dir = SocketDir();
  return Client::Connect(options);
}

std::optional<uid_t> OwnerArg(const Args& args, std::size_t index) {
  if (args.size() <= index) return std::nullopt;
  return static_cast<uid_t>(std::stoul(args[index]));
}

std::string Text(const Buffer& buffer) {
  auto bytes = buffer.data();
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace

MEMD_ATTACK(start_session, ": connects and pings; prints 'ok'") {
  if (!args.empty()) return 2;
  auto client = Connect();
  if (!client.ok()) return Fail(client.status());
  if (absl::Status pinged = (*client)->Ping(); !pinged.ok()) return Fail(pinged);
  std::printf("ok\n");
  return 0;
}

MEMD_ATTACK(publish_text,
            "NAME TEXT MODE: creates NAME (octal MODE) holding TEXT and seals "
            "it; prints 'published'") {
  if (args.size() != 3) return 2;
  auto client = Connect();
  if (!client.ok()) return Fail(client.status());
  CreateOptions options;
  options.mode = static_cast<std::uint32_t>(std::stoul(args[2], nullptr, 8));
  auto buffer = (*client)->Create(args[0], args[1].size(), options);
  if (!buffer.ok()) return Fail(buffer.status());
  args[1].copy(reinterpret_cast<char*>(buffer->mutable_data().data()), args[1].size());
  if (absl::Status sealed = buffer->Seal(); !sealed.ok()) return Fail(sealed);
  std::printf("published\n");
  return 0;
}

MEMD_ATTACK(read_text,
            "NAME WAIT_MS [OWNER_UID]: opens NAME read-only, waiting up to "
            "WAIT_MS for its seal, demanding that OWNER_UID made it if given; "
            "prints 'read: TEXT'") {
  if (args.size() != 2 && args.size() != 3) return 2;
  auto client = Connect();
  if (!client.ok()) return Fail(client.status());
  OpenOptions options;
  options.wait = absl::Milliseconds(std::stoll(args[1]));
  options.owner = OwnerArg(args, 2);
  auto buffer = (*client)->Open(args[0], options);
  if (!buffer.ok()) return Fail(buffer.status());
  std::printf("read: %s\n", Text(*buffer).c_str());
  return 0;
}

MEMD_ATTACK(open_or_create_text,
            "NAME SIZE [OWNER_UID]: OpenOrCreate of NAME with SIZE bytes, "
            "demanding OWNER_UID of an existing buffer if given; prints "
            "'created' or 'read: TEXT'") {
  if (args.size() != 2 && args.size() != 3) return 2;
  auto client = Connect();
  if (!client.ok()) return Fail(client.status());
  CreateOptions options;
  options.existing_owner = OwnerArg(args, 2);
  auto buffer = (*client)->OpenOrCreate(args[0], std::stoull(args[1]), options);
  if (!buffer.ok()) return Fail(buffer.status());
  if (buffer->created()) {
    std::printf("created\n");
  } else {
    std::printf("read: %s\n", Text(*buffer).c_str());
  }
  return 0;
}

}  // namespace memd::hostile
