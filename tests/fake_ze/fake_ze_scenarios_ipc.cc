// Scenarios: IPC handles in Intel's layout, within a process and across
// processes the way memd passes them: the 64 bytes plus the fd over a unix
// socket with SCM_RIGHTS, the importer patching its own fd number in.

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <string_view>

#include "common/unix_socket.h"

#include "tests/fake_ze/fake_ze_scenario.h"

namespace memd::fake_ze_test {
namespace {

constexpr size_t kSize = 3 * 4096 + 100;  // Not a whole number of pages.

struct HandleFields {
  uint64_t fd;
  uint64_t pool_offset;
  uint8_t type;
};

HandleFields Fields(const ze_ipc_mem_handle_t& handle) {
  HandleFields fields{};
  std::memcpy(&fields.fd, handle.data, 8);
  std::memcpy(&fields.pool_offset, handle.data + 8, 8);
  fields.type = static_cast<uint8_t>(handle.data[16]);
  return fields;
}

ze_ipc_mem_handle_t WithFd(ze_ipc_mem_handle_t handle, int fd) {
  uint64_t value = static_cast<uint64_t>(fd);
  std::memcpy(handle.data, &value, 8);
  return handle;
}

// Exports to a fork+exec'ed importer, which checks the bytes
// (MEMD_FAKE_ZE_POOL_OFFSET and _IPC_CACHE come from the environment).
TEST_F(Scenario, IpcAcrossProcesses) {
  Start();
  void* device = NewDeviceMemory(kSize);
  Upload(device, Pattern(kSize, 7));
  ze_ipc_mem_handle_t handle{};
  ASSERT_EQ(ze.zeMemGetIpcHandle(context, device, &handle), ZE_RESULT_SUCCESS);
  HandleFields fields = Fields(handle);
  EXPECT_EQ(fields.pool_offset, EnvNumber("MEMD_FAKE_ZE_POOL_OFFSET", 0));
  EXPECT_EQ(fields.type, 0);
  for (size_t i = 17; i < sizeof(handle.data); ++i) ASSERT_EQ(handle.data[i], 0) << i;
  int sockets[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets), 0);
  // As memd sends a lease's handle: the 64 bytes and the fd in one packet.
  ASSERT_TRUE(SendPacket(sockets[0], std::string_view(handle.data, sizeof(handle.data)),
                         static_cast<int>(fields.fd))
                  .ok());
  int status = RunChildScenario(
      "IpcImporter", {"FAKE_ZE_TEST_SOCKET=" + std::to_string(sockets[1])}, sockets[1]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "importer status " << status;
  close(sockets[0]);
  close(sockets[1]);
  // IPC cache off: the fd is the caller's to close.
  if (EnvNumber("MEMD_FAKE_ZE_IPC_CACHE", 1) == 0) close(static_cast<int>(fields.fd));
  EXPECT_EQ(Counters().ipc_get_calls, 1u);
  ASSERT_EQ(ze.zeMemFree(context, device), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// The other side of IpcAcrossProcesses.
TEST_F(Scenario, IpcImporter) {
  int socket = static_cast<int>(EnvNumber("FAKE_ZE_TEST_SOCKET", 0));
  ASSERT_GT(socket, 2) << "started by IpcAcrossProcesses";
  Start();
  auto packet = ReceivePacket(socket, sizeof(ze_ipc_mem_handle_t));
  ASSERT_TRUE(packet.ok() && packet->has_value()) << packet.status();
  ASSERT_EQ((*packet)->bytes.size(), sizeof(ze_ipc_mem_handle_t));
  ASSERT_TRUE((*packet)->fd.valid()) << "no descriptor came with the handle";
  ze_ipc_mem_handle_t handle{};
  std::memcpy(handle.data, (*packet)->bytes.data(), sizeof(handle.data));
  const int fd = (*packet)->fd.release();
  ASSERT_NE(static_cast<uint64_t>(fd), Fields(handle).fd) << "a new number in this process";
  void* opened = nullptr;
  ASSERT_EQ(ze.zeMemOpenIpcHandle(context, devices[0], WithFd(handle, fd), 0, &opened),
            ZE_RESULT_SUCCESS);
  close(fd);  // The mapping keeps the memory; the fd stays the importer's.
  void* base = nullptr;
  size_t size = 0;
  ASSERT_EQ(ze.zeMemGetAddressRange(context, opened, &base, &size), ZE_RESULT_SUCCESS);
  EXPECT_EQ(base, opened);
  EXPECT_GE(size, kSize);
  EXPECT_EQ(Download(opened, kSize), Pattern(kSize, 7));
  EXPECT_EQ(Counters().ipc_opened, 1u);
  EXPECT_EQ(ze.zeMemCloseIpcHandle(context, opened), ZE_RESULT_SUCCESS);
  EXPECT_EQ(ze.zeMemCloseIpcHandle(context, opened), ZE_RESULT_ERROR_INVALID_ARGUMENT);
  DestroyContextAndExpectNoLeaks();
}

// Opened in the exporting process itself; the copy writes through to the
// allocation. Run with two devices.
TEST_F(Scenario, IpcInSameProcess) {
  Start();
  ASSERT_EQ(devices.size(), 2u);
  void* device = NewDeviceMemory(kSize);
  Upload(device, Pattern(kSize, 1));
  ze_ipc_mem_handle_t handle{};
  ASSERT_EQ(ze.zeMemGetIpcHandle(context, device, &handle), ZE_RESULT_SUCCESS);
  void* opened = nullptr;
  EXPECT_EQ(ze.zeMemOpenIpcHandle(context, devices[1], handle, 0, &opened),
            ZE_RESULT_ERROR_INVALID_ARGUMENT) << "memory of device 0 opened on device 1";
  ASSERT_EQ(ze.zeMemOpenIpcHandle(context, devices[0], handle, ZE_IPC_MEMORY_FLAG_BIAS_CACHED,
                                  &opened),
            ZE_RESULT_SUCCESS);
  EXPECT_NE(opened, device);
  auto props = Desc<ze_memory_allocation_properties_t>(ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES);
  ASSERT_EQ(ze.zeMemGetAllocProperties(context, opened, &props, nullptr), ZE_RESULT_SUCCESS);
  EXPECT_EQ(props.type, ZE_MEMORY_TYPE_DEVICE);
  Upload(opened, Pattern(kSize, 2));
  EXPECT_EQ(Download(device, kSize), Pattern(kSize, 2));
  EXPECT_EQ(ze.zeMemCloseIpcHandle(context, device), ZE_RESULT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ze.zeMemCloseIpcHandle(context, opened), ZE_RESULT_SUCCESS);
  // Handles that are not the fake's: a pipe, a bad offset, an inner pointer.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_EQ(ze.zeMemOpenIpcHandle(context, devices[0], WithFd(handle, pipe_fds[0]), 0, &opened),
            ZE_RESULT_ERROR_INVALID_ARGUMENT);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  ze_ipc_mem_handle_t bad_offset = handle;
  uint64_t offset = 123;
  std::memcpy(bad_offset.data + 8, &offset, 8);
  EXPECT_EQ(ze.zeMemOpenIpcHandle(context, devices[0], bad_offset, 0, &opened),
            ZE_RESULT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ze.zeMemGetIpcHandle(context, static_cast<char*>(device) + 4096, &handle),
            ZE_RESULT_ERROR_INVALID_ARGUMENT);
  if (EnvNumber("MEMD_FAKE_ZE_IPC_CACHE", 1) == 0) close(static_cast<int>(Fields(handle).fd));
  ASSERT_EQ(ze.zeMemFree(context, device), ZE_RESULT_SUCCESS);
  DestroyContextAndExpectNoLeaks();
}

// MEMD_FAKE_ZE_IPC_CACHE=1: the same driver-owned fd every time, closed at
// zeMemFree.
TEST_F(Scenario, IpcCacheOn) {
  Start();
  void* device = NewDeviceMemory(4096);
  ze_ipc_mem_handle_t first{};
  ze_ipc_mem_handle_t second{};
  ASSERT_EQ(ze.zeMemGetIpcHandle(context, device, &first), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeMemGetIpcHandle(context, device, &second), ZE_RESULT_SUCCESS);
  int fd = static_cast<int>(Fields(first).fd);
  EXPECT_EQ(Fields(second).fd, Fields(first).fd);
  EXPECT_EQ(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  EXPECT_EQ(Counters().cached_fds, 1u);
  ASSERT_EQ(ze.zeMemFree(context, device), ZE_RESULT_SUCCESS);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "zeMemFree closes the cached fd";
  DestroyContextAndExpectNoLeaks();
}

// MEMD_FAKE_ZE_IPC_CACHE=0: a fresh fd each time, which the caller owns.
TEST_F(Scenario, IpcCacheOff) {
  Start();
  void* device = NewDeviceMemory(4096);
  ze_ipc_mem_handle_t first{};
  ze_ipc_mem_handle_t second{};
  ASSERT_EQ(ze.zeMemGetIpcHandle(context, device, &first), ZE_RESULT_SUCCESS);
  ASSERT_EQ(ze.zeMemGetIpcHandle(context, device, &second), ZE_RESULT_SUCCESS);
  int fd1 = static_cast<int>(Fields(first).fd);
  int fd2 = static_cast<int>(Fields(second).fd);
  EXPECT_NE(fd1, fd2);
  EXPECT_EQ(Counters().cached_fds, 0u);
  ASSERT_EQ(ze.zeMemFree(context, device), ZE_RESULT_SUCCESS);
  EXPECT_NE(fcntl(fd1, F_GETFD), -1) << "zeMemFree leaves the caller's fds alone";
  EXPECT_EQ(close(fd1), 0);
  EXPECT_EQ(close(fd2), 0);
  DestroyContextAndExpectNoLeaks();
}

// A caller that closes the driver's cached fd is caught at zeMemFree.
TEST_F(Scenario, IpcCachedFdClosedByCaller) {
  Start();
  void* device = NewDeviceMemory(4096);
  ze_ipc_mem_handle_t handle{};
  ASSERT_EQ(ze.zeMemGetIpcHandle(context, device, &handle), ZE_RESULT_SUCCESS);
  close(static_cast<int>(Fields(handle).fd));
  ASSERT_EQ(ze.zeMemFree(context, device), ZE_RESULT_SUCCESS);
  EXPECT_EQ(Counters().cached_fd_misuse, 1u);
  ASSERT_EQ(ze.zeContextDestroy(context), ZE_RESULT_SUCCESS);
}

}  // namespace
}  // namespace memd::fake_ze_test
