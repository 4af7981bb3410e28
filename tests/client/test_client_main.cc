// memd-test-client: a client process for multi-process tests. Each command
// does one thing through libmemd and reports on stdout / its exit code.
//
//   memd-test-client [--uid N] produce NAME SIZE SEED [MODE]
//       create a persistent buffer, fill it with Pattern(SEED), seal, exit
//   memd-test-client [--uid N] consume NAME SIZE SEED [WAIT_MS]
//       open (waiting up to WAIT_MS), check the pattern; exit 0 if it matches
//   memd-test-client [--uid N] open NAME
//       open read-only; print the status code name (OK, PERMISSION_DENIED...)
//   memd-test-client [--uid N] unlink NAME
//   memd-test-client [--uid N] trim LOCATION|all
//   memd-test-client device-produce NAME SIZE SEED ORDINAL
//       create on memd's device:ORDINAL, fill it through the driver, seal
//   memd-test-client device-consume NAME SIZE SEED [WAIT_MS]
//       open a device buffer (context on its device), read it through the
//       driver, check the pattern; exit 0 if it matches
//   memd-test-client device-consume-at NAME SIZE SEED LOCATION
//       the same, opened at LOCATION (device:N): the daemon's copy there
//   memd-test-client device-numbering -
//       print "device:N cuda K" for each GPU memd serves (K: this process's
//       ordinal, or the status code), then "cuda K device:N" for each GPU
//       this process sees (or the status code)
// The device commands make current a context on the GPU the buffer lives
// on, in this process's CUDA numbering (Client::CudaDevice).
//   memd-test-client device-open-without-context NAME
//       open a device buffer with no CUDA context current; print the code
//   memd-test-client device-open-fresh NAME SIZE SEED [NAME SIZE SEED]...
//       as a fresh process (a Python one before PyTorch touched CUDA): with
//       no context current, open each device buffer; check that libmemd left
//       no context current and holds the primary context of each buffer's
//       GPU while its Buffer lives; read the bytes in that context, made
//       current afterwards as PyTorch would, and check the pattern; release
//       the Buffers and check no primary context stays retained (a client
//       that keeps no device imports). Then the same through a client that
//       keeps them: the contexts stay retained while it keeps the imports,
//       and go with the client. Prints OK, else what failed (exit 4)
//   memd-test-client device-open-in-context NAME ORDINAL
//       make CUDA device ORDINAL's primary context current, open NAME and
//       print the code; if it opened, check that the context is still the
//       current one, release this process's own retain of it while the
//       Buffer lives, and print "primary active N" (1: libmemd retained it)
//   memd-test-client device-create-hold NAME SIZE
//       create a device buffer (unsealed), print "held" and wait to be killed
//   memd-test-client device-join NAME SEED
//       open an unsealed device buffer read-write, write the pattern, seal
//   memd-test-client device-hold NAME
//       open a device buffer, print "held" and wait to be killed
//   memd-test-client device-copy-hold NAME SIZE
//       create a host buffer NAME.src and a device:0 buffer NAME (neither
//       sealed), start copying the first into the second, print "copying"
//       and wait to be killed
//   memd-test-client hold NAME...
//       open each name, create an ephemeral "NAME.mine" for the first,
//       print "held" and wait to be killed
//   memd-test-client create-hold NAME SIZE [MODE]
//       create a host buffer (unsealed, persistent), print "held" and wait
//       to be killed
//   memd-test-client copy SOURCE NAME
//       open SOURCE, create NAME of its size at its location, copy SOURCE
//       into it in the daemon, wait, seal
//
// --uid switches to that uid (and gid) before connecting: root only.

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "common/cuda/driver.h"
#include "memd/client.h"
#include "tests/client/pattern.h"

namespace {

int Fail(const absl::Status& status) {
  std::printf("%s\n", absl::StatusCodeToString(status.code()).c_str());
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}

// The CUDA driver (MEMD_CUDA_DRIVER: the fake in tests) with device
// `ordinal`'s primary context current on this thread.
absl::StatusOr<std::shared_ptr<const memd::cuda::Driver>> UseDevice(int ordinal) {
  auto driver = memd::cuda::Driver::Load();
  if (!driver.ok()) return driver.status();
  const memd::cuda::DriverApi& api = (*driver)->api();
  CUcontext context;
  if (auto retained = (*driver)->Check(api.DevicePrimaryCtxRetain(&context, ordinal),
                                       "cuDevicePrimaryCtxRetain");
      !retained.ok()) {
    return retained;
  }
  if (auto set = (*driver)->Check(api.CtxSetCurrent(context), "cuCtxSetCurrent");
      !set.ok()) {
    return set;
  }
  return *std::move(driver);
}

// cuDevicePrimaryCtxGetState of the library `driver` loaded: memd does not
// call it, so the Driver has no entry for it.
using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);
PrimaryCtxGetState LoadPrimaryCtxGetState(const memd::cuda::Driver& driver) {
  void* library = ::dlopen(driver.path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) return nullptr;
  // The Driver keeps the library loaded; this handle only counts once more.
  auto symbol = reinterpret_cast<PrimaryCtxGetState>(
      ::dlsym(library, "cuDevicePrimaryCtxGetState"));
  ::dlclose(library);
  return symbol;
}

// Whether anyone in this process retains CUDA device `ordinal`'s primary
// context.
absl::StatusOr<bool> PrimaryActive(const memd::cuda::Driver& driver,
                                   PrimaryCtxGetState get_state, int ordinal) {
  CUdevice device = 0;
  unsigned int flags = 0;
  int active = 0;
  if (auto got = driver.Check(driver.api().DeviceGet(&device, ordinal), "cuDeviceGet");
      !got.ok()) {
    return got;
  }
  if (auto got = driver.Check(get_state(device, &flags, &active),
                              "cuDevicePrimaryCtxGetState");
      !got.ok()) {
    return got;
  }
  return active != 0;
}

int Mismatch(const std::string& what) {
  std::printf("MISMATCH\n");
  std::fprintf(stderr, "%s\n", what.c_str());
  return 4;
}

// Whether any of the `count` devices' primary contexts is retained, or
// the error.
absl::StatusOr<bool> AnyPrimaryActive(const memd::cuda::Driver& driver,
                                      PrimaryCtxGetState get_state, int count) {
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    auto active = PrimaryActive(driver, get_state, ordinal);
    if (!active.ok() || *active) return active;
  }
  return false;
}

// device-open-fresh (see the comment at the top), through `client`.
int OpenFreshThrough(memd::Client& client, const std::vector<std::string>& args,
                     bool keeps_imports) {
  auto driver = memd::cuda::Driver::Load();
  if (!driver.ok()) return Fail(driver.status());
  const memd::cuda::DriverApi& api = (*driver)->api();
  PrimaryCtxGetState get_state = LoadPrimaryCtxGetState(**driver);
  if (get_state == nullptr) return Mismatch("the driver has no cuDevicePrimaryCtxGetState");
  CUcontext current = nullptr;
  if (auto got = (*driver)->Check(api.CtxGetCurrent(&current), "cuCtxGetCurrent");
      !got.ok()) {
    return Fail(got);
  }
  int count = 0;
  if (auto got = (*driver)->Check(api.DeviceGetCount(&count), "cuDeviceGetCount"); !got.ok()) {
    return Fail(got);
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    auto active = PrimaryActive(**driver, get_state, ordinal);
    if (!active.ok()) return Fail(active.status());
    if (current != nullptr || *active) return Mismatch("not a fresh process");
  }
  std::vector<memd::Buffer> buffers;
  for (std::size_t i = 1; i + 2 < args.size(); i += 3) {
    auto buffer = client.Open(args[i]);
    if (!buffer.ok()) return Fail(buffer.status());
    if (auto got = (*driver)->Check(api.CtxGetCurrent(&current), "cuCtxGetCurrent");
        !got.ok()) {
      return Fail(got);
    }
    if (current != nullptr) return Mismatch("libmemd left a context current");
    auto active = PrimaryActive(**driver, get_state, buffer->device());
    if (!active.ok()) return Fail(active.status());
    if (!*active) return Mismatch("libmemd holds no primary context under " + args[i]);
    // Read as PyTorch would: it retains the primary context and makes it
    // current, and the pointer is valid there.
    CUdevice device = 0;
    CUcontext primary = nullptr;
    std::vector<std::byte> bytes(buffer->size());
    absl::Status read = (*driver)->Check(api.DeviceGet(&device, buffer->device()), "cuDeviceGet");
    if (read.ok()) {
      read = (*driver)->Check(api.DevicePrimaryCtxRetain(&primary, device),
                              "cuDevicePrimaryCtxRetain");
    }
    if (read.ok()) {
      read = (*driver)->Check(api.CtxSetCurrent(primary), "cuCtxSetCurrent");
      if (read.ok()) {
        read = (*driver)->Check(
            api.MemcpyDtoH(bytes.data(), buffer->device_pointer(), bytes.size()),
            "cuMemcpyDtoH");
      }
      api.CtxSetCurrent(nullptr);
      api.DevicePrimaryCtxRelease(device);
    }
    if (!read.ok()) return Fail(read);
    if (buffer->size() != std::stoull(args[i + 1]) ||
        !memd::test::MatchesPattern(bytes, std::stoul(args[i + 2]))) {
      return Mismatch("wrong bytes in " + args[i]);
    }
    buffers.push_back(std::move(*buffer));
  }
  buffers.clear();
  auto active = AnyPrimaryActive(**driver, get_state, count);
  if (!active.ok()) return Fail(active.status());
  if (*active != keeps_imports) {
    return Mismatch(keeps_imports
                        ? "no primary context is retained while the client keeps imports"
                        : "a primary context is still retained after every Buffer went");
  }
  return 0;
}

int OpenFresh(const std::vector<std::string>& args) {
  for (const bool keeps : {false, true}) {
    memd::ConnectOptions options;
    options.device_cache_bytes = keeps ? std::uint64_t{1} << 30 : 0;
    auto client = memd::Client::Connect(options);
    if (!client.ok()) return Fail(client.status());
    if (int failed = OpenFreshThrough(**client, args, keeps); failed != 0) return failed;
  }
  // The client that kept imports is gone, and its contexts with it.
  auto driver = memd::cuda::Driver::Load();
  if (!driver.ok()) return Fail(driver.status());
  int count = 0;
  if (auto got = (*driver)->Check((*driver)->api().DeviceGetCount(&count), "cuDeviceGetCount");
      !got.ok()) {
    return Fail(got);
  }
  auto active = AnyPrimaryActive(**driver, LoadPrimaryCtxGetState(**driver), count);
  if (!active.ok()) return Fail(active.status());
  if (*active) return Mismatch("a primary context is still retained after the client went");
  std::printf("OK\n");
  return 0;
}

// device-open-in-context (see the comment at the top).
int OpenInContext(memd::Client& client, const std::string& name, int ordinal) {
  auto driver = UseDevice(ordinal);
  if (!driver.ok()) return Fail(driver.status());
  const memd::cuda::DriverApi& api = (*driver)->api();
  PrimaryCtxGetState get_state = LoadPrimaryCtxGetState(**driver);
  if (get_state == nullptr) return Mismatch("the driver has no cuDevicePrimaryCtxGetState");
  CUcontext before = nullptr, after = nullptr;
  api.CtxGetCurrent(&before);
  auto buffer = client.Open(name);
  if (!buffer.ok()) return Fail(buffer.status());
  api.CtxGetCurrent(&after);
  if (after != before) return Mismatch("libmemd changed the current context");
  api.CtxSetCurrent(nullptr);
  CUdevice device = 0;
  api.DeviceGet(&device, ordinal);
  if (auto released = (*driver)->Check(api.DevicePrimaryCtxRelease(device),
                                       "cuDevicePrimaryCtxRelease");
      !released.ok()) {
    return Fail(released);
  }
  auto active = PrimaryActive(**driver, get_state, ordinal);
  if (!active.ok()) return Fail(active.status());
  std::printf("OK\nprimary active %d\n", *active ? 1 : 0);
  return 0;
}

int RunDeviceCommand(memd::Client& client, const std::vector<std::string>& args) {
  const std::string& command = args[0];
  const std::string& name = args[1];
  if (command == "device-open-fresh" && args.size() >= 4 && args.size() % 3 == 1) {
    return OpenFresh(args);
  }
  if (command == "device-open-in-context" && args.size() >= 3) {
    return OpenInContext(client, name, std::stoi(args[2]));
  }
  if (command == "device-open-without-context") {
    // Load the driver (so that only the context is missing), set nothing.
    auto driver = memd::cuda::Driver::Load();
    if (!driver.ok()) return Fail(driver.status());
    auto buffer = client.Open(name);
    if (!buffer.ok()) return Fail(buffer.status());
    std::printf("OK\n");
    return 0;
  }
  if (command == "device-numbering") {
    auto stats = client.Stats();
    if (!stats.ok()) return Fail(stats.status());
    for (const memd::DeviceInfo& device : stats->devices) {
      const std::string location = "device:" + std::to_string(device.ordinal);
      auto cuda = client.CudaDevice(location);
      std::printf("%s cuda %s\n", location.c_str(),
                  cuda.ok() ? std::to_string(*cuda).c_str()
                            : absl::StatusCodeToString(cuda.status().code()).c_str());
    }
    auto driver = memd::cuda::Driver::Load();
    if (!driver.ok()) return Fail(driver.status());
    int count = 0;
    if (auto counted = (*driver)->Check((*driver)->api().DeviceGetCount(&count),
                                        "cuDeviceGetCount");
        !counted.ok()) {
      return Fail(counted);
    }
    for (int cuda = 0; cuda < count; ++cuda) {
      auto location = client.DeviceLocation(cuda);
      std::printf("cuda %d %s\n", cuda,
                  location.ok() ? location->c_str()
                                : absl::StatusCodeToString(location.status().code()).c_str());
    }
    return 0;
  }
  // memd's location of the buffer (or, to create, the one asked for).
  std::string location = "device:0";
  if (command == "device-produce" && args.size() >= 5) {
    location = "device:" + args[4];
  } else if (command == "device-consume-at" && args.size() >= 5) {
    location = args[4];
  } else if (auto info = client.Stat(name); info.ok()) {
    location = info->location;
  }
  auto cuda_device = client.CudaDevice(location);
  if (!cuda_device.ok()) return Fail(cuda_device.status());
  auto driver = UseDevice(*cuda_device);
  if (!driver.ok()) return Fail(driver.status());
  const memd::cuda::DriverApi& api = (*driver)->api();
  if (command == "device-produce" && args.size() >= 5) {
    const std::uint64_t size = std::stoull(args[2]);
    auto buffer = client.Create(name, size, {.location = location});
    if (!buffer.ok()) return Fail(buffer.status());
    std::vector<std::byte> bytes(size);
    memd::test::FillPattern(bytes, std::stoul(args[3]));
    if (auto copied = (*driver)->Check(
            api.MemcpyHtoD(buffer->device_pointer(), bytes.data(), size), "cuMemcpyHtoD");
        !copied.ok()) {
      return Fail(copied);
    }
    if (auto sealed = buffer->Seal(); !sealed.ok()) return Fail(sealed);
    std::printf("OK\n");
    return 0;
  }
  if ((command == "device-consume" || command == "device-consume-at") && args.size() >= 4) {
    memd::OpenOptions options;
    if (command == "device-consume-at") {
      options.location = location;
    } else if (args.size() >= 5) {
      options.wait = absl::Milliseconds(std::stoll(args[4]));
    }
    auto buffer = client.Open(name, options);
    if (!buffer.ok()) return Fail(buffer.status());
    std::vector<std::byte> bytes(buffer->size());
    if (auto copied = (*driver)->Check(
            api.MemcpyDtoH(bytes.data(), buffer->device_pointer(), bytes.size()),
            "cuMemcpyDtoH");
        !copied.ok()) {
      return Fail(copied);
    }
    if (buffer->size() != std::stoull(args[2]) || buffer->device() != *cuda_device ||
        !memd::test::MatchesPattern(bytes, std::stoul(args[3]))) {
      std::printf("MISMATCH\n");
      std::size_t first = 0;
      while (first < bytes.size() &&
             bytes[first] == memd::test::PatternByte(first, std::stoul(args[3]))) {
        ++first;
      }
      std::fprintf(stderr, "size %llu, device %d (CUDA %d), location %s, first wrong byte %zu (%d)\n",
                   static_cast<unsigned long long>(buffer->size()), buffer->device(),
                   *cuda_device, buffer->info().location.c_str(), first,
                   first < bytes.size() ? static_cast<int>(bytes[first]) : -1);
      return 4;
    }
    std::printf("OK\n");
    return 0;
  }
  if (command == "device-create-hold" && args.size() >= 3) {
    auto buffer = client.Create(name, std::stoull(args[2]), {.location = location});
    if (!buffer.ok()) return Fail(buffer.status());
    std::printf("held\n");
    std::fflush(stdout);
    for (;;) ::pause();
  }
  if (command == "device-join" && args.size() >= 3) {
    auto buffer = client.Open(name, {.access = memd::Access::kReadWrite});
    if (!buffer.ok()) return Fail(buffer.status());
    std::vector<std::byte> bytes(buffer->size());
    memd::test::FillPattern(bytes, std::stoul(args[2]));
    if (auto copied = (*driver)->Check(
            api.MemcpyHtoD(buffer->device_pointer(), bytes.data(), bytes.size()),
            "cuMemcpyHtoD");
        !copied.ok()) {
      return Fail(copied);
    }
    if (auto sealed = buffer->Seal(); !sealed.ok()) return Fail(sealed);
    std::printf("OK\n");
    return 0;
  }
  if (command == "device-copy-hold" && args.size() >= 3) {
    const std::uint64_t size = std::stoull(args[2]);
    auto source = client.Create(name + ".src", size);
    if (!source.ok()) return Fail(source.status());
    memd::test::FillPattern(source->mutable_data(), 1);
    auto destination = client.Create(name, size, {.location = location});
    if (!destination.ok()) return Fail(destination.status());
    auto transfer = client.Copy({&*source}, {&*destination});
    if (!transfer.ok()) return Fail(transfer.status());
    std::printf("copying\n");
    std::fflush(stdout);
    for (;;) ::pause();
  }
  if (command == "device-hold") {
    auto buffer = client.Open(name);
    if (!buffer.ok()) return Fail(buffer.status());
    std::printf("held\n");
    std::fflush(stdout);
    for (;;) ::pause();
  }
  std::fprintf(stderr, "unknown device command or missing arguments\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() >= 2 && args[0] == "--uid") {
    int uid = std::atoi(args[1].c_str());
    if (::setgid(uid) != 0 || ::setuid(uid) != 0) {
      std::perror("setuid");
      return 3;
    }
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.size() < 2) {
    std::fprintf(stderr, "usage: see the comment in test_client_main.cc\n");
    return 2;
  }
  auto client = memd::Client::Connect();
  if (!client.ok()) return Fail(client.status());
  const std::string& command = args[0];
  const std::string& name = args[1];

  if (command == "produce" && args.size() >= 4) {
    memd::CreateOptions options;
    if (args.size() >= 5) options.mode = std::stoul(args[4], nullptr, 8);
    auto buffer = (*client)->Create(name, std::stoull(args[2]), options);
    if (!buffer.ok()) return Fail(buffer.status());
    memd::test::FillPattern(buffer->mutable_data(), std::stoul(args[3]));
    if (auto sealed = buffer->Seal(); !sealed.ok()) return Fail(sealed);
    std::printf("OK\n");
    return 0;
  }
  if (command == "consume" && args.size() >= 4) {
    memd::OpenOptions options;
    if (args.size() >= 5) options.wait = absl::Milliseconds(std::stoll(args[4]));
    auto buffer = (*client)->Open(name, options);
    if (!buffer.ok()) return Fail(buffer.status());
    if (buffer->size() != std::stoull(args[2]) ||
        !memd::test::MatchesPattern(buffer->data(), std::stoul(args[3]))) {
      std::printf("MISMATCH\n");
      return 4;
    }
    std::printf("OK\n");
    return 0;
  }
  if (command == "open") {
    auto buffer = (*client)->Open(name);
    if (!buffer.ok()) return Fail(buffer.status());
    std::printf("OK\n");
    return 0;
  }
  if (command == "trim") {
    auto trimmed = (*client)->Trim(name == "all" ? "" : name);
    if (!trimmed.ok()) return Fail(trimmed.status());
    std::printf("OK\n");
    return 0;
  }
  if (command == "unlink") {
    if (auto unlinked = (*client)->Unlink(name); !unlinked.ok()) return Fail(unlinked);
    std::printf("OK\n");
    return 0;
  }
  if (absl::StartsWith(command, "device-")) {
    return RunDeviceCommand(**client, args);
  }
  if (command == "hold") {
    std::vector<memd::Buffer> held;
    for (std::size_t i = 1; i < args.size(); ++i) {
      auto buffer = (*client)->Open(args[i]);
      if (!buffer.ok()) return Fail(buffer.status());
      held.push_back(std::move(*buffer));
    }
    auto mine = (*client)->Create(name + ".mine", 4096,
                                  {.persistence = memd::Persistence::kEphemeral});
    if (!mine.ok()) return Fail(mine.status());
    std::printf("held\n");
    std::fflush(stdout);
    for (;;) ::pause();
  }
  if (command == "create-hold" && args.size() >= 3) {
    memd::CreateOptions options;
    if (args.size() >= 4) options.mode = std::stoul(args[3], nullptr, 8);
    auto buffer = (*client)->Create(name, std::stoull(args[2]), options);
    if (!buffer.ok()) return Fail(buffer.status());
    std::printf("held\n");
    std::fflush(stdout);
    for (;;) ::pause();
  }
  if (command == "copy" && args.size() >= 3) {
    // A device buffer opens in a context on its GPU.
    std::shared_ptr<const memd::cuda::Driver> driver;
    if (auto info = (*client)->Stat(name);
        info.ok() && absl::StartsWith(info->location, "device:")) {
      auto cuda_device = (*client)->CudaDevice(info->location);
      if (!cuda_device.ok()) return Fail(cuda_device.status());
      auto used = UseDevice(*cuda_device);
      if (!used.ok()) return Fail(used.status());
      driver = *std::move(used);
    }
    auto source = (*client)->Open(name);
    if (!source.ok()) return Fail(source.status());
    auto destination =
        (*client)->Create(args[2], source->size(), {.location = source->info().location});
    if (!destination.ok()) return Fail(destination.status());
    auto transfer = (*client)->Copy({&*source}, {&*destination});
    if (!transfer.ok()) return Fail(transfer.status());
    if (auto waited = transfer->Wait(); !waited.ok()) return Fail(waited);
    if (auto sealed = destination->Seal(); !sealed.ok()) return Fail(sealed);
    std::printf("OK\n");
    return 0;
  }
  std::fprintf(stderr, "unknown command or missing arguments\n");
  return 2;
}
