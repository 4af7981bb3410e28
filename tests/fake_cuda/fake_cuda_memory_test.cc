// The FAKE CUDA driver's memory: virtual memory management and exported
// descriptors, CUDA_VISIBLE_DEVICES, and per-device memory limits.

#include "tests/fake_cuda/fake_cuda_fixture.h"

namespace memd_fake_cuda_test {
namespace {

// ---- Virtual memory management ----

TEST_F(FakeCudaTest, VmmCreateReserveMapSetAccessWriteRead) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const CUmemAllocationProp prop = DeviceProp(0);
  size_t granularity = 0;
  ASSERT_EQ(cu.MemGetAllocationGranularity(&granularity, &prop,
                                           CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_SUCCESS);
  EXPECT_EQ(granularity, kGranularity);
  ASSERT_EQ(cu.MemGetAllocationGranularity(&granularity, &prop,
                                           CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
            CUDA_SUCCESS);
  EXPECT_EQ(granularity, kGranularity);

  const size_t size = 2 * kGranularity;
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cu.MemCreate(&handle, size, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAddressReserve(&ptr, size, 0, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(ptr % kGranularity, 0u);
  ASSERT_EQ(cu.MemMap(ptr, size, 0, handle, 0), CUDA_SUCCESS);

  // Mapped but not yet accessible.
  const std::vector<unsigned char> data = Pattern(size, 7);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, data.data(), size), CUDA_ERROR_INVALID_VALUE);

  const CUmemAccessDesc rw = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  ASSERT_EQ(cu.MemSetAccess(ptr, size, &rw, 1), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, data.data(), size), CUDA_SUCCESS);
  std::vector<unsigned char> back(size);
  ASSERT_EQ(cu.MemcpyDtoH(back.data(), ptr, size), CUDA_SUCCESS);
  EXPECT_EQ(back, data);
  // A CUdeviceptr is a host address of this process.
  EXPECT_EQ(std::memcmp(AsPointer(ptr), data.data(), size), 0);
  ASSERT_EQ(cu.MemsetD8(ptr + 100, 0xab, 10), CUDA_SUCCESS);
  EXPECT_EQ(static_cast<unsigned char*>(AsPointer(ptr))[105], 0xab);

  // Read-only: reads work, writes are refused.
  const CUmemAccessDesc ro = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READ);
  ASSERT_EQ(cu.MemSetAccess(ptr, size, &ro, 1), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemcpyDtoH(back.data(), ptr, 16), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, data.data(), 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemsetD8(ptr, 0, 16), CUDA_ERROR_INVALID_VALUE);

  UnmapAndRelease(size, handle, ptr);
}

TEST_F(FakeCudaTest, VmmRejectsBadArguments) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  ASSERT_NO_FATAL_FAILURE(InitWithContext());  // For the copies at the end.
  CUmemGenericAllocationHandle handle = 0;
  CUmemAllocationProp prop = DeviceProp(0);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemCreate(&handle, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemCreate(nullptr, kGranularity, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  prop.type = CU_MEM_ALLOCATION_TYPE_MANAGED;
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  prop = DeviceProp(2);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
  prop = DeviceProp(0, CU_MEM_HANDLE_TYPE_FABRIC);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
  prop = DeviceProp(0);
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_NOT_SUPPORTED);
  size_t granularity = 0;
  EXPECT_EQ(cu.MemGetAllocationGranularity(&granularity, &prop,
                                           CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_ERROR_INVALID_VALUE);

  EXPECT_EQ(cu.MemRelease(0x1234), CUDA_ERROR_INVALID_VALUE);
  prop = DeviceProp(0);
  ASSERT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_SUCCESS);

  // Reservations.
  CUdeviceptr va = 0;
  EXPECT_EQ(cu.MemAddressReserve(&va, 0, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemAddressReserve(&va, 100, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemAddressReserve(&va, kGranularity, 3 * 4096, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemAddressReserve(&va, kGranularity, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemAddressReserve(&va, 4 * kGranularity, 4 * kGranularity, 0, 0), CUDA_SUCCESS);
  EXPECT_EQ(va % (4 * kGranularity), 0u);

  // Mappings.
  EXPECT_EQ(cu.MemMap(va, kGranularity, kGranularity, handle, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemMap(va, 2 * kGranularity, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemMap(va + 4096, kGranularity, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemMap(va + 4 * kGranularity, kGranularity, 0, handle, 0),
            CUDA_ERROR_INVALID_VALUE);  // Outside the reservation.
  EXPECT_EQ(cu.MemMap(va, kGranularity, 0, 0x1234, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemMap(va, kGranularity, 0, handle, 1), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemMap(va, kGranularity, 0, handle, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemMap(va, kGranularity, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // Taken.
  ASSERT_EQ(cu.MemMap(va + kGranularity, kGranularity, 0, handle, 0), CUDA_SUCCESS);

  // Access.
  CUmemAccessDesc desc = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(cu.MemSetAccess(va, 3 * kGranularity, &desc, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemSetAccess(va + 4096, kGranularity, &desc, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemSetAccess(va, kGranularity, nullptr, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemSetAccess(va, kGranularity, &desc, 0), CUDA_ERROR_INVALID_VALUE);
  desc = Access(5, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_EQ(cu.MemSetAccess(va, kGranularity, &desc, 1), CUDA_ERROR_INVALID_DEVICE);
  desc = Access(0, static_cast<CUmemAccess_flags>(2));
  EXPECT_EQ(cu.MemSetAccess(va, kGranularity, &desc, 1), CUDA_ERROR_INVALID_VALUE);
  // Two adjacent mappings at once; a copy may span both.
  const CUmemAccessDesc both[] = {Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE),
                                  Access(1, CU_MEM_ACCESS_FLAGS_PROT_READ)};
  ASSERT_EQ(cu.MemSetAccess(va, 2 * kGranularity, both, 2), CUDA_SUCCESS);
  // Both mappings show the same memory (one handle mapped twice). Through the
  // driver: the compiler may reorder plain accesses to two addresses it
  // knows to differ.
  const char x = 'x';
  ASSERT_EQ(cu.MemcpyHtoD(va + 10, &x, 1), CUDA_SUCCESS);
  char seen = 0;
  ASSERT_EQ(cu.MemcpyDtoH(&seen, va + kGranularity + 10, 1), CUDA_SUCCESS);
  EXPECT_EQ(seen, 'x');

  // Unmapping and freeing.
  EXPECT_EQ(cu.MemUnmap(va, kGranularity / 2), CUDA_ERROR_INVALID_VALUE);  // Part of one.
  EXPECT_EQ(cu.MemUnmap(va + 2 * kGranularity, kGranularity), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemAddressFree(va, 4 * kGranularity), CUDA_ERROR_INVALID_VALUE);  // Mapped.
  EXPECT_EQ(cu.MemAddressFree(va, kGranularity), CUDA_ERROR_INVALID_VALUE);     // Wrong size.
  ASSERT_EQ(cu.MemUnmap(va, 2 * kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemUnmap(va, kGranularity), CUDA_ERROR_INVALID_VALUE);  // Already unmapped.
  ASSERT_EQ(cu.MemAddressFree(va, 4 * kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemAddressFree(va, 4 * kGranularity), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(handle), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(FakeCudaTest, VmmMemoryLivesWhileMappedAfterRelease) {
  setenv("MEMD_FAKE_CUDA_MEMORY", "8388608", 1);
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr ptr = 0;
  ASSERT_NO_FATAL_FAILURE(CreateMapped(4 * kMiB, &handle, &ptr));
  ASSERT_EQ(cu.MemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemMap(ptr, 4 * kMiB, 0, handle, 0), CUDA_ERROR_INVALID_VALUE);  // Handle gone.

  ASSERT_EQ(cu.MemsetD8(ptr, 0x5a, 4 * kMiB), CUDA_SUCCESS);  // Memory is not.
  unsigned char byte = 0;
  ASSERT_EQ(cu.MemcpyDtoH(&byte, ptr + 4 * kMiB - 1, 1), CUDA_SUCCESS);
  EXPECT_EQ(byte, 0x5a);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(total_bytes, 8 * kMiB);
  EXPECT_EQ(free_bytes, 4 * kMiB);

  ASSERT_EQ(cu.MemUnmap(ptr, 4 * kMiB), CUDA_SUCCESS);  // The last mapping frees it.
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, 8 * kMiB);
  EXPECT_EQ(cu.MemAddressFree(ptr, 4 * kMiB), CUDA_SUCCESS);
}

TEST_F(FakeCudaTest, ExportedFdImportsAsTheSameMemory) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr ptr = 0;
  ASSERT_NO_FATAL_FAILURE(CreateMapped(kGranularity, &handle, &ptr));
  int fd = -1;
  ASSERT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_SUCCESS);
  ASSERT_GE(fd, 0);
  int second_fd = -1;
  ASSERT_EQ(cu.MemExportToShareableHandle(&second_fd, handle,
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_SUCCESS);
  EXPECT_NE(fd, second_fd);  // A new descriptor each time; the caller owns it.
  close(second_fd);

  // Importing in the same process gives a new handle over the same memory.
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_EQ(cu.MemImportFromShareableHandle(&imported, reinterpret_cast<void*>(uintptr_t(fd)),
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_SUCCESS);
  EXPECT_NE(imported, handle);
  EXPECT_GE(fcntl(fd, F_GETFD), 0);  // Still the caller's.
  CUdeviceptr other = 0;
  ASSERT_EQ(cu.MemAddressReserve(&other, kGranularity, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemMap(other, kGranularity, 0, imported, 0), CUDA_SUCCESS);
  const CUmemAccessDesc rw = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  ASSERT_EQ(cu.MemSetAccess(other, kGranularity, &rw, 1), CUDA_SUCCESS);
  const std::vector<unsigned char> data = Pattern(kGranularity, 3);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, data.data(), data.size()), CUDA_SUCCESS);
  std::vector<unsigned char> back(kGranularity);
  ASSERT_EQ(cu.MemcpyDtoH(back.data(), other, back.size()), CUDA_SUCCESS);
  EXPECT_EQ(back, data);

  UnmapAndRelease(kGranularity, imported, other);
  UnmapAndRelease(kGranularity, handle, ptr);
  close(fd);
}

// As the real driver: memory one process released stays allocated, and
// counted used, while another process's import holds it ("freed" memory the
// driver still counts). A process of another import is modelled by the
// import's own open file description, so the same process shows it too.
TEST_F(FakeCudaTest, ReleasedMemoryAnImportHoldsStaysUsedUntilTheImportGoes) {
  setenv("MEMD_FAKE_CUDA_MEMORY", "8388608", 1);
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_NO_FATAL_FAILURE(ReleaseWhileImported(4 * kMiB, &imported));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, 4 * kMiB) << "the import still holds the released 4 MiB";
  CUmemGenericAllocationHandle other = 0;
  const CUmemAllocationProp prop = DeviceProp(0);
  EXPECT_EQ(cu.MemCreate(&other, 6 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);

  ASSERT_EQ(cu.MemRelease(imported), CUDA_SUCCESS);  // The last import goes.
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, 8 * kMiB);
  ASSERT_EQ(cu.MemCreate(&other, 6 * kMiB, &prop, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(other), CUDA_SUCCESS);
}

// cuMemAlloc, too, finds the memory free once the last import let go of it,
// without a cuMemGetInfo or cuMemCreate in between to notice.
TEST_F(FakeCudaTest, LegacyAllocationsReuseMemoryTheLastImportLetGoOf) {
  setenv("MEMD_FAKE_CUDA_MEMORY", "8388608", 1);
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUmemGenericAllocationHandle imported = 0;
  ASSERT_NO_FATAL_FAILURE(ReleaseWhileImported(4 * kMiB, &imported));
  CUdeviceptr legacy = 0;
  EXPECT_EQ(cu.MemAlloc(&legacy, 6 * kMiB), CUDA_ERROR_OUT_OF_MEMORY)
      << "the import still holds the released 4 MiB";
  ASSERT_EQ(cu.MemRelease(imported), CUDA_SUCCESS);  // The last import goes.
  ASSERT_EQ(cu.MemAlloc(&legacy, 6 * kMiB), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemFree(legacy), CUDA_SUCCESS);
}

TEST_F(FakeCudaTest, ExportImportErrors) {
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  const CUmemAllocationProp not_exportable = DeviceProp(0, CU_MEM_HANDLE_TYPE_NONE);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cu.MemCreate(&handle, kGranularity, &not_exportable, 0), CUDA_SUCCESS);
  int fd = -1;
  EXPECT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemRelease(handle), CUDA_SUCCESS);

  const CUmemAllocationProp exportable = DeviceProp(0);
  ASSERT_EQ(cu.MemCreate(&handle, kGranularity, &exportable, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cu.MemExportToShareableHandle(nullptr, handle,
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemExportToShareableHandle(&fd, 0x1234, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemRelease(handle), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_ERROR_INVALID_VALUE);  // Released.

  CUmemGenericAllocationHandle imported = 0;
  auto as_handle = [](int descriptor) { return reinterpret_cast<void*>(uintptr_t(descriptor)); };
  EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, as_handle(987654),
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_ERROR_INVALID_VALUE);  // Not an open descriptor.
  const int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, as_handle(devnull),
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_ERROR_UNKNOWN);  // Not VMM memory (the real driver's answer to a memfd).
  close(devnull);
  const int memfd = memfd_create("not-from-the-fake", MFD_CLOEXEC);
  ASSERT_GE(memfd, 0);
  ASSERT_EQ(ftruncate(memfd, kGranularity), 0);
  EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, as_handle(memfd),
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
            CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, as_handle(memfd),
                                            CU_MEM_HANDLE_TYPE_FABRIC),
            CUDA_ERROR_NOT_SUPPORTED);
  close(memfd);
}

TEST_F(FakeCudaTest, ExportedFdSharesMemoryWithAnotherProcess) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr ptr = 0;
  const size_t size = 2 * kGranularity;
  ASSERT_NO_FATAL_FAILURE(CreateMapped(size, &handle, &ptr));
  const std::vector<unsigned char> from_parent = Pattern(size, 1);
  const std::vector<unsigned char> from_child = Pattern(size, 2);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, from_parent.data(), size), CUDA_SUCCESS);
  int fd = -1;
  ASSERT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_SUCCESS);

  RunInChild([&] {
    ASSERT_NO_FATAL_FAILURE(InitWithContext());
    CUmemGenericAllocationHandle imported = 0;
    ASSERT_EQ(cu.MemImportFromShareableHandle(&imported, reinterpret_cast<void*>(uintptr_t(fd)),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_SUCCESS);
    CUdeviceptr mine = 0;
    ASSERT_EQ(cu.MemAddressReserve(&mine, size, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(cu.MemMap(mine, size, 0, imported, 0), CUDA_SUCCESS);
    const CUmemAccessDesc rw = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    ASSERT_EQ(cu.MemSetAccess(mine, size, &rw, 1), CUDA_SUCCESS);
    std::vector<unsigned char> seen(size);
    ASSERT_EQ(cu.MemcpyDtoH(seen.data(), mine, size), CUDA_SUCCESS);
    EXPECT_EQ(seen, from_parent);
    ASSERT_EQ(cu.MemcpyHtoD(mine, from_child.data(), size), CUDA_SUCCESS);
    UnmapAndRelease(size, imported, mine);
  });

  std::vector<unsigned char> seen(size);
  ASSERT_EQ(cu.MemcpyDtoH(seen.data(), ptr, size), CUDA_SUCCESS);
  EXPECT_EQ(seen, from_child);
  close(fd);
  UnmapAndRelease(size, handle, ptr);
}

// ---- CUDA_VISIBLE_DEVICES ----

using Names = std::vector<std::string>;

TEST_F(FakeCudaTest, VisibleDevicesRenumberButKeepThePhysicalIdentity) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  setenv("MEMD_FAKE_CUDA_MEMORY", "4194304", 1);  // 4 MiB each
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  const std::string uuid0 = Uuid(0);
  const std::string uuid1 = Uuid(1);
  ASSERT_NE(uuid0, uuid1);

  ASSERT_NO_FATAL_FAILURE(ReloadWithVisible("1,0"));
  ASSERT_EQ(Count(), 2);
  CUdevice device = -1;
  ASSERT_EQ(cu.DeviceGet(&device, 0), CUDA_SUCCESS);
  EXPECT_EQ(device, 0);  // CUdevice is this process's ordinal...
  // ...of physical device 1: its name, UUID and bus id go with it.
  EXPECT_EQ(Name(0), "memd fake GPU 1");
  EXPECT_EQ(Uuid(0), uuid1);
  EXPECT_EQ(Name(1), "memd fake GPU 0");
  EXPECT_EQ(Uuid(1), uuid0);
  int bus = -1;
  ASSERT_EQ(cu.DeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0), CUDA_SUCCESS);
  EXPECT_EQ(bus, 1);
  ASSERT_EQ(cu.DeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 1), CUDA_SUCCESS);
  EXPECT_EQ(bus, 0);
  EXPECT_EQ(cu.DeviceGet(&device, 2), CUDA_ERROR_INVALID_DEVICE);

  // Contexts and VMM locations take ordinals; the memory is physical 1's.
  ASSERT_NO_FATAL_FAILURE(InitWithContext(0));
  ASSERT_EQ(cu.CtxGetDevice(&device), CUDA_SUCCESS);
  EXPECT_EQ(device, 0);
  const CUmemAllocationProp on0 = DeviceProp(0);
  const CUmemAllocationProp on1 = DeviceProp(1);
  const CUmemAllocationProp on2 = DeviceProp(2);
  size_t granularity = 0;
  EXPECT_EQ(cu.MemGetAllocationGranularity(&granularity, &on1, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_SUCCESS);
  EXPECT_EQ(cu.MemGetAllocationGranularity(&granularity, &on2, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            CUDA_ERROR_INVALID_VALUE);
  CUmemGenericAllocationHandle first = 0;
  CUmemGenericAllocationHandle second = 0;
  EXPECT_EQ(cu.MemCreate(&first, kGranularity, &on2, 0), CUDA_ERROR_INVALID_DEVICE);
  ASSERT_EQ(cu.MemCreate(&first, 4 * kMiB, &on0, 0), CUDA_SUCCESS);
  int fd = -1;
  ASSERT_EQ(cu.MemExportToShareableHandle(&fd, first, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_SUCCESS);
  EXPECT_EQ(FdTarget(fd), "/memfd:memd-fake-cuda-vmm:1 (deleted)");
  close(fd);
  // Counted against ordinal 0 (physical 1), not against ordinal 1.
  size_t free_bytes = 1;
  size_t total_bytes = 0;
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, 0u);
  EXPECT_EQ(cu.MemCreate(&second, kGranularity, &on0, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cu.MemCreate(&second, 4 * kMiB, &on1, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(first), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(second), CUDA_SUCCESS);

  // Unset again: every device, under its physical index.
  EXPECT_EQ(VisibleNames(nullptr), (Names{"memd fake GPU 0", "memd fake GPU 1"}));
}

TEST_F(FakeCudaTest, VisibleDevicesTakeUuidsAndUniqueUuidPrefixes) {
  // The fake's UUIDs differ only in their last bytes (the physical index), so
  // with devices 0 and 1 no shorter prefix of 1's is unique; device 16 of 17
  // is the only one whose UUID starts like "...00001".
  setenv("MEMD_FAKE_CUDA_DEVICES", "17", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  const std::string uuid0 = Uuid(0);
  const std::string uuid1 = Uuid(1);
  const std::string uuid16 = Uuid(16);
  ASSERT_EQ(uuid1, "GPU-6d656d64-2d66-616b-652d-677075000001");  // "memd-fake-gpu", 1.

  EXPECT_EQ(VisibleNames(uuid1.c_str()), Names{"memd fake GPU 1"});
  ASSERT_NO_FATAL_FAILURE(ReloadWithVisible(uuid1.c_str()));
  EXPECT_EQ(Uuid(0), uuid1);
  std::string upper = uuid1;  // Hex digits in either case.
  for (size_t i = 4; i < upper.size(); ++i) upper[i] = static_cast<char>(std::toupper(upper[i]));
  EXPECT_EQ(VisibleNames(upper.c_str()), Names{"memd fake GPU 1"});

  const std::string prefix16 = uuid16.substr(0, uuid16.size() - 1);
  EXPECT_EQ(VisibleNames(prefix16.c_str()), Names{"memd fake GPU 16"});
  // Mixed with indices, in the listed order.
  const std::string mixed = prefix16 + ",0," + uuid1;
  EXPECT_EQ(VisibleNames(mixed.c_str()),
            (Names{"memd fake GPU 16", "memd fake GPU 0", "memd fake GPU 1"}));

  // A prefix of several UUIDs, or of none, names no device.
  const std::string prefix1 = uuid1.substr(0, uuid1.size() - 1);
  EXPECT_EQ(VisibleNames(prefix1.c_str()), Names{});
  EXPECT_EQ(VisibleNames("GPU-ffffffff"), Names{});
  EXPECT_EQ(VisibleNames("GPU-"), Names{});
  EXPECT_EQ(VisibleNames(uuid1.substr(4).c_str()), Names{});  // Without "GPU-".

  // With one device, the short form the CUDA guide shows ("GPU-8932f937").
  Unload();
  setenv("MEMD_FAKE_CUDA_DEVICES", "1", 1);
  const std::string short_form = uuid0.substr(0, 12);
  EXPECT_EQ(VisibleNames(short_form.c_str()), Names{"memd fake GPU 0"});
}

TEST_F(FakeCudaTest, VisibleDevicesStopAtTheFirstInvalidOrRepeatedEntry) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  const std::string uuid0 = Uuid(0);

  EXPECT_EQ(VisibleNames("0,7,1"), Names{"memd fake GPU 0"});  // Out of range.
  ASSERT_NO_FATAL_FAILURE(ReloadWithVisible("0,7,1"));
  ASSERT_EQ(Count(), 1);
  CUdevice device = -1;
  EXPECT_EQ(cu.DeviceGet(&device, 1), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_EQ(cu.DevicePrimaryCtxRetain(&context_, 1), CUDA_ERROR_INVALID_DEVICE);

  EXPECT_EQ(VisibleNames("1,x,0"), Names{"memd fake GPU 1"});  // Not a number.
  EXPECT_EQ(VisibleNames("1,,0"), Names{"memd fake GPU 1"});   // An empty entry.
  EXPECT_EQ(VisibleNames("1,"), Names{"memd fake GPU 1"});
  EXPECT_EQ(VisibleNames("1,-1,0"), Names{"memd fake GPU 1"});
  EXPECT_EQ(VisibleNames("-1"), Names{});  // The usual way to hide every GPU.
  EXPECT_EQ(VisibleNames("2"), Names{});
  // A device named twice (by index or by UUID) ends the list there too.
  EXPECT_EQ(VisibleNames("1,1,0"), Names{"memd fake GPU 1"});
  const std::string twice = "0," + uuid0 + ",1";
  EXPECT_EQ(VisibleNames(twice.c_str()), Names{"memd fake GPU 0"});
  // A bad list is never an error: cuInit succeeded in each load above.
  EXPECT_EQ(VisibleNames("0,1"), (Names{"memd fake GPU 0", "memd fake GPU 1"}));
}

TEST_F(FakeCudaTest, EmptyVisibleDevicesShowsNoDevice) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  // Set but empty is not unset, unlike the MEMD_FAKE_CUDA_* variables.
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  EXPECT_EQ(Count(), 0);
  CUdevice device = -1;
  EXPECT_EQ(cu.DeviceGet(&device, 0), CUDA_ERROR_INVALID_DEVICE);
  CUmemGenericAllocationHandle handle = 0;
  const CUmemAllocationProp prop = DeviceProp(0);
  EXPECT_EQ(cu.MemCreate(&handle, kGranularity, &prop, 0), CUDA_ERROR_INVALID_DEVICE);

  // Read at cuInit, once per load: changing it later changes nothing.
  setenv("CUDA_VISIBLE_DEVICES", "0", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  EXPECT_EQ(Count(), 0);
}

TEST_F(FakeCudaTest, ExportedFdImportsOnlyWhereItsPhysicalDeviceIsVisible) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  ASSERT_NO_FATAL_FAILURE(InitWithContext());  // Sees both devices.
  const size_t size = kGranularity;
  const CUmemAllocationProp on1 = DeviceProp(1);
  CUmemGenericAllocationHandle handle = 0;
  ASSERT_EQ(cu.MemCreate(&handle, size, &on1, 0), CUDA_SUCCESS);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAddressReserve(&ptr, size, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemMap(ptr, size, 0, handle, 0), CUDA_SUCCESS);
  const CUmemAccessDesc rw1 = Access(1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  ASSERT_EQ(cu.MemSetAccess(ptr, size, &rw1, 1), CUDA_SUCCESS);
  const std::vector<unsigned char> from_parent = Pattern(size, 11);
  const std::vector<unsigned char> from_child = Pattern(size, 12);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, from_parent.data(), size), CUDA_SUCCESS);
  int fd = -1;
  ASSERT_EQ(cu.MemExportToShareableHandle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                          0),
            CUDA_SUCCESS);
  ASSERT_EQ(FdTarget(fd), "/memfd:memd-fake-cuda-vmm:1 (deleted)");

  // A process that sees physical device 1 alone, as its ordinal 0.
  RunInChild([&] {
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    ASSERT_NO_FATAL_FAILURE(InitWithContext(0));
    ASSERT_EQ(Count(), 1);
    CUmemGenericAllocationHandle imported = 0;
    ASSERT_EQ(cu.MemImportFromShareableHandle(&imported, AsOsHandle(fd),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_SUCCESS);
    CUdeviceptr mine = 0;
    ASSERT_EQ(cu.MemAddressReserve(&mine, size, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(cu.MemMap(mine, size, 0, imported, 0), CUDA_SUCCESS);
    const CUmemAccessDesc by_physical = Access(1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    EXPECT_EQ(cu.MemSetAccess(mine, size, &by_physical, 1), CUDA_ERROR_INVALID_DEVICE);
    const CUmemAccessDesc rw0 = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    ASSERT_EQ(cu.MemSetAccess(mine, size, &rw0, 1), CUDA_SUCCESS);
    std::vector<unsigned char> seen(size);
    ASSERT_EQ(cu.MemcpyDtoH(seen.data(), mine, size), CUDA_SUCCESS);
    EXPECT_EQ(seen, from_parent);
    ASSERT_EQ(cu.MemcpyHtoD(mine, from_child.data(), size), CUDA_SUCCESS);
    // As on the real driver (H200, 580), an imported allocation is not
    // exported again: the importer hands on the descriptor it was given.
    int again = -1;
    EXPECT_EQ(cu.MemExportToShareableHandle(&again, imported,
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(again, -1);
    UnmapAndRelease(size, imported, mine);
  });

  // Processes that do not see physical device 1 cannot import its memory.
  for (const char* visible : {"0", ""}) {
    RunInChild([&] {
      setenv("CUDA_VISIBLE_DEVICES", visible, 1);
      ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
      CUmemGenericAllocationHandle imported = 0;
      EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, AsOsHandle(fd),
                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                CUDA_ERROR_INVALID_DEVICE)
          << "CUDA_VISIBLE_DEVICES=\"" << visible << "\"";
    });
  }
  // Nor one whose machine has no device 1 (MEMD_FAKE_CUDA_DEVICES=1).
  RunInChild([&] {
    setenv("MEMD_FAKE_CUDA_DEVICES", "1", 1);
    ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
    CUmemGenericAllocationHandle imported = 0;
    EXPECT_EQ(cu.MemImportFromShareableHandle(&imported, AsOsHandle(fd),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_ERROR_NOT_SUPPORTED);
  });

  // The bytes the first child wrote are in the parent's mapping.
  std::vector<unsigned char> seen(size);
  ASSERT_EQ(cu.MemcpyDtoH(seen.data(), ptr, size), CUDA_SUCCESS);
  EXPECT_EQ(seen, from_child);
  close(fd);
  UnmapAndRelease(size, handle, ptr);
}

// ---- Memory limits ----

TEST_F(FakeCudaTest, AllocationsBeyondTheConfiguredMemoryAreOutOfMemory) {
  setenv("MEMD_FAKE_CUDA_MEMORY", "8388608", 1);  // 8 MiB
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const CUmemAllocationProp prop = DeviceProp(0);
  CUmemGenericAllocationHandle big = 0;
  EXPECT_EQ(cu.MemCreate(&big, 10 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cu.MemCreate(&big, 6 * kMiB, &prop, 0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle more = 0;
  EXPECT_EQ(cu.MemCreate(&more, 4 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&ptr, 2 * kMiB), CUDA_SUCCESS);  // Exactly full.
  size_t free_bytes = 1;
  size_t total_bytes = 0;
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, 0u);
  EXPECT_EQ(total_bytes, 8 * kMiB);
  CUdeviceptr one_byte = 0;
  EXPECT_EQ(cu.MemAlloc(&one_byte, 1), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cu.MemRelease(big), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemAlloc(&one_byte, 1), CUDA_SUCCESS);  // Freed bytes come back.
  EXPECT_EQ(cu.MemFree(one_byte), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
}

TEST_F(FakeCudaTest, MemoryIsCountedPerDevice) {
  setenv("MEMD_FAKE_CUDA_DEVICES", "2", 1);
  setenv("MEMD_FAKE_CUDA_MEMORY", "4194304", 1);  // 4 MiB each
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  CUmemGenericAllocationHandle first = 0;
  CUmemGenericAllocationHandle second = 0;
  const CUmemAllocationProp on0 = DeviceProp(0);
  const CUmemAllocationProp on1 = DeviceProp(1);
  ASSERT_EQ(cu.MemCreate(&first, 4 * kMiB, &on0, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemCreate(&second, 2 * kMiB, &on0, 0), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_EQ(cu.MemCreate(&second, 4 * kMiB, &on1, 0), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(first), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(second), CUDA_SUCCESS);
}

}  // namespace
}  // namespace memd_fake_cuda_test
