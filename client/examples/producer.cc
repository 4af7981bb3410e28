// memd-example-producer NAME TEXT: publishes TEXT as a sealed buffer NAME
// that any process of this user can open, then exits; the buffer stays.
//
//   build/bin/memd-example-producer examples/pair "hello from a producer"
//   build/bin/memd-example-consumer examples/pair

#include <cstdio>
#include <cstring>
#include <string>

#include "memd/client.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s NAME TEXT\n", argv[0]);
    return 2;
  }
  const std::string name = argv[1];
  const std::string text = argv[2];

  auto client = memd::Client::Connect();  // $MEMD_SOCKET_DIR or the default.
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto buffer = (*client)->Create(name, text.size());
  if (!buffer.ok()) {
    std::fprintf(stderr, "create: %s\n", buffer.status().ToString().c_str());
    return 1;
  }
  std::memcpy(buffer->mutable_data().data(), text.data(), text.size());
  if (auto sealed = buffer->Seal(); !sealed.ok()) {
    std::fprintf(stderr, "seal: %s\n", sealed.ToString().c_str());
    return 1;
  }
  std::printf("published %s (%zu bytes)\n", name.c_str(), text.size());
  return 0;  // The Buffer releases its lease; a persistent buffer lives on.
}
