#pragma once

// A test's own view of an exported CUDA VMM segment: imported from its
// descriptor and mapped read-write on device 0 of the current context, as a
// client would, to check that memd's segment and the client's reach the
// same bytes. Unmapped and released when it goes.

#include <cstdint>

#include "common/cuda/driver.h"
#include "gtest/gtest.h"

namespace memd::backend {

class VmmImport {
 public:
  VmmImport(const cuda::DriverApi& api, int fd, std::uint64_t bytes) : api_(api), bytes_(bytes) {
    EXPECT_EQ(api.MemImportFromShareableHandle(
                  &handle_, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_SUCCESS);
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    EXPECT_EQ(api.MemAddressReserve(&address_, bytes, 0, 0, 0), CUDA_SUCCESS);
    ok_ = api.MemMap(address_, bytes, 0, handle_, 0) == CUDA_SUCCESS &&
          api.MemSetAccess(address_, bytes, &access, 1) == CUDA_SUCCESS;
    EXPECT_TRUE(ok_) << "cuMemMap or cuMemSetAccess of the import failed";
  }
  ~VmmImport() {
    api_.MemUnmap(address_, bytes_);
    api_.MemAddressFree(address_, bytes_);
    api_.MemRelease(handle_);
  }
  VmmImport(const VmmImport&) = delete;
  VmmImport& operator=(const VmmImport&) = delete;

  bool ok() const { return ok_; }
  CUdeviceptr address() const { return address_; }

 private:
  const cuda::DriverApi& api_;
  const std::uint64_t bytes_;
  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr address_ = 0;
  bool ok_ = false;
};

}  // namespace memd::backend
