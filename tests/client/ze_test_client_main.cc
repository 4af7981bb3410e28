// memd-ze-test-client: a client process for the Level Zero tests. It loads
// the Level Zero loader (the tests put the project's fake driver under it
// with ZE_ENABLE_ALT_DRIVERS) and moves bytes in and out of device buffers
// through an immediate command list of its own, as an application would.
//
//   memd-ze-test-client produce NAME SIZE SEED LOCATION [own-context] [mode=OCTAL]
//       create NAME at LOCATION ("device:N"), copy the pattern in, seal;
//       own-context: open it in a context this program made, passed in
//       ConnectOptions::level_zero_context, else in libmemd's; mode: the
//       buffer's (default 0600)
//   memd-ze-test-client consume NAME SIZE SEED
//       open NAME, copy it out, check size and pattern (exit 4 if wrong)
//   memd-ze-test-client create-hold NAME SIZE LOCATION
//       create NAME unsealed, print "held", wait to be killed
//   memd-ze-test-client join NAME SEED
//       open NAME read-write, copy the pattern in, seal
//   memd-ze-test-client overwrite NAME SEED
//       open NAME read-only, as every reader does, and copy the pattern
//       into its device pointer (Level Zero opens memory read-write only)
//   memd-ze-test-client zeros NAME SIZE LOCATION
//       create NAME with mode 0640 (another domain than produce's 0600)
//       and check that it reads as zeros (exit 4 if not)
//
// Each prints "OK" on success, then the fake driver's live IPC opens after
// every Buffer and the Client went ("ipc_opened N"); errors print the code
// and message and exit 1. MEMD_SOCKET_DIR names the daemon.

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/ze/driver.h"
#include "daemon/backend/level_zero/ze_queue.h"
#include "memd/client.h"
#include "tests/client/pattern.h"
#include "tests/fake_ze/fake_ze_hooks.h"

namespace {

int Fail(const absl::Status& status) {
  std::printf("%s\n", status.ToString().c_str());
  return 1;
}

// The fake's live IPC opens in this process, or -1 without the fake.
long long IpcOpened() {
  void* fake = ::dlopen(MEMD_FAKE_ZE_PATH, RTLD_NOW | RTLD_NOLOAD);
  if (fake == nullptr) return -1;
  using Counters = int (*)(struct memd_fake_ze_counters*);
  auto counters = reinterpret_cast<Counters>(::dlsym(fake, "memd_fake_ze_counters"));
  struct memd_fake_ze_counters out{};
  const long long opened = counters != nullptr && counters(&out) == 0
                               ? static_cast<long long>(out.ipc_opened)
                               : -1;
  ::dlclose(fake);
  return opened;
}

struct Gpu {
  std::shared_ptr<const memd::ze::Loader> loader;
  std::unique_ptr<memd::backend::ZeQueue> queue;
  ze_context_handle_t own_context = nullptr;
};

// This process's queue on the GPU memd calls `location`.
absl::StatusOr<Gpu> UseGpu(memd::Client& client, const std::string& location) {
  auto loader = memd::ze::Loader::Load();
  if (!loader.ok()) return loader.status();
  auto stats = client.Stats();
  if (!stats.ok()) return stats.status();
  for (const memd::DeviceInfo& device : stats->devices) {
    if ("device:" + std::to_string(device.ordinal) != location) continue;
    for (std::size_t i = 0; i < (*loader)->gpus().size(); ++i) {
      const memd::ze::Gpu& gpu = (*loader)->gpus()[i];
      if (gpu.uuid != device.uuid) continue;
      auto queue = memd::backend::ZeQueue::Create(*loader, gpu, static_cast<int>(i));
      if (!queue.ok()) return queue.status();
      return Gpu{*loader, *std::move(queue), gpu.context};
    }
  }
  return absl::NotFoundError(location + " is no Level Zero GPU this process sees");
}

// The buffer mode a trailing "mode=OCTAL" asks for, else 0600.
std::uint32_t ModeOf(std::vector<std::string>& args) {
  if (args.empty() || !args.back().starts_with("mode=")) return 0600;
  const std::uint32_t mode = static_cast<std::uint32_t>(std::stoul(args.back().substr(5), nullptr, 8));
  args.pop_back();
  return mode;
}

int Run(std::vector<std::string> args) {
  const std::uint32_t mode = ModeOf(args);
  const std::string& command = args[0];
  const std::string& name = args[1];
  const bool own_context = args.back() == "own-context";
  // The context must be known before Connect: make the queue first when the
  // client is to use it (the loader's context on that GPU's driver is this
  // program's own).
  auto probe = memd::Client::Connect();
  if (!probe.ok()) return Fail(probe.status());
  std::string location = "device:0";
  if ((command == "produce" && args.size() >= 5) ||
      ((command == "create-hold" || command == "zeros") && args.size() >= 4)) {
    location = args[command == "produce" ? 4 : 3];
  } else if (auto info = (*probe)->Stat(name); info.ok()) {
    location = info->location;
  }
  auto gpu = UseGpu(**probe, location);
  if (!gpu.ok()) return Fail(gpu.status());
  probe->reset();
  memd::ConnectOptions options;
  if (own_context) options.level_zero_context = gpu->own_context;
  auto client = memd::Client::Connect(options);
  if (!client.ok()) return Fail(client.status());
  memd::backend::ZeQueue& queue = *gpu->queue;
  int code = 0;
  if (command == "produce" || command == "join") {
    const bool create = command == "produce";
    auto buffer = create ? (*client)->Create(name, std::stoull(args[2]),
                                             {.location = location, .mode = mode})
                         : (*client)->Open(name, {.access = memd::Access::kReadWrite});
    if (!buffer.ok()) return Fail(buffer.status());
    std::vector<std::byte> bytes(buffer->size());
    memd::test::FillPattern(bytes, std::stoul(args[create ? 3 : 2]));
    void* device = reinterpret_cast<void*>(buffer->device_pointer());
    if (auto copied = queue.Copy(device, bytes.data(), bytes.size()); !copied.ok()) {
      return Fail(copied);
    }
    if (auto sealed = buffer->Seal(); !sealed.ok()) return Fail(sealed);
  } else if (command == "consume" || command == "zeros") {
    auto buffer = command == "consume"
                      ? (*client)->Open(name)
                      : (*client)->Create(name, std::stoull(args[2]),
                                          {.location = location, .mode = 0640});
    if (!buffer.ok()) return Fail(buffer.status());
    std::vector<std::byte> bytes(buffer->size(), std::byte{0x5a});
    void* device = reinterpret_cast<void*>(buffer->device_pointer());
    if (auto copied = queue.Copy(bytes.data(), device, bytes.size()); !copied.ok()) {
      return Fail(copied);
    }
    const bool right =
        command == "consume"
            ? buffer->size() == std::stoull(args[2]) && buffer->level_zero() &&
                  memd::test::MatchesPattern(bytes, std::stoul(args[3]))
            : std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
    if (!right) code = 4;
  } else if (command == "overwrite") {
    auto buffer = (*client)->Open(name);
    if (!buffer.ok()) return Fail(buffer.status());
    if (buffer->writable()) {
      std::printf("the lease is writable: not what a reader gets\n");
      return 1;
    }
    std::vector<std::byte> bytes(buffer->size());
    memd::test::FillPattern(bytes, std::stoul(args[2]));
    void* device = reinterpret_cast<void*>(buffer->device_pointer());
    if (auto copied = queue.Copy(device, bytes.data(), bytes.size()); !copied.ok()) {
      return Fail(copied);
    }
    std::printf("wrote %zu bytes through a read lease\n", bytes.size());
  } else if (command == "create-hold") {
    auto buffer = (*client)->Create(name, std::stoull(args[2]), {.location = location});
    if (!buffer.ok()) return Fail(buffer.status());
    std::printf("held\n");
    std::fflush(stdout);
    for (;;) ::pause();
  } else {
    std::printf("unknown command %s\n", command.c_str());
    return 2;
  }
  client->reset();
  std::printf("%s\nipc_opened %lld\n", code == 0 ? "OK" : "MISMATCH", IpcOpened());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: memd-ze-test-client COMMAND NAME ARGS...\n");
    return 2;
  }
  return Run(std::vector<std::string>(argv + 1, argv + argc));
}
