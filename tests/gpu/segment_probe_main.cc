// memd-segment-probe: one process's part in RealGpuTest's check that a CUDA
// VMM segment outlives the process that made it while another holds its
// descriptor (what lets memd's buffers survive memd: docs/design.md,
// "Durability"). Each role loads the driver (MEMD_CUDA_DRIVER, else
// libcuda.so.1) and uses device 0's primary context.
//
//   memd-segment-probe create SIZE SEED
//       cuMemCreate SIZE bytes (a POSIX descriptor handle), write
//       Pattern(SEED) into them, export the descriptor and send it over the
//       Unix socket on fd 3, then die by SIGKILL: no unmap, no release, no
//       teardown, as a daemon killed with kill -9
//   memd-segment-probe read SIZE SEED
//       import the descriptor on fd 3, map it, check Pattern(SEED); then
//       export the imported allocation again and print what the driver said
//       ("reexport OK" or the error): exit 0 when the pattern matched
//   memd-segment-probe free
//       print "free N": cuMemGetInfo's free bytes on device 0

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda/driver.h"
#include "common/unix_socket.h"
#include "tests/client/pattern.h"

namespace {

using memd::cuda::Driver;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}

CUmemAllocationProp SegmentProperties() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

// Reserves, maps and opens `handle` for read-write on device 0.
absl::StatusOr<CUdeviceptr> Map(const Driver& driver, CUmemGenericAllocationHandle handle,
                                std::size_t size) {
  const memd::cuda::DriverApi& api = driver.api();
  CUdeviceptr base = 0;
  if (auto s = driver.Check(api.MemAddressReserve(&base, size, 0, 0, 0), "cuMemAddressReserve");
      !s.ok()) {
    return s;
  }
  if (auto s = driver.Check(api.MemMap(base, size, 0, handle, 0), "cuMemMap"); !s.ok()) return s;
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (auto s = driver.Check(api.MemSetAccess(base, size, &access, 1), "cuMemSetAccess"); !s.ok()) {
    return s;
  }
  return base;
}

int Create(const Driver& driver, std::size_t size, std::uint32_t seed) {
  const memd::cuda::DriverApi& api = driver.api();
  CUmemAllocationProp prop = SegmentProperties();
  CUmemGenericAllocationHandle handle = 0;
  if (auto s = driver.Check(api.MemCreate(&handle, size, &prop, 0), "cuMemCreate"); !s.ok()) {
    return Fail(s);
  }
  auto base = Map(driver, handle, size);
  if (!base.ok()) return Fail(base.status());
  std::vector<std::byte> bytes(size);
  memd::test::FillPattern(bytes, seed);
  if (auto s = driver.Check(api.MemcpyHtoD(*base, bytes.data(), size), "cuMemcpyHtoD"); !s.ok()) {
    return Fail(s);
  }
  int fd = -1;
  if (auto s = driver.Check(api.MemExportToShareableHandle(
                                &fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                            "cuMemExportToShareableHandle");
      !s.ok()) {
    return Fail(s);
  }
  if (absl::Status sent = memd::SendPacket(3, "f", fd); !sent.ok()) return Fail(sent);
  std::fflush(stdout);
  ::raise(SIGKILL);
  return 1;
}

int Read(const Driver& driver, std::size_t size, std::uint32_t seed) {
  const memd::cuda::DriverApi& api = driver.api();
  CUmemGenericAllocationHandle handle = 0;
  if (auto s = driver.Check(
          api.MemImportFromShareableHandle(&handle, reinterpret_cast<void*>(std::intptr_t{3}),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "cuMemImportFromShareableHandle");
      !s.ok()) {
    return Fail(s);
  }
  auto base = Map(driver, handle, size);
  if (!base.ok()) return Fail(base.status());
  std::vector<std::byte> bytes(size);
  if (auto s = driver.Check(api.MemcpyDtoH(bytes.data(), *base, size), "cuMemcpyDtoH"); !s.ok()) {
    return Fail(s);
  }
  const bool matched = memd::test::MatchesPattern(bytes, seed);
  std::printf("pattern %s\n", matched ? "ok" : "MISMATCH");
  int again = -1;
  absl::Status reexport = driver.Check(
      api.MemExportToShareableHandle(&again, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
      "cuMemExportToShareableHandle");
  std::printf("reexport %s\n", reexport.ok() ? "OK" : reexport.ToString().c_str());
  (void)driver.Check(api.MemUnmap(*base, size), "cuMemUnmap");
  (void)driver.Check(api.MemAddressFree(*base, size), "cuMemAddressFree");
  (void)driver.Check(api.MemRelease(handle), "cuMemRelease");
  if (again >= 0) ::close(again);
  return matched ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return 2;
  auto driver = Driver::Load();
  if (!driver.ok()) return Fail(driver.status());
  const memd::cuda::DriverApi& api = (*driver)->api();
  CUcontext context;
  if (auto s = (*driver)->Check(api.DevicePrimaryCtxRetain(&context, 0), "cuDevicePrimaryCtxRetain");
      !s.ok()) {
    return Fail(s);
  }
  if (auto s = (*driver)->Check(api.CtxSetCurrent(context), "cuCtxSetCurrent"); !s.ok()) {
    return Fail(s);
  }
  if (args[0] == "free") {
    std::size_t free = 0, total = 0;
    if (auto s = (*driver)->Check(api.MemGetInfo(&free, &total), "cuMemGetInfo"); !s.ok()) {
      return Fail(s);
    }
    std::printf("free %zu\n", free);
    return 0;
  }
  if (args.size() != 3) return 2;
  const std::size_t size = std::stoull(args[1]);
  const auto seed = static_cast<std::uint32_t>(std::stoul(args[2]));
  if (args[0] == "create") return Create(**driver, size, seed);
  if (args[0] == "read") return Read(**driver, size, seed);
  return 2;
}
