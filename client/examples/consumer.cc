// memd-example-consumer NAME [SECONDS]: waits up to SECONDS (default 10)
// for buffer NAME to be sealed, prints its bytes and unlinks it.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "memd/client.h"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s NAME [SECONDS]\n", argv[0]);
    return 2;
  }
  const std::string name = argv[1];
  const int seconds = argc == 3 ? std::atoi(argv[2]) : 10;

  auto client = memd::Client::Connect();
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto buffer = (*client)->Open(name, {.wait = absl::Seconds(seconds)});
  if (!buffer.ok()) {
    std::fprintf(stderr, "open: %s\n", buffer.status().ToString().c_str());
    return 1;
  }
  auto bytes = buffer->data();
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  std::fputc('\n', stdout);
  // The name goes now; the memory goes when this lease ends.
  if (auto unlinked = (*client)->Unlink(name); !unlinked.ok()) {
    std::fprintf(stderr, "unlink: %s\n", unlinked.ToString().c_str());
    return 1;
  }
  return 0;
}
