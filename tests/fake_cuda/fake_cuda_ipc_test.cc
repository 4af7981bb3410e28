// The FAKE CUDA driver's legacy allocations and IPC handles, host
// registration, copies, and allocations from several threads.

#include "tests/fake_cuda/fake_cuda_fixture.h"

namespace memd_fake_cuda_test {
namespace {

// ---- Legacy allocations and IPC ----

TEST_F(FakeCudaTest, LegacyAllocAndFreeErrors) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUdeviceptr ptr = 0;
  EXPECT_EQ(cu.MemAlloc(&ptr, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemAlloc(nullptr, 64), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemAlloc(&ptr, 1000), CUDA_SUCCESS);
  EXPECT_EQ(ptr % 256, 0u);
  const std::vector<unsigned char> data = Pattern(1000, 9);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, data.data(), data.size()), CUDA_SUCCESS);
  std::vector<unsigned char> back(1000);
  ASSERT_EQ(cu.MemcpyDtoH(back.data(), ptr, back.size()), CUDA_SUCCESS);
  EXPECT_EQ(back, data);
  EXPECT_EQ(cu.MemFree(ptr + 8), CUDA_ERROR_INVALID_VALUE);  // Not the base.
  EXPECT_EQ(cu.MemFree(0xdead0000), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemFree(ptr), CUDA_ERROR_INVALID_VALUE);  // Twice.
}

TEST_F(FakeCudaTest, IpcHandleOpensInAnotherProcessAndNotInTheExporter) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const size_t size = 3 * 4096;
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&ptr, size), CUDA_SUCCESS);
  const std::vector<unsigned char> from_parent = Pattern(size, 4);
  const std::vector<unsigned char> from_child = Pattern(size, 5);
  ASSERT_EQ(cu.MemcpyHtoD(ptr, from_parent.data(), size), CUDA_SUCCESS);
  CUipcMemHandle handle;
  ASSERT_EQ(cu.IpcGetMemHandle(&handle, ptr), CUDA_SUCCESS);
  CUipcMemHandle again;
  ASSERT_EQ(cu.IpcGetMemHandle(&again, ptr), CUDA_SUCCESS);  // Cheap and repeatable.
  EXPECT_EQ(std::memcmp(&handle, &again, sizeof(handle)), 0);

  CUdeviceptr opened = 0;
  EXPECT_EQ(cu.IpcOpenMemHandle(&opened, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_CONTEXT);  // CUDA refuses the exporter's own handle.

  RunInChild([&] {
    ASSERT_NO_FATAL_FAILURE(InitWithContext());
    CUdeviceptr mine = 0;
    EXPECT_EQ(cu.IpcOpenMemHandle(&mine, handle, 0), CUDA_ERROR_INVALID_VALUE);  // Flags.
    ASSERT_EQ(cu.IpcOpenMemHandle(&mine, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_SUCCESS);
    std::vector<unsigned char> seen(size);
    ASSERT_EQ(cu.MemcpyDtoH(seen.data(), mine, size), CUDA_SUCCESS);
    EXPECT_EQ(seen, from_parent);
    ASSERT_EQ(cu.MemcpyHtoD(mine, from_child.data(), size), CUDA_SUCCESS);
    // Opening again counts and returns the same pointer; each open needs a close.
    CUdeviceptr twice = 0;
    ASSERT_EQ(cu.IpcOpenMemHandle(&twice, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_SUCCESS);
    EXPECT_EQ(twice, mine);
    // Imported memory is not the importer's to free or to re-export.
    EXPECT_EQ(cu.MemFree(mine), CUDA_ERROR_INVALID_VALUE);
    CUipcMemHandle reexport;
    EXPECT_EQ(cu.IpcGetMemHandle(&reexport, mine), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(cu.IpcCloseMemHandle(mine), CUDA_SUCCESS);
    EXPECT_EQ(cu.MemsetD8(mine, 0, 1), CUDA_SUCCESS);  // Still open once.
    EXPECT_EQ(cu.IpcCloseMemHandle(mine), CUDA_SUCCESS);
    EXPECT_EQ(cu.IpcCloseMemHandle(mine), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(cu.MemsetD8(mine, 0, 1), CUDA_ERROR_INVALID_VALUE);  // Unmapped.
  });

  std::vector<unsigned char> seen(size);
  ASSERT_EQ(cu.MemcpyDtoH(seen.data(), ptr, size), CUDA_SUCCESS);
  std::vector<unsigned char> expected = from_child;
  expected[0] = 0;  // The child's memset.
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
}

TEST_F(FakeCudaTest, IpcHandleErrors) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&ptr, 8192), CUDA_SUCCESS);
  CUipcMemHandle handle;
  EXPECT_EQ(cu.IpcGetMemHandle(&handle, ptr + 4096), CUDA_ERROR_INVALID_VALUE);  // Not a base.
  EXPECT_EQ(cu.IpcGetMemHandle(&handle, 0xdead0000), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.IpcGetMemHandle(nullptr, ptr), CUDA_ERROR_INVALID_VALUE);
  CUmemGenericAllocationHandle vmm = 0;
  CUdeviceptr va = 0;
  ASSERT_NO_FATAL_FAILURE(CreateMapped(kGranularity, &vmm, &va));
  EXPECT_EQ(cu.IpcGetMemHandle(&handle, va), CUDA_ERROR_INVALID_VALUE);  // VMM memory.
  UnmapAndRelease(kGranularity, vmm, va);

  CUipcMemHandle garbage;
  std::memset(&garbage, 0x42, sizeof(garbage));
  CUdeviceptr opened = 0;
  EXPECT_EQ(cu.IpcOpenMemHandle(&opened, garbage, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cu.IpcCloseMemHandle(ptr), CUDA_ERROR_INVALID_VALUE);  // Not IPC-opened.

  // A handle to memory the exporter has freed no longer opens.
  ASSERT_EQ(cu.IpcGetMemHandle(&handle, ptr), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
  RunInChild([&] {
    ASSERT_NO_FATAL_FAILURE(InitWithContext());
    CUdeviceptr mine = 0;
    EXPECT_EQ(cu.IpcOpenMemHandle(&mine, handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_ERROR_INVALID_HANDLE);
  });
}

TEST_F(FakeCudaTest, NewMemoryWhereFreedMemoryWasGetsANewHandle) {
  // cuda.h: if memory is freed with cuMemFree and a later cuMemAlloc returns
  // memory at the same address, cuIpcGetMemHandle returns a unique handle
  // for the new memory. The old handle must not reach the new memory (memd
  // relies on it when it frees a legacy IPC segment).
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const size_t size = 4 * 4096;
  CUdeviceptr old_ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&old_ptr, size), CUDA_SUCCESS);
  CUipcMemHandle old_handle;
  ASSERT_EQ(cu.IpcGetMemHandle(&old_handle, old_ptr), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemFree(old_ptr), CUDA_SUCCESS);
  CUdeviceptr new_ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&new_ptr, size), CUDA_SUCCESS);
  const std::vector<unsigned char> secret = Pattern(size, 9);
  ASSERT_EQ(cu.MemcpyHtoD(new_ptr, secret.data(), size), CUDA_SUCCESS);
  CUipcMemHandle new_handle;
  ASSERT_EQ(cu.IpcGetMemHandle(&new_handle, new_ptr), CUDA_SUCCESS);
  EXPECT_NE(std::memcmp(&old_handle, &new_handle, sizeof(old_handle)), 0);
  RunInChild([&] {
    ASSERT_NO_FATAL_FAILURE(InitWithContext());
    CUdeviceptr mine = 0;
    EXPECT_EQ(cu.IpcOpenMemHandle(&mine, old_handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_ERROR_INVALID_HANDLE);
    ASSERT_EQ(cu.IpcOpenMemHandle(&mine, new_handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
              CUDA_SUCCESS);
    std::vector<unsigned char> seen(size);
    ASSERT_EQ(cu.MemcpyDtoH(seen.data(), mine, size), CUDA_SUCCESS);
    EXPECT_EQ(seen, secret);
    EXPECT_EQ(cu.IpcCloseMemHandle(mine), CUDA_SUCCESS);
  });
  EXPECT_EQ(cu.MemFree(new_ptr), CUDA_SUCCESS);
}

// ---- Host registration ----

TEST_F(FakeCudaTest, HostRegistration) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const size_t size = 4 * 4096;
  void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(memory, MAP_FAILED);
  char* bytes = static_cast<char*>(memory);

  EXPECT_EQ(cu.MemHostRegister(bytes, size, 0x100), CUDA_ERROR_INVALID_VALUE);  // Unknown flag.
  EXPECT_EQ(cu.MemHostRegister(bytes, size, CU_MEMHOSTREGISTER_READ_ONLY),
            CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(cu.MemHostRegister(bytes, 0, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemHostRegister(nullptr, size, 0), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemHostRegister(bytes, 2 * 4096,
                               CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP),
            CUDA_SUCCESS);
  EXPECT_EQ(cu.MemHostRegister(bytes + 4096, 2 * 4096, 0),
            CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  ASSERT_EQ(cu.MemHostRegister(bytes + 2 * 4096, 4096, 0), CUDA_SUCCESS);  // Adjacent is fine.

  CUdeviceptr device_ptr = 0;
  ASSERT_EQ(cu.MemHostGetDevicePointer(&device_ptr, bytes + 100, 0), CUDA_SUCCESS);
  EXPECT_EQ(AsPointer(device_ptr), bytes + 100);  // Unified addressing.
  EXPECT_EQ(cu.MemHostGetDevicePointer(&device_ptr, bytes + 3 * 4096, 0),
            CUDA_ERROR_INVALID_VALUE);  // Not registered.
  EXPECT_EQ(cu.MemHostGetDevicePointer(&device_ptr, bytes, 1), CUDA_ERROR_INVALID_VALUE);

  // Registered memory is a valid copy target; a copy may span registrations.
  const std::vector<unsigned char> data = Pattern(3 * 4096, 6);
  ASSERT_EQ(cu.MemcpyHtoD(reinterpret_cast<CUdeviceptr>(bytes), data.data(), data.size()),
            CUDA_SUCCESS);
  EXPECT_EQ(std::memcmp(bytes, data.data(), data.size()), 0);
  EXPECT_EQ(cu.MemcpyHtoD(reinterpret_cast<CUdeviceptr>(bytes), data.data(), size),
            CUDA_ERROR_INVALID_VALUE);  // The last page is not registered.

  EXPECT_EQ(cu.MemHostUnregister(bytes + 4096), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cu.MemHostUnregister(bytes + 3 * 4096), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cu.MemHostUnregister(bytes), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemHostUnregister(bytes), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cu.MemHostUnregister(bytes + 2 * 4096), CUDA_SUCCESS);

  // Memory that is not mapped cannot be registered.
  ASSERT_EQ(munmap(memory, size), 0);
  EXPECT_EQ(cu.MemHostRegister(bytes, size, 0), CUDA_ERROR_INVALID_VALUE);
}

// ---- Copies ----

TEST_F(FakeCudaTest, CopiesOutsideDeviceMemoryAreInvalidValue) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  CUdeviceptr ptr = 0;
  ASSERT_EQ(cu.MemAlloc(&ptr, 4096), CUDA_SUCCESS);
  std::vector<unsigned char> buffer(8192, 1);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, buffer.data(), 4096), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, buffer.data(), 4097), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyHtoD(ptr + 4000, buffer.data(), 200), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyDtoH(buffer.data(), ptr + 1, 4096), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemsetD8(ptr, 0, 8192), CUDA_ERROR_INVALID_VALUE);
  // Host memory that was never registered is not device memory.
  EXPECT_EQ(cu.MemcpyHtoD(reinterpret_cast<CUdeviceptr>(buffer.data()), buffer.data(), 16),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyDtoH(buffer.data(), 0, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, nullptr, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyDtoH(nullptr, ptr, 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, buffer.data(), 0), CUDA_SUCCESS);  // Nothing to copy.
  EXPECT_EQ(cu.MemcpyHtoD(~CUdeviceptr{0} - 8, buffer.data(), 16), CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemcpyHtoD(ptr, buffer.data(), 16), CUDA_ERROR_INVALID_VALUE);  // Freed.
}

TEST_F(FakeCudaTest, CopiesMaySpanAdjacentVmmMappings) {
  ASSERT_NO_FATAL_FAILURE(InitWithContext());
  const CUmemAllocationProp prop = DeviceProp(0);
  CUmemGenericAllocationHandle first = 0;
  CUmemGenericAllocationHandle second = 0;
  ASSERT_EQ(cu.MemCreate(&first, kGranularity, &prop, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemCreate(&second, kGranularity, &prop, 0), CUDA_SUCCESS);
  CUdeviceptr va = 0;
  ASSERT_EQ(cu.MemAddressReserve(&va, 3 * kGranularity, 0, 0, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemMap(va, kGranularity, 0, first, 0), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemMap(va + kGranularity, kGranularity, 0, second, 0), CUDA_SUCCESS);
  const CUmemAccessDesc rw = Access(0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  ASSERT_EQ(cu.MemSetAccess(va, 2 * kGranularity, &rw, 1), CUDA_SUCCESS);
  const std::vector<unsigned char> data = Pattern(8192, 8);
  EXPECT_EQ(cu.MemcpyHtoD(va + kGranularity - 4096, data.data(), data.size()), CUDA_SUCCESS);
  // Past the second mapping is reserved but unmapped address space.
  EXPECT_EQ(cu.MemcpyHtoD(va + 2 * kGranularity - 4096, data.data(), data.size()),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cu.MemUnmap(va, 2 * kGranularity), CUDA_SUCCESS);
  ASSERT_EQ(cu.MemAddressFree(va, 3 * kGranularity), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(first), CUDA_SUCCESS);
  EXPECT_EQ(cu.MemRelease(second), CUDA_SUCCESS);
}

// ---- Threads ----

TEST_F(FakeCudaTest, ThreadsAllocateConcurrently) {
  setenv("MEMD_FAKE_CUDA_MEMORY", "67108864", 1);
  ASSERT_EQ(cu.Init(0), CUDA_SUCCESS);
  CUcontext context = nullptr;
  ASSERT_EQ(cu.DevicePrimaryCtxRetain(&context, 0), CUDA_SUCCESS);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      EXPECT_EQ(cu.CtxSetCurrent(context), CUDA_SUCCESS);
      for (int i = 0; i < 50; ++i) {
        CUdeviceptr ptr = 0;
        ASSERT_EQ(cu.MemAlloc(&ptr, 4096), CUDA_SUCCESS);
        ASSERT_EQ(cu.MemsetD8(ptr, static_cast<unsigned char>(t), 4096), CUDA_SUCCESS);
        unsigned char byte = 0xff;
        ASSERT_EQ(cu.MemcpyDtoH(&byte, ptr + 4095, 1), CUDA_SUCCESS);
        EXPECT_EQ(byte, t);
        ASSERT_EQ(cu.MemFree(ptr), CUDA_SUCCESS);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_EQ(cu.CtxSetCurrent(context), CUDA_SUCCESS);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  ASSERT_EQ(cu.MemGetInfo(&free_bytes, &total_bytes), CUDA_SUCCESS);
  EXPECT_EQ(free_bytes, total_bytes);
}

}  // namespace
}  // namespace memd_fake_cuda_test
