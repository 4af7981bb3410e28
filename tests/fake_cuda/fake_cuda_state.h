#pragma once

// memd FAKE CUDA driver: libmemd_fake_cuda.so.
//
// A test double for NVIDIA's libcuda.so.1, built by the project so that memd's
// CUDA backend runs its real code paths on machines without a GPU
// (docs/design.md, "CUDA"). It is not a CUDA driver and runs no kernels. It
// exports exactly the driver entry points memd resolves (by the versioned
// symbol names cuda.h maps them to), and cuDevicePrimaryCtxGetState, which
// memd's tests call, with CUDA's documented semantics and error codes, and
// keeps its "device memory" in host memory backed by memfds:
//
//   * a CUdeviceptr is a host virtual address of the calling process;
//   * cuMemCreate memory is a sealed memfd; cuMemExportToShareableHandle hands
//     out a dup of it, so a process that imports it maps the same pages;
//   * cuMemAlloc memory is a memfd mapping too, and a CUipcMemHandle names the
//     exporter's pid and fd: the importer opens /proc/<pid>/fd/<fd> (same user
//     or root), so legacy IPC also shares real memory between processes.
//
//   * streams are in-order queues; their copies complete later, on one
//     copy-engine thread per device and direction, at the time the link
//     model gives them (the bytes land then, not at the call), and host
//     functions run on a thread of their own.
//
// Configuration (environment, read once, by the first cuInit of a load of the
// library): MEMD_FAKE_CUDA_DEVICES, MEMD_FAKE_CUDA_MEMORY, MEMD_FAKE_CUDA_VMM,
// MEMD_FAKE_CUDA_INIT_ERROR, and CUDA_VISIBLE_DEVICES as CUDA reads it: which
// of the physical devices the process sees, and under which ordinals; for the
// asynchronous side MEMD_FAKE_CUDA_LINK_GBPS, MEMD_FAKE_CUDA_COPY_LATENCY_US,
// MEMD_FAKE_CUDA_POISON and the fault plan MEMD_FAKE_CUDA_FAULTS. See
// README.md next to this file for what each call models, and which error each
// misuse returns.
//
// State is per process (per load of the library: dlclose + dlopen starts
// afresh) and guarded by one mutex; the current context is per thread. The
// device threads start with a device's first stream and stop when the
// library is unloaded.
//
// This header: the objects that cuda.h's opaque CUcontext, CUstream and
// CUevent point to, the records of the memory the fake hands out, and the
// one FakeDriver that owns them all for a load of the library. FakeDriver's
// member functions are defined by API area in the fake_cuda_*.cc files that
// README.md lists; fake_cuda_exports.cc holds the exported entry points.

#include <cuda.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/fake_cuda/fake_cuda_config.h"

// cuda.h declares CUcontext as a pointer to this (incomplete) type. The fake
// has one primary context per device and no others.
struct CUctx_st {
  int device = 0;
  int retains = 0;  // Active while > 0 (cuDevicePrimaryCtxRetain/Release).
};

struct CUevent_st;
struct CUstream_st;

namespace memd::fake_cuda {

// An error an asynchronous copy ended with (MEMD_FAKE_CUDA_FAULTS "event@N"):
// surfaced once, by the first query or synchronize that reports it.
struct AsyncError {
  CUresult code = CUDA_SUCCESS;
  bool surfaced = false;
};

// One entry of a stream's queue. The head runs; the rest wait behind it.
struct StreamOp {
  enum Kind { kCopy, kRecord, kWait, kHostFunc } kind = kCopy;
  // kCopy
  Direction direction = kHostToDevice;
  uintptr_t dst = 0;
  uintptr_t src = 0;
  size_t bytes = 0;
  CopyFault fault;  // kind kNone unless MEMD_FAKE_CUDA_FAULTS names this copy.
  // kRecord, kWait: which record of the event.
  std::shared_ptr<CUevent_st> event;
  uint64_t generation = 0;
  // kHostFunc
  CUhostFn fn = nullptr;
  void* data = nullptr;
};

}  // namespace memd::fake_cuda

// cuda.h's CUevent. Records are numbered: cuEventRecord makes generation
// `recorded`, pending until its stream reaches it.
struct CUevent_st {
  int device = 0;
  uint64_t recorded = 0;            // 0: never recorded.
  std::set<uint64_t> pending;       // Generations recorded and not reached yet.
  std::vector<CUstream_st*> waiters;  // Streams whose head waits on a pending record.
  // The error of the stream's copies that the record at `error_generation`
  // came after, to be surfaced by a query or synchronize of that record.
  std::shared_ptr<memd::fake_cuda::AsyncError> error;
  uint64_t error_generation = 0;
};

// cuda.h's CUstream: an in-order queue of operations on one device.
struct CUstream_st {
  int device = 0;
  int priority = 0;         // Clamped into [-5, 0]; copies ignore it, as in CUDA.
  bool non_blocking = false;
  bool legacy = false;      // The device's NULL stream.
  std::deque<memd::fake_cuda::StreamOp> ops;
  bool running = false;     // The head is on an engine, a host-call thread, or waiting.
  uint64_t enqueued = 0;    // Operations ever enqueued; the i-th has id i.
  uint64_t completed = 0;   // Operations done (in order): id <= completed is done.
  std::shared_ptr<memd::fake_cuda::AsyncError> error;  // The latest failed copy's.
};

namespace memd::fake_cuda {

// Generic allocation handles are opaque numbers; starting far from small
// integers and from addresses makes a confused caller fail loudly.
constexpr CUmemGenericAllocationHandle kFirstHandle = 0xfa4e000000000001ULL;

// One copy engine of a device: copies of one direction, one at a time, from
// every stream of the device, in the order they became ready.
struct CopyEngine {
  std::deque<std::shared_ptr<CUstream_st>> queue;  // Streams whose head is a copy.
  std::chrono::steady_clock::time_point free_at{};  // When the modelled link is free.
  std::condition_variable cv;
  std::unique_ptr<std::thread> thread;
};

// A device this process sees. Its index in FakeDriver::devices_ is its
// ordinal here (what CUdevice and location.id name); `physical` is the device
// of the machine it is (MEMD_FAKE_CUDA_DEVICES numbers those), which names it
// wherever identity leaves the process: UUID, name, PCI bus id, memfd names.
struct Device {
  int physical = 0;
  uint64_t used = 0;  // Bytes charged by cuMemCreate and cuMemAlloc.
  CUctx_st context;
  // A sticky error (MEMD_FAKE_CUDA_FAULTS "sticky@N"): every later call on
  // the device's context returns it, until the library is reloaded.
  CUresult sticky = CUDA_SUCCESS;
  // Started with the first stream: the copy engines and the thread that runs
  // cuLaunchHostFunc functions.
  bool started = false;
  std::shared_ptr<CUstream_st> null_stream;  // Made on first use.
  CopyEngine engines[kDirections];
  std::deque<std::shared_ptr<CUstream_st>> host_calls;
  std::condition_variable host_cv;
  std::unique_ptr<std::thread> host_thread;
};

// Memory behind a generic allocation handle (cuMemCreate or an import). It
// outlives cuMemRelease while mapped, as in CUDA.
struct VmmAllocation {
  int fd = -1;
  size_t size = 0;
  int device = 0;           // This process's ordinal.
  bool charged = false;     // Created here: counts against the device.
  bool exportable = false;  // Created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.
  bool released = false;    // cuMemRelease was called.
  int mappings = 0;
};

struct VmmMapping {
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;
  bool readable = false;  // Set by cuMemSetAccess.
  bool writable = false;
};

struct LegacyAllocation {  // cuMemAlloc
  size_t size = 0;         // Rounded up to whole pages.
  int fd = -1;
  int device = 0;
  CUctx_st* context = nullptr;
  uint64_t id = 0;
};

struct IpcMapping {  // cuIpcOpenMemHandle
  size_t size = 0;
  pid_t pid = 0;
  uint64_t id = 0;
  int opens = 0;
  CUctx_st* context = nullptr;
};

struct HostRegistration {  // cuMemHostRegister, or cuMemHostAlloc when `allocated`
  size_t size = 0;
  CUctx_st* context = nullptr;
  bool allocated = false;  // cuMemHostAlloc: the fake's own mapping of...
  size_t mapped = 0;       // ...this many (page-rounded) bytes.
};

// The whole fake, for one load of the library: its configuration, devices,
// contexts, memory, streams and events. Thread-safe: every call takes mu_,
// and so do the device threads (fake_cuda_async.cc), which let go of it only
// to move a copy's bytes and to run a host function; the call-fault counters
// have a mutex of their own (Injected). The current context is per thread.
class FakeDriver {
 public:
  FakeDriver() = default;
  FakeDriver(const FakeDriver&) = delete;
  FakeDriver& operator=(const FakeDriver&) = delete;
  ~FakeDriver();  // fake_cuda_state.cc

  // ---- Initialisation (fake_cuda_init.cc) ----

  CUresult Init(unsigned int flags);

  // ---- Devices and contexts (fake_cuda_contexts.cc) ----

  CUresult DeviceGet(CUdevice* device, int ordinal);
  CUresult DeviceGetCount(int* count);
  CUresult DeviceGetName(char* name, int length, CUdevice device);
  CUresult DeviceGetUuid(CUuuid* uuid, CUdevice device);
  CUresult DeviceTotalMem(size_t* bytes, CUdevice device);
  CUresult DeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device);
  CUresult PrimaryCtxRetain(CUcontext* context, CUdevice device);
  CUresult PrimaryCtxRelease(CUdevice device);
  CUresult PrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active);
  CUresult CtxSetCurrent(CUcontext context);
  CUresult CtxGetCurrent(CUcontext* context);
  CUresult CtxGetDevice(CUdevice* device);
  CUresult MemGetInfo(size_t* free_bytes, size_t* total_bytes);

  // ---- Virtual memory management, no context needed (fake_cuda_vmm.cc) ----

  CUresult MemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option);
  CUresult MemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags);
  CUresult MemRelease(CUmemGenericAllocationHandle handle);
  CUresult MemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                             CUdeviceptr addr, unsigned long long flags);
  CUresult MemAddressFree(CUdeviceptr ptr, size_t size);
  CUresult MemMap(CUdeviceptr ptr, size_t size, size_t offset,
                  CUmemGenericAllocationHandle handle, unsigned long long flags);
  CUresult MemUnmap(CUdeviceptr ptr, size_t size);
  CUresult MemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                        size_t count);
  CUresult MemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type,
                                      unsigned long long flags);
  CUresult MemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        CUmemAllocationHandleType type);

  // ---- Legacy allocations and IPC, need a current context (fake_cuda_legacy.cc) ----

  CUresult MemAlloc(CUdeviceptr* dptr, size_t bytesize);
  CUresult MemFree(CUdeviceptr dptr);
  CUresult IpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr);
  CUresult IpcOpenMemHandle(CUdeviceptr* dptr, const CUipcMemHandle& handle,
                            unsigned int flags);
  CUresult IpcCloseMemHandle(CUdeviceptr dptr);

  // ---- Host registration and pinned host memory, need a context (fake_cuda_host.cc) ----

  CUresult MemHostRegister(void* p, size_t bytesize, unsigned int flags);
  CUresult MemHostUnregister(void* p);
  CUresult MemHostGetDevicePointer(CUdeviceptr* dptr, void* p, unsigned int flags);
  CUresult MemHostAlloc(void** pointer, size_t bytes, unsigned int flags);
  CUresult MemFreeHost(void* pointer);

  // ---- Copies, need a current context (fake_cuda_copies.cc) ----

  CUresult MemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes);
  CUresult MemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes);
  CUresult MemsetD8(CUdeviceptr dst, unsigned char value, size_t count);

  // ---- Fault injection by call count (fake_cuda_state.cc) ----

  CUresult Injected(const char* symbol);
  // How many times `symbol` was called in this load of the library (every
  // call, from the first on; memdFakeCudaCallCount).
  uint64_t CallCount(const char* symbol);

  // ---- Streams, events, asynchronous copies, host functions (fake_cuda_streams.cc) ----

  CUresult CtxGetStreamPriorityRange(int* least, int* greatest);
  CUresult StreamCreateWithPriority(CUstream* stream, unsigned int flags, int priority);
  CUresult StreamDestroy(CUstream handle);
  CUresult StreamSynchronize(CUstream handle);
  CUresult StreamWaitEvent(CUstream handle, CUevent event_handle, unsigned int flags);
  CUresult EventCreate(CUevent* event, unsigned int flags);
  CUresult EventDestroy(CUevent handle);
  CUresult EventRecord(CUevent handle, CUstream stream_handle);
  CUresult EventQuery(CUevent handle);
  CUresult EventSynchronize(CUevent handle);
  CUresult MemcpyAsync(Direction direction, uintptr_t dst, uintptr_t src, size_t bytes,
                       CUstream handle);
  CUresult LaunchHostFunc(CUstream handle, CUhostFn fn, void* data);

 private:
  bool initialised() const { return init_attempted_ && init_result_ == CUDA_SUCCESS; }
  CUresult Sticky(int device) const { return devices_[static_cast<size_t>(device)]->sticky; }
  bool ValidDevice(int ordinal) const {
    return ordinal >= 0 && static_cast<size_t>(ordinal) < devices_.size();
  }

  // Devices and contexts (fake_cuda_contexts.cc).
  int LocalOrdinal(int physical) const;
  bool KnownContext(CUcontext context) const;
  CUresult Current(CUctx_st** context) const;
  void ResetContext(CUctx_st* context);

  // Initialisation (fake_cuda_init.cc).
  CUresult Configure();

  // Virtual memory management (fake_cuda_vmm.cc).
  std::map<uintptr_t, size_t>::iterator ReservationContaining(uintptr_t address);
  bool WholeMappings(uintptr_t start, size_t size, std::vector<uintptr_t>* bases) const;
  void MaybeDestroy(std::map<CUmemGenericAllocationHandle, VmmAllocation>::iterator it);
  static bool HeldByImports(int fd);
  void SweepReleased();
  static int OpenPrivately(int fd);

  // Legacy allocations (fake_cuda_legacy.cc).
  void FreeLegacy(std::map<uintptr_t, LegacyAllocation>::iterator it);

  // Which device memory is accessible (fake_cuda_copies.cc).
  bool DeviceAccessible(CUdeviceptr address, size_t bytes, bool write);

  // Streams and events (fake_cuda_streams.cc).
  static CUresult Surface(const std::shared_ptr<AsyncError>& error);
  CUresult RecordState(CUevent_st& event, uint64_t generation);
  bool Pinned(uintptr_t start, size_t bytes);
  CUresult ResolveStream(CUstream handle, std::shared_ptr<CUstream_st>* stream);

  // The asynchronous side: engines and host calls (fake_cuda_async.cc).
  void StartDevice(int ordinal);
  void StopThreads();
  void JoinOrAbandon(std::unique_ptr<std::thread>& thread);
  uint64_t Enqueue(const std::shared_ptr<CUstream_st>& stream, StreamOp op);
  void ChainAfter(const std::shared_ptr<CUstream_st>& earlier,
                  const std::shared_ptr<CUstream_st>& later);
  uint64_t Push(const std::shared_ptr<CUstream_st>& stream, StreamOp op);
  void Pop(CUstream_st& stream);
  void Advance(std::shared_ptr<CUstream_st> stream);
  void ReachRecord(CUstream_st& stream, const StreamOp& record, bool carry_error);
  void Complete(const std::shared_ptr<CUstream_st>& stream);
  std::chrono::nanoseconds CopyTime(Direction direction, size_t bytes) const;
  void RunCopyEngine(int ordinal, Direction direction);
  void MoveBytes(std::unique_lock<std::mutex>& lock, const StreamOp& copy);
  void RunHostCalls(int ordinal);

  std::mutex mu_;
  bool init_attempted_ = false;
  CUresult init_result_ = CUDA_ERROR_NOT_INITIALIZED;
  size_t memory_ = 0;
  bool vmm_ = true;
  int physical_count_ = 0;  // MEMD_FAKE_CUDA_DEVICES: the machine's devices.
  // The devices this process sees, by ordinal. Stable addresses: CUcontext
  // points in.
  std::vector<std::unique_ptr<Device>> devices_;
  CUmemGenericAllocationHandle next_handle_ = kFirstHandle;
  uint64_t legacy_count_ = 0;
  std::map<CUmemGenericAllocationHandle, VmmAllocation> allocations_;
  // Released by this process while imports elsewhere still hold them: still
  // counted used (MaybeDestroy, SweepReleased).
  std::vector<VmmAllocation> released_;
  std::map<uintptr_t, size_t> reservations_;  // Base -> size.
  std::map<uintptr_t, VmmMapping> mappings_;
  std::map<uintptr_t, LegacyAllocation> legacy_;
  std::map<uintptr_t, IpcMapping> ipc_;
  std::map<uintptr_t, HostRegistration> host_;

  // ---- The asynchronous side ----
  LinkModel link_;
  bool poison_ = false;
  std::vector<CopyFault> copy_faults_;
  uint64_t copies_ = 0;  // Asynchronous copies accepted so far (fault numbering).
  bool stopping_ = false;
  pid_t threads_owner_ = 0;  // The process that started the device threads.
  // Notified whenever an operation of any stream completes.
  std::condition_variable progress_;
  // Live streams by handle; destroyed ones leave at once (their work goes on).
  std::map<CUstream_st*, std::shared_ptr<CUstream_st>> streams_;
  std::map<CUevent_st*, std::shared_ptr<CUevent_st>> events_;
  // Every stream with queued work, destroyed or not: what keeps it alive.
  std::map<CUstream_st*, std::shared_ptr<CUstream_st>> busy_;

  // Call faults: read without mu_ by every exported call once armed.
  struct CallCounter {
    uint64_t calls = 0;
    std::vector<CallFault> faults;
  };
  std::mutex fault_mu_;
  std::atomic<bool> call_faults_armed_{false};
  std::map<std::string, CallCounter> call_faults_;
  // Every call of every exported symbol, by name (tests count imports).
  std::mutex count_mu_;
  std::map<std::string, uint64_t, std::less<>> call_counts_;
};

// The one driver of this load of the library (fake_cuda_state.cc).
extern FakeDriver g_driver;

}  // namespace memd::fake_cuda
