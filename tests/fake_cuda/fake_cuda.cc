// memd FAKE CUDA driver: libmemd_fake_cuda.so.
//
// A test double for NVIDIA's libcuda.so.1, built by the project so that memd's
// CUDA backend runs its real code paths on machines without a GPU
// (docs/design.md, "CUDA"). It is not a CUDA driver and runs no kernels. It exports exactly
// the driver entry points memd resolves (by the versioned symbol names cuda.h
// maps them to), and cuDevicePrimaryCtxGetState, which memd's tests call, with CUDA's documented semantics and error codes, and keeps
// its "device memory" in host memory backed by memfds:
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

#include <cuda.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/fake_cuda/fake_cuda_config.h"
#include "tests/fake_cuda/fake_cuda_errors.h"

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
namespace {

constexpr size_t kGranularity = size_t{2} << 20;  // Minimum and recommended.
constexpr int kMaxDevices = 64;
constexpr uint64_t kDefaultMemory = uint64_t{1} << 30;
constexpr int kDriverVersion = 13000;
// Generic allocation handles are opaque numbers; starting far from small
// integers and from addresses makes a confused caller fail loudly.
constexpr CUmemGenericAllocationHandle kFirstHandle = 0xfa4e000000000001ULL;
// memfd names: the importer of an fd or of an IPC handle reads them back from
// /proc/self/fd to check that it was given the fake's memory.
constexpr char kVmmMemfdPrefix[] = "memd-fake-cuda-vmm:";      // + physical device
constexpr char kAllocMemfdPrefix[] = "memd-fake-cuda-alloc:";  // + id (hex)

// What a CUipcMemHandle carries (the rest of its 64 bytes are zero).
struct IpcWire {
  char magic[16];
  uint32_t version;
  int32_t pid;     // The exporting process, which holds the memfd open...
  int32_t fd;      // ...as this descriptor.
  int32_t device;  // Physical: ordinals differ between processes.
  uint64_t id;     // Names the allocation (and its memfd); unique per process.
  uint64_t size;
};
static_assert(sizeof(IpcWire) <= CU_IPC_HANDLE_SIZE);
constexpr char kIpcMagic[16] = "memd-fake-cuda";
constexpr uint32_t kIpcVersion = 1;

// A device this process sees. Its index in FakeDriver::devices_ is its
// ordinal here (what CUdevice and location.id name); `physical` is the device
// of the machine it is (MEMD_FAKE_CUDA_DEVICES numbers those), which names it
// wherever identity leaves the process: UUID, name, PCI bus id, memfd names.
// One copy engine of a device: copies of one direction, one at a time, from
// every stream of the device, in the order they became ready.
struct CopyEngine {
  std::deque<std::shared_ptr<CUstream_st>> queue;  // Streams whose head is a copy.
  std::chrono::steady_clock::time_point free_at{};  // When the modelled link is free.
  std::condition_variable cv;
  std::unique_ptr<std::thread> thread;
};

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

// CUDA's stream priorities: lower numbers are higher priorities.
constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;
// What MEMD_FAKE_CUDA_POISON=1 fills a copy's destination with until the
// copy lands.
constexpr unsigned char kPoison = 0xa5;

// The calling thread's current context (cuCtxSetCurrent). A plain pointer:
// a thread_local with a destructor would pin the library in memory. Static
// TLS (initial-exec): dynamic TLS of a library dlclosed before exit made
// LeakSanitizer's exit-time tracer crash ("Tracer caught signal 11") in
// clients that had loaded the fake, in most sanitizer runs of the CUDA
// multi-process tests.
__attribute__((tls_model("initial-exec"))) thread_local CUctx_st* t_current = nullptr;

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// Rounds `value` up to a multiple of `to` (a power of two); false on overflow.
bool RoundUp(size_t value, size_t to, size_t* rounded) {
  if (value > SIZE_MAX - (to - 1)) return false;
  *rounded = (value + to - 1) & ~(to - 1);
  return true;
}

bool EndOf(uintptr_t start, size_t size, uintptr_t* end) {
  if (start > UINTPTR_MAX - size) return false;
  *end = start + size;
  return true;
}

void* AsPointer(uintptr_t address) { return reinterpret_cast<void*>(address); }

// Digits only: no sign, no suffix, no spaces.
bool ParseUnsigned(const char* text, uint64_t* value) {
  if (text == nullptr || *text == '\0') return false;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9') return false;
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(text, &end, 10);
  if (errno != 0 || end == nullptr || *end != '\0') return false;
  *value = parsed;
  return true;
}

// A physical device's UUID: "memd-fake-gpu" then the index in 3 big-endian
// bytes. Stable across processes, whatever ordinal a process gives the device.
CUuuid PhysicalUuid(int physical) {
  static constexpr char kPrefix[] = "memd-fake-gpu";
  static_assert(sizeof(kPrefix) - 1 == 13);
  CUuuid uuid;
  std::memcpy(uuid.bytes, kPrefix, 13);
  const uint32_t index = static_cast<uint32_t>(physical);
  uuid.bytes[13] = static_cast<char>((index >> 16) & 0xff);
  uuid.bytes[14] = static_cast<char>((index >> 8) & 0xff);
  uuid.bytes[15] = static_cast<char>(index & 0xff);
  return uuid;
}

// As nvidia-smi prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string UuidString(const CUuuid& uuid) {
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    char hex[3];
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
  }
  return text;
}

// The physical device one CUDA_VISIBLE_DEVICES entry names, or -1 when it
// names none: an index below `physical_count` (digits only), or "GPU-" and
// then the start of exactly one device's UUID (hex case-insensitive).
int IdentifyDevice(const std::string& entry, int physical_count) {
  uint64_t index = 0;
  if (ParseUnsigned(entry.c_str(), &index)) {
    return index < static_cast<uint64_t>(physical_count) ? static_cast<int>(index) : -1;
  }
  constexpr char kUuidPrefix[] = "GPU-";
  constexpr size_t kUuidPrefixLength = sizeof(kUuidPrefix) - 1;
  if (entry.size() <= kUuidPrefixLength || entry.compare(0, kUuidPrefixLength, kUuidPrefix) != 0) {
    return -1;
  }
  int found = -1;
  for (int physical = 0; physical < physical_count; ++physical) {
    const std::string uuid = UuidString(PhysicalUuid(physical));
    if (entry.size() > uuid.size()) continue;
    bool same = true;
    for (size_t i = kUuidPrefixLength; i < entry.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(entry[i])) == uuid[i];
    }
    if (!same) continue;
    if (found >= 0) return -1;  // Ambiguous: the start of several UUIDs.
    found = physical;
  }
  return found;
}

// The physical devices a process sees, in the order it numbers them: all of
// them when CUDA_VISIBLE_DEVICES is unset; else the devices its comma-separated
// entries name, up to the first entry that names none or names one again
// (so "" shows none, and "0,7,1" with 2 devices shows device 0 only).
std::vector<int> VisibleDevices(const char* list, int physical_count) {
  std::vector<int> visible;
  if (list == nullptr) {
    for (int physical = 0; physical < physical_count; ++physical) visible.push_back(physical);
    return visible;
  }
  const std::string text = list;
  for (size_t start = 0;;) {
    const size_t comma = text.find(',', start);
    const std::string entry =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const int physical = IdentifyDevice(entry, physical_count);
    if (physical < 0 || std::find(visible.begin(), visible.end(), physical) != visible.end()) {
      break;
    }
    visible.push_back(physical);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return visible;
}

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' ? value : nullptr;
}

void Complain(const char* name, const char* value, const char* expected) {
  std::fprintf(stderr, "memd fake CUDA driver: cuInit: %s=\"%s\" is not %s\n", name,
               value, expected);
}

// Where /proc/self/fd/<fd> points ("/memfd:NAME (deleted)" for a memfd).
std::string FdTarget(int fd) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  char target[PATH_MAX];
  const ssize_t length = readlink(path, target, sizeof(target) - 1);
  if (length < 0) return "";
  return std::string(target, static_cast<size_t>(length));
}

// A sealed memfd of `size` bytes with its pages allocated now (fallocate), so
// that running out of memory is an error here and not a SIGBUS later.
CUresult CreateMemfd(const std::string& name, size_t size, int* fd_out) {
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  if (fallocate(fd, 0, 0, static_cast<off_t>(size)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *fd_out = fd;
  return CUDA_SUCCESS;
}

// True when every page of [start, start + size) is mapped in this process.
bool IsMapped(uintptr_t start, size_t size) {
  const size_t page = PageSize();
  uintptr_t end = 0;
  size_t rounded_end = 0;
  if (!EndOf(start, size, &end) || !RoundUp(end, page, &rounded_end)) return false;
  unsigned char residency[4096];
  for (uintptr_t at = start & ~(page - 1); at < rounded_end;) {
    const size_t length = std::min<size_t>(rounded_end - at, sizeof(residency) * page);
    if (mincore(AsPointer(at), length, residency) != 0) return false;
    at += length;
  }
  return true;
}

// The entry in an address-keyed map whose range contains `address`.
template <typename Map>
typename Map::iterator Containing(Map& map, uintptr_t address) {
  auto it = map.upper_bound(address);
  if (it == map.begin()) return map.end();
  --it;
  return address - it->first < it->second.size ? it : map.end();
}

// True when [start, end) overlaps an entry of an address-keyed map.
template <typename Map>
bool Overlaps(const Map& map, uintptr_t start, uintptr_t end) {
  auto it = map.lower_bound(end);  // First entry starting at or after `end`.
  if (it == map.begin()) return false;
  --it;
  return it->first + it->second.size > start;
}

class FakeDriver {
 public:
  FakeDriver() = default;
  FakeDriver(const FakeDriver&) = delete;
  FakeDriver& operator=(const FakeDriver&) = delete;

  // The library is being unloaded (dlclose, or exit): stop the engines, drop
  // the work they still had (a hung copy included), give everything back.
  ~FakeDriver() {
    StopThreads();
    busy_.clear();
    streams_.clear();
    events_.clear();
    for (auto& [base, host] : host_) {
      if (host.allocated) munmap(AsPointer(base), host.mapped);
    }
    for (auto& [base, allocation] : legacy_) {
      munmap(AsPointer(base), allocation.size);
      close(allocation.fd);
    }
    for (auto& [base, mapping] : ipc_) munmap(AsPointer(base), mapping.size);
    for (auto& [base, reservation] : reservations_) munmap(AsPointer(base), reservation);
    for (auto& [handle, allocation] : allocations_) close(allocation.fd);
  }

  // ---- Initialisation and devices ----

  CUresult Init(unsigned int flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (!init_attempted_) {
      init_attempted_ = true;
      init_result_ = Configure();  // Sticky, as in CUDA: a failed cuInit stays failed.
    }
    return init_result_;
  }

  CUresult DeviceGet(CUdevice* device, int ordinal) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!ValidDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
  }

  CUresult DeviceGetCount(int* count) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *count = static_cast<int>(devices_.size());
    return CUDA_SUCCESS;
  }

  CUresult DeviceGetName(char* name, int length, CUdevice device) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (name == nullptr || length <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
    std::snprintf(name, static_cast<size_t>(length), "memd fake GPU %d",
                  devices_[static_cast<size_t>(device)]->physical);
    return CUDA_SUCCESS;
  }

  CUresult DeviceGetUuid(CUuuid* uuid, CUdevice device) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
    // The physical device's: the same GPU has the same UUID in every process.
    *uuid = PhysicalUuid(devices_[static_cast<size_t>(device)]->physical);
    return CUDA_SUCCESS;
  }

  CUresult DeviceTotalMem(size_t* bytes, CUdevice device) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = memory_;
    return CUDA_SUCCESS;
  }

  CUresult DeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
    switch (attribute) {
      case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
        *value = vmm_ ? 1 : 0;
        return CUDA_SUCCESS;
      case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:  // Where the device sits: physical.
        *value = devices_[static_cast<size_t>(device)]->physical;
        return CUDA_SUCCESS;
      case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
      case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_HANDLE_SUPPORTED:
      case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED:
      case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
        *value = 0;
        return CUDA_SUCCESS;
      case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
      case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
      case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
      case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
        *value = 1;
        return CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;  // Not modelled by the fake.
    }
  }

  // ---- Contexts ----

  CUresult PrimaryCtxRetain(CUcontext* context, CUdevice device) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
    CUctx_st& primary = devices_[static_cast<size_t>(device)]->context;
    ++primary.retains;
    *context = &primary;
    return CUDA_SUCCESS;
  }

  CUresult PrimaryCtxRelease(CUdevice device) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
    CUctx_st& primary = devices_[static_cast<size_t>(device)]->context;
    if (primary.retains == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--primary.retains == 0) ResetContext(&primary);
    return CUDA_SUCCESS;
  }

  // Flags are always 0 (CU_CTX_SCHED_AUTO: the fake has no
  // cuDevicePrimaryCtxSetFlags); active while retained.
  CUresult PrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
    *flags = 0;
    *active = devices_[static_cast<size_t>(device)]->context.retains > 0 ? 1 : 0;
    return CUDA_SUCCESS;
  }

  CUresult CtxSetCurrent(CUcontext context) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (context != nullptr && !KnownContext(context)) return CUDA_ERROR_INVALID_CONTEXT;
    t_current = context;
    return CUDA_SUCCESS;
  }

  CUresult CtxGetCurrent(CUcontext* context) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (context == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *context = t_current;
    return CUDA_SUCCESS;
  }

  CUresult CtxGetDevice(CUdevice* device) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *device = context->device;
    return CUDA_SUCCESS;
  }

  CUresult MemGetInfo(size_t* free_bytes, size_t* total_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    SweepReleased();
    const Device& device = *devices_[static_cast<size_t>(context->device)];
    *free_bytes = memory_ - device.used;
    *total_bytes = memory_;
    return CUDA_SUCCESS;
  }

  // ---- Virtual memory management (no context needed) ----

  CUresult MemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
        option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        !ValidDevice(prop->location.id)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *granularity = kGranularity;
    return CUDA_SUCCESS;
  }

  CUresult MemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (handle == nullptr || prop == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (!vmm_) return CUDA_ERROR_NOT_SUPPORTED;
    if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    if (prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
        prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA) {
      return CUDA_ERROR_NOT_SUPPORTED;  // Valid in CUDA, not modelled here.
    }
    if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!ValidDevice(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
    if (prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_NONE &&
        prop->requestedHandleTypes != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (prop->win32HandleMetaData != nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
    Device& device = *devices_[static_cast<size_t>(prop->location.id)];
    SweepReleased();
    if (size > memory_ - device.used) return CUDA_ERROR_OUT_OF_MEMORY;
    VmmAllocation allocation;
    const std::string name = kVmmMemfdPrefix + std::to_string(device.physical);
    if (CUresult result = CreateMemfd(name, size, &allocation.fd); result != CUDA_SUCCESS) {
      return result;
    }
    allocation.size = size;
    allocation.device = prop->location.id;
    allocation.charged = true;
    allocation.exportable =
        prop->requestedHandleTypes == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    device.used += size;
    *handle = next_handle_++;
    allocations_.emplace(*handle, allocation);
    return CUDA_SUCCESS;
  }

  CUresult MemRelease(CUmemGenericAllocationHandle handle) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = allocations_.find(handle);
    if (it == allocations_.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
    it->second.released = true;
    MaybeDestroy(it);
    return CUDA_SUCCESS;
  }

  CUresult MemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                             CUdeviceptr addr, unsigned long long flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    const size_t page = PageSize();
    if (ptr == nullptr || flags != 0 || size == 0 || size % page != 0 ||
        addr % page != 0 || (alignment & (alignment - 1)) != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const size_t align = std::max(alignment, kGranularity);
    constexpr int kProt = PROT_NONE;
    constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    uintptr_t base = 0;
    if (addr != 0 && addr % align == 0) {  // Honour the hint when it is free.
      void* at = mmap(AsPointer(addr), size, kProt, kFlags | MAP_FIXED_NOREPLACE, -1, 0);
      if (at != MAP_FAILED && reinterpret_cast<uintptr_t>(at) == addr) {
        base = addr;
      } else if (at != MAP_FAILED) {
        munmap(at, size);  // A kernel without MAP_FIXED_NOREPLACE put it elsewhere.
      }
    }
    if (base == 0) {
      if (size > SIZE_MAX - align) return CUDA_ERROR_OUT_OF_MEMORY;
      void* raw = mmap(nullptr, size + align, kProt, kFlags, -1, 0);
      if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
      const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
      base = (start + align - 1) & ~(align - 1);
      if (base > start) munmap(raw, base - start);
      const size_t tail = start + size + align - (base + size);
      if (tail > 0) munmap(AsPointer(base + size), tail);
    }
    reservations_.emplace(base, size);
    *ptr = static_cast<CUdeviceptr>(base);
    return CUDA_SUCCESS;
  }

  CUresult MemAddressFree(CUdeviceptr ptr, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = reservations_.find(static_cast<uintptr_t>(ptr));
    if (it == reservations_.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
    // Stricter than CUDA documents: unmap first, so leaks show up in tests.
    if (Overlaps(mappings_, it->first, it->first + size)) return CUDA_ERROR_INVALID_VALUE;
    munmap(AsPointer(it->first), size);
    reservations_.erase(it);
    return CUDA_SUCCESS;
  }

  CUresult MemMap(CUdeviceptr ptr, size_t size, size_t offset,
                  CUmemGenericAllocationHandle handle, unsigned long long flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    const uintptr_t start = static_cast<uintptr_t>(ptr);
    uintptr_t end = 0;
    if (flags != 0 || offset != 0 || size == 0 || start % kGranularity != 0 ||
        size % kGranularity != 0 || !EndOf(start, size, &end)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto allocation = allocations_.find(handle);
    if (allocation == allocations_.end() || allocation->second.released) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (size > allocation->second.size) {
      // Mapping more than an imported allocation holds: the real driver
      // (H200, 580) answered CUDA_ERROR_NOT_SUPPORTED. Not measured for an
      // allocation made in the same process.
      return allocation->second.charged ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
    }
    auto reservation = ReservationContaining(start);
    if (reservation == reservations_.end() || end > reservation->first + reservation->second) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (Overlaps(mappings_, start, end)) return CUDA_ERROR_INVALID_VALUE;
    // Mapped without access: cuMemSetAccess grants it.
    void* at = mmap(AsPointer(start), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                    allocation->second.fd, 0);
    if (at == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    ++allocation->second.mappings;
    mappings_.emplace(start, VmmMapping{size, handle, false, false});
    return CUDA_SUCCESS;
  }

  CUresult MemUnmap(CUdeviceptr ptr, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    std::vector<uintptr_t> bases;
    if (!WholeMappings(static_cast<uintptr_t>(ptr), size, &bases)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    for (uintptr_t base : bases) {
      auto mapping = mappings_.find(base);
      // Back to a reservation: inaccessible anonymous address space.
      mmap(AsPointer(base), mapping->second.size, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
      auto allocation = allocations_.find(mapping->second.handle);
      --allocation->second.mappings;
      mappings_.erase(mapping);
      MaybeDestroy(allocation);
    }
    return CUDA_SUCCESS;
  }

  CUresult MemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                        size_t count) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (desc == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
    bool readable = false;
    bool writable = false;
    for (size_t i = 0; i < count; ++i) {
      if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
      if (!ValidDevice(desc[i].location.id)) return CUDA_ERROR_INVALID_DEVICE;
      switch (desc[i].flags) {
        case CU_MEM_ACCESS_FLAGS_PROT_NONE:
          break;
        case CU_MEM_ACCESS_FLAGS_PROT_READ:
          readable = true;
          break;
        case CU_MEM_ACCESS_FLAGS_PROT_READWRITE:
          readable = writable = true;
          break;
        default:
          return CUDA_ERROR_INVALID_VALUE;
      }
    }
    std::vector<uintptr_t> bases;
    if (!WholeMappings(static_cast<uintptr_t>(ptr), size, &bases)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    // The fake's devices all see host memory: the most any device was granted
    // is what the process gets.
    const int prot = writable ? PROT_READ | PROT_WRITE : readable ? PROT_READ : PROT_NONE;
    if (mprotect(AsPointer(static_cast<uintptr_t>(ptr)), size, prot) != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    for (uintptr_t base : bases) {
      mappings_[base].readable = readable;
      mappings_[base].writable = writable;
    }
    return CUDA_SUCCESS;
  }

  CUresult MemExportToShareableHandle(void* shareable, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type,
                                      unsigned long long flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    auto it = allocations_.find(handle);
    if (it == allocations_.end() || it->second.released) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    if (!it->second.exportable) return CUDA_ERROR_INVALID_VALUE;
    const int fd = fcntl(it->second.fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;  // Out of descriptors.
    *static_cast<int*>(shareable) = fd;           // The caller owns it.
    return CUDA_SUCCESS;
  }

  CUresult MemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* os_handle,
                                        CUmemAllocationHandleType type) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    if (!vmm_) return CUDA_ERROR_NOT_SUPPORTED;
    const intptr_t value = static_cast<intptr_t>(reinterpret_cast<uintptr_t>(os_handle));
    if (value < 0 || value > INT32_MAX) return CUDA_ERROR_INVALID_VALUE;
    const int fd = static_cast<int>(value);
    if (fcntl(fd, F_GETFD) < 0) return CUDA_ERROR_INVALID_VALUE;
    // Only memory a fake cuMemCreate made:
    // "/memfd:memd-fake-cuda-vmm:<physical device> (deleted)".
    const std::string target = FdTarget(fd);
    const std::string prefix = std::string("/memfd:") + kVmmMemfdPrefix;
    // An open descriptor of something else: the real driver (H200, 580)
    // answered a memfd with CUDA_ERROR_UNKNOWN.
    if (target.compare(0, prefix.size(), prefix) != 0) return CUDA_ERROR_UNKNOWN;
    const int physical = std::atoi(target.c_str() + prefix.size());
    // A device this machine (MEMD_FAKE_CUDA_DEVICES) does not have.
    if (physical < 0 || physical >= physical_count_) return CUDA_ERROR_NOT_SUPPORTED;
    // One it has but CUDA_VISIBLE_DEVICES hides from this process.
    const int device = LocalOrdinal(physical);
    if (device < 0) return CUDA_ERROR_INVALID_DEVICE;
    struct stat info;
    if (fstat(fd, &info) != 0 || info.st_size <= 0 ||
        static_cast<uint64_t>(info.st_size) % kGranularity != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    VmmAllocation allocation;
    // The caller keeps its fd. An open file description of the import's
    // own, read-locked while the import lives: the exporter's driver sees
    // the lock and counts the memory used after its own cuMemRelease, as
    // the real driver does while any process holds an import (HeldByImports).
    allocation.fd = OpenPrivately(fd);
    if (allocation.fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    struct flock hold{};
    hold.l_type = F_RDLCK;
    hold.l_whence = SEEK_SET;
    (void)fcntl(allocation.fd, F_OFD_SETLK, &hold);
    allocation.size = static_cast<size_t>(info.st_size);
    allocation.device = device;
    allocation.charged = false;  // The exporter's device holds the memory.
    // The real driver will not export an imported allocation again
    // (CUDA_ERROR_INVALID_VALUE, seen on an H200 with driver 580): whoever
    // must hand it on keeps the descriptor it imported.
    allocation.exportable = false;
    *handle = next_handle_++;
    allocations_.emplace(*handle, allocation);
    return CUDA_SUCCESS;
  }

  // ---- Legacy allocations and IPC (need a current context) ----

  CUresult MemAlloc(CUdeviceptr* dptr, size_t bytesize) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t size = 0;
    if (!RoundUp(bytesize, PageSize(), &size)) return CUDA_ERROR_OUT_OF_MEMORY;
    Device& device = *devices_[static_cast<size_t>(context->device)];
    if (size > memory_ - device.used) return CUDA_ERROR_OUT_OF_MEMORY;
    LegacyAllocation allocation;
    allocation.id = (static_cast<uint64_t>(getpid()) << 32) | ++legacy_count_;
    char name[64];
    std::snprintf(name, sizeof(name), "%s%llx", kAllocMemfdPrefix,
                  static_cast<unsigned long long>(allocation.id));
    if (CUresult result = CreateMemfd(name, size, &allocation.fd); result != CUDA_SUCCESS) {
      return result;
    }
    void* at = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, allocation.fd, 0);
    if (at == MAP_FAILED) {
      close(allocation.fd);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    allocation.size = size;
    allocation.device = context->device;
    allocation.context = context;
    device.used += size;
    legacy_.emplace(reinterpret_cast<uintptr_t>(at), allocation);
    *dptr = reinterpret_cast<CUdeviceptr>(at);
    return CUDA_SUCCESS;
  }

  CUresult MemFree(CUdeviceptr dptr) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    auto it = legacy_.find(static_cast<uintptr_t>(dptr));
    if (it == legacy_.end()) return CUDA_ERROR_INVALID_VALUE;
    FreeLegacy(it);
    return CUDA_SUCCESS;
  }

  CUresult IpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
    // Only the base of a cuMemAlloc allocation (not VMM or IPC-opened memory).
    auto it = legacy_.find(static_cast<uintptr_t>(dptr));
    if (it == legacy_.end()) return CUDA_ERROR_INVALID_VALUE;
    IpcWire wire{};
    std::memcpy(wire.magic, kIpcMagic, sizeof(wire.magic));
    wire.version = kIpcVersion;
    wire.pid = static_cast<int32_t>(getpid());
    wire.fd = it->second.fd;
    wire.device = devices_[static_cast<size_t>(it->second.device)]->physical;
    wire.id = it->second.id;
    wire.size = it->second.size;
    std::memset(handle->reserved, 0, sizeof(handle->reserved));
    std::memcpy(handle->reserved, &wire, sizeof(wire));
    return CUDA_SUCCESS;
  }

  CUresult IpcOpenMemHandle(CUdeviceptr* dptr, const CUipcMemHandle& handle,
                            unsigned int flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    // cuda.h: Flags "must be specified as CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS".
    if (dptr == nullptr || flags != CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    IpcWire wire;
    std::memcpy(&wire, handle.reserved, sizeof(wire));
    if (std::memcmp(wire.magic, kIpcMagic, sizeof(wire.magic)) != 0 ||
        wire.version != kIpcVersion || wire.pid <= 0 || wire.fd < 0 || wire.size == 0 ||
        wire.size % PageSize() != 0) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    // CUDA refuses a handle in the process that exported it.
    if (wire.pid == static_cast<int32_t>(getpid())) return CUDA_ERROR_INVALID_CONTEXT;
    // Opened already: CUDA counts the opens and returns the same pointer.
    for (auto& [base, mapping] : ipc_) {
      if (mapping.pid == wire.pid && mapping.id == wire.id) {
        ++mapping.opens;
        *dptr = static_cast<CUdeviceptr>(base);
        return CUDA_SUCCESS;
      }
    }
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", wire.pid, wire.fd);
    const int fd = open(path, O_RDWR | O_CLOEXEC);
    // The exporter is gone, freed the memory, or is another user's process.
    if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
    char name[64];
    std::snprintf(name, sizeof(name), "/memfd:%s%llx (deleted)", kAllocMemfdPrefix,
                  static_cast<unsigned long long>(wire.id));
    struct stat info;
    if (FdTarget(fd) != name || fstat(fd, &info) != 0 ||
        static_cast<uint64_t>(info.st_size) != wire.size) {
      close(fd);  // The descriptor now holds something else: freed memory.
      return CUDA_ERROR_INVALID_HANDLE;
    }
    const size_t size = static_cast<size_t>(wire.size);
    void* at = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (at == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
    ipc_.emplace(reinterpret_cast<uintptr_t>(at),
                 IpcMapping{size, static_cast<pid_t>(wire.pid), wire.id, 1, context});
    *dptr = reinterpret_cast<CUdeviceptr>(at);
    return CUDA_SUCCESS;
  }

  CUresult IpcCloseMemHandle(CUdeviceptr dptr) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    auto it = ipc_.find(static_cast<uintptr_t>(dptr));
    if (it == ipc_.end()) return CUDA_ERROR_INVALID_VALUE;
    if (--it->second.opens == 0) {
      munmap(AsPointer(it->first), it->second.size);
      ipc_.erase(it);
    }
    return CUDA_SUCCESS;
  }

  // ---- Host registration (needs a current context) ----

  CUresult MemHostRegister(void* p, size_t bytesize, unsigned int flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (p == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    constexpr unsigned int kModelled = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;
    constexpr unsigned int kKnown =
        kModelled | CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
    if ((flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & ~kModelled) != 0) return CUDA_ERROR_NOT_SUPPORTED;
    const uintptr_t start = reinterpret_cast<uintptr_t>(p);
    uintptr_t end = 0;
    if (!EndOf(start, bytesize, &end)) return CUDA_ERROR_INVALID_VALUE;
    if (Overlaps(host_, start, end)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    if (!IsMapped(start, bytesize)) return CUDA_ERROR_INVALID_VALUE;
    host_.emplace(start, HostRegistration{bytesize, context});
    return CUDA_SUCCESS;
  }

  CUresult MemHostUnregister(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto it = host_.find(reinterpret_cast<uintptr_t>(p));  // The base, as registered.
    // cuMemHostAlloc memory was never registered: cuMemFreeHost frees it.
    if (it == host_.end() || it->second.allocated) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    host_.erase(it);
    return CUDA_SUCCESS;
  }

  CUresult MemHostGetDevicePointer(CUdeviceptr* dptr, void* p, unsigned int flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (dptr == nullptr || p == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (Containing(host_, reinterpret_cast<uintptr_t>(p)) == host_.end()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *dptr = reinterpret_cast<CUdeviceptr>(p);  // Unified addressing: the same address.
    return CUDA_SUCCESS;
  }

  // ---- Copies (need a current context) ----

  CUresult MemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (bytes == 0) return CUDA_SUCCESS;
    if (src == nullptr || !DeviceAccessible(dst, bytes, /*write=*/true)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    std::memmove(AsPointer(static_cast<uintptr_t>(dst)), src, bytes);
    return CUDA_SUCCESS;
  }

  CUresult MemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (bytes == 0) return CUDA_SUCCESS;
    if (dst == nullptr || !DeviceAccessible(src, bytes, /*write=*/false)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    std::memmove(dst, AsPointer(static_cast<uintptr_t>(src)), bytes);
    return CUDA_SUCCESS;
  }

  CUresult MemsetD8(CUdeviceptr dst, unsigned char value, size_t count) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (count == 0) return CUDA_SUCCESS;
    if (!DeviceAccessible(dst, count, /*write=*/true)) return CUDA_ERROR_INVALID_VALUE;
    std::memset(AsPointer(static_cast<uintptr_t>(dst)), value, count);
    return CUDA_SUCCESS;
  }

  // ---- Fault injection by call count (MEMD_FAKE_CUDA_FAULTS "symbol@N=CODE") ----

  // The error the current call of `symbol` must return, or CUDA_SUCCESS.
  // Counts every call from the first successful cuInit on.
  CUresult Injected(const char* symbol) {
    if (!call_faults_armed_.load(std::memory_order_acquire)) return CUDA_SUCCESS;
    std::lock_guard<std::mutex> lock(fault_mu_);
    auto it = call_faults_.find(symbol);
    if (it == call_faults_.end()) return CUDA_SUCCESS;
    const uint64_t call = ++it->second.calls;
    for (const CallFault& fault : it->second.faults) {
      if (fault.call == call) return fault.code;
    }
    return CUDA_SUCCESS;
  }

  // ---- Pinned host memory ----

  CUresult MemHostAlloc(void** pointer, size_t bytes, unsigned int flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    constexpr unsigned int kKnown =
        CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
    if (pointer == nullptr || bytes == 0 || (flags & ~kKnown) != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    size_t mapped = 0;
    if (!RoundUp(bytes, PageSize(), &mapped)) return CUDA_ERROR_OUT_OF_MEMORY;
    // Not locked (CI's RLIMIT_MEMLOCK is small): "pinned" is what the fake
    // records, and what makes copies from it asynchronous.
    void* at = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (at == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    host_.emplace(reinterpret_cast<uintptr_t>(at), HostRegistration{bytes, context, true, mapped});
    *pointer = at;
    return CUDA_SUCCESS;
  }

  CUresult MemFreeHost(void* pointer) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    auto it = host_.find(reinterpret_cast<uintptr_t>(pointer));
    if (it == host_.end() || !it->second.allocated) return CUDA_ERROR_INVALID_VALUE;
    munmap(pointer, it->second.mapped);
    host_.erase(it);
    return CUDA_SUCCESS;
  }

  // ---- Streams ----

  CUresult CtxGetStreamPriorityRange(int* least, int* greatest) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (least != nullptr) *least = kLeastPriority;  // cuda.h: either may be NULL.
    if (greatest != nullptr) *greatest = kGreatestPriority;
    return CUDA_SUCCESS;
  }

  CUresult StreamCreateWithPriority(CUstream* stream, unsigned int flags, int priority) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    if (stream == nullptr || (flags & ~static_cast<unsigned int>(CU_STREAM_NON_BLOCKING)) != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    auto created = std::make_shared<CUstream_st>();
    created->device = context->device;
    // Out of range is clamped silently, as in CUDA.
    created->priority = std::clamp(priority, kGreatestPriority, kLeastPriority);
    created->non_blocking = (flags & CU_STREAM_NON_BLOCKING) != 0;
    StartDevice(context->device);
    streams_.emplace(created.get(), created);
    *stream = created.get();
    return CUDA_SUCCESS;
  }

  // Returns at once, as in CUDA: work already enqueued still runs.
  CUresult StreamDestroy(CUstream handle) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = streams_.find(handle);
    if (it == streams_.end()) return CUDA_ERROR_INVALID_HANDLE;
    const CUresult sticky = Sticky(it->second->device);
    streams_.erase(it);
    return sticky;
  }

  CUresult StreamSynchronize(CUstream handle) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    std::shared_ptr<CUstream_st> stream;
    if (CUresult result = ResolveStream(handle, &stream); result != CUDA_SUCCESS) return result;
    const uint64_t target = stream->enqueued;
    progress_.wait(lock, [&] {
      return stream->completed >= target || Sticky(stream->device) != CUDA_SUCCESS;
    });
    if (CUresult sticky = Sticky(stream->device); sticky != CUDA_SUCCESS) return sticky;
    return Surface(stream->error);
  }

  CUresult StreamWaitEvent(CUstream handle, CUevent event_handle, unsigned int flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    std::shared_ptr<CUstream_st> stream;
    if (CUresult result = ResolveStream(handle, &stream); result != CUDA_SUCCESS) return result;
    auto event = events_.find(event_handle);
    if (event == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;  // CU_EVENT_WAIT_EXTERNAL: not modelled.
    if (event->second->recorded == 0) return CUDA_SUCCESS;  // Nothing to wait for.
    StreamOp op;
    op.kind = StreamOp::kWait;
    op.event = event->second;
    op.generation = event->second->recorded;
    Enqueue(stream, std::move(op));
    return CUDA_SUCCESS;
  }

  // ---- Events ----

  CUresult EventCreate(CUevent* event, unsigned int flags) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    constexpr unsigned int kKnown = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                    CU_EVENT_INTERPROCESS;
    if (event == nullptr || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CU_EVENT_INTERPROCESS) != 0) {
      // cuda.h: INTERPROCESS needs DISABLE_TIMING; the fake models neither IPC event.
      return (flags & CU_EVENT_DISABLE_TIMING) == 0 ? CUDA_ERROR_INVALID_VALUE
                                                    : CUDA_ERROR_NOT_SUPPORTED;
    }
    auto created = std::make_shared<CUevent_st>();
    created->device = context->device;
    events_.emplace(created.get(), created);
    *event = created.get();
    return CUDA_SUCCESS;
  }

  // Returns at once, as in CUDA: a pending record still completes.
  CUresult EventDestroy(CUevent handle) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = events_.find(handle);
    if (it == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
    const CUresult sticky = Sticky(it->second->device);
    events_.erase(it);
    return sticky;
  }

  CUresult EventRecord(CUevent handle, CUstream stream_handle) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    auto event = events_.find(handle);
    if (event == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
    std::shared_ptr<CUstream_st> stream;
    if (CUresult result = ResolveStream(stream_handle, &stream); result != CUDA_SUCCESS) {
      return result;
    }
    // cuda.h: "hEvent and hStream must be from the same context".
    if (event->second->device != stream->device) return CUDA_ERROR_INVALID_HANDLE;
    const uint64_t generation = ++event->second->recorded;  // Overwrites the last record.
    event->second->pending.insert(generation);
    StreamOp op;
    op.kind = StreamOp::kRecord;
    op.event = event->second;
    op.generation = generation;
    Enqueue(stream, std::move(op));
    return CUDA_SUCCESS;
  }

  CUresult EventQuery(CUevent handle) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    auto event = events_.find(handle);
    if (event == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
    return RecordState(*event->second, event->second->recorded);
  }

  CUresult EventSynchronize(CUevent handle) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    auto found = events_.find(handle);
    if (found == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
    const std::shared_ptr<CUevent_st> event = found->second;
    const uint64_t target = event->recorded;
    progress_.wait(lock, [&] {
      return event->pending.count(target) == 0 || Sticky(event->device) != CUDA_SUCCESS;
    });
    return RecordState(*event, target);
  }

  // ---- Asynchronous copies and host functions ----

  CUresult MemcpyAsync(Direction direction, uintptr_t dst, uintptr_t src, size_t bytes,
                       CUstream handle) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    CUctx_st* context = nullptr;
    if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
    std::shared_ptr<CUstream_st> stream;
    if (CUresult result = ResolveStream(handle, &stream); result != CUDA_SUCCESS) return result;
    if (bytes == 0) return CUDA_SUCCESS;
    const bool valid =
        direction == kHostToDevice   ? src != 0 && DeviceAccessible(dst, bytes, /*write=*/true)
        : direction == kDeviceToHost ? dst != 0 && DeviceAccessible(src, bytes, /*write=*/false)
                                     : DeviceAccessible(dst, bytes, /*write=*/true) &&
                                           DeviceAccessible(src, bytes, /*write=*/false);
    if (!valid) return CUDA_ERROR_INVALID_VALUE;
    const bool pageable = (direction == kHostToDevice && !Pinned(src, bytes)) ||
                          (direction == kDeviceToHost && !Pinned(dst, bytes));
    StreamOp op;
    op.kind = StreamOp::kCopy;
    op.direction = direction;
    op.dst = dst;
    op.src = src;
    op.bytes = bytes;
    const uint64_t number = ++copies_;
    for (const CopyFault& fault : copy_faults_) {
      if (fault.copy == number) op.fault = fault;
    }
    const uint64_t id = Enqueue(stream, std::move(op));
    if (!pageable) return CUDA_SUCCESS;
    // The driver API's "synchronization behavior": between pageable memory
    // and the device, an async copy returns once the bytes are through (the
    // driver stages them piece by piece behind the DMA).
    progress_.wait(lock, [&] {
      return stream->completed >= id || Sticky(stream->device) != CUDA_SUCCESS;
    });
    return Sticky(stream->device);
  }

  CUresult LaunchHostFunc(CUstream handle, CUhostFn fn, void* data) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
    std::shared_ptr<CUstream_st> stream;
    if (CUresult result = ResolveStream(handle, &stream); result != CUDA_SUCCESS) return result;
    if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
    StreamOp op;
    op.kind = StreamOp::kHostFunc;
    op.fn = fn;
    op.data = data;
    Enqueue(stream, std::move(op));
    return CUDA_SUCCESS;
  }

 private:
  bool initialised() const { return init_attempted_ && init_result_ == CUDA_SUCCESS; }

  // ---- The asynchronous side: streams, engines, host calls ----

  CUresult Sticky(int device) const { return devices_[static_cast<size_t>(device)]->sticky; }

  // An error not surfaced yet is returned (once); else CUDA_SUCCESS.
  static CUresult Surface(const std::shared_ptr<AsyncError>& error) {
    if (error == nullptr || error->surfaced) return CUDA_SUCCESS;
    error->surfaced = true;
    return error->code;
  }

  // What a query of `event`'s record `generation` reports.
  CUresult RecordState(CUevent_st& event, uint64_t generation) {
    if (CUresult sticky = Sticky(event.device); sticky != CUDA_SUCCESS) return sticky;
    if (event.pending.count(generation) != 0) return CUDA_ERROR_NOT_READY;
    if (event.error != nullptr && event.error_generation == generation) {
      return Surface(event.error);
    }
    return CUDA_SUCCESS;  // Reached, or never recorded.
  }

  // True when [start, start + bytes) lies in one registered or
  // cuMemHostAlloc'ed range: copies to and from it are asynchronous.
  bool Pinned(uintptr_t start, size_t bytes) {
    auto it = Containing(host_, start);
    uintptr_t end = 0;
    return it != host_.end() && EndOf(start, bytes, &end) && end <= it->first + it->second.size;
  }

  // The stream a handle names: NULL and CU_STREAM_LEGACY are the current
  // context's NULL stream. Errors: INVALID_HANDLE, the context's, sticky.
  CUresult ResolveStream(CUstream handle, std::shared_ptr<CUstream_st>* stream) {
    if (handle == nullptr || handle == CU_STREAM_LEGACY) {
      CUctx_st* context = nullptr;
      if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
      Device& device = *devices_[static_cast<size_t>(context->device)];
      if (device.null_stream == nullptr) {
        device.null_stream = std::make_shared<CUstream_st>();
        device.null_stream->device = context->device;
        device.null_stream->legacy = true;
        StartDevice(context->device);
      }
      *stream = device.null_stream;
    } else {
      auto it = streams_.find(handle);  // CU_STREAM_PER_THREAD is not modelled.
      if (it == streams_.end()) return CUDA_ERROR_INVALID_HANDLE;
      *stream = it->second;
    }
    return Sticky((*stream)->device);
  }

  // Starts the device's copy engines (one per direction) and host-call thread.
  void StartDevice(int ordinal) {
    Device& device = *devices_[static_cast<size_t>(ordinal)];
    if (device.started) return;
    device.started = true;
    threads_owner_ = getpid();
    for (int direction = 0; direction < kDirections; ++direction) {
      device.engines[direction].thread = std::make_unique<std::thread>(
          [this, ordinal, direction] { RunCopyEngine(ordinal, static_cast<Direction>(direction)); });
    }
    device.host_thread = std::make_unique<std::thread>([this, ordinal] { RunHostCalls(ordinal); });
  }

  void StopThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (auto& device : devices_) {
        for (CopyEngine& engine : device->engines) engine.cv.notify_all();
        device->host_cv.notify_all();
      }
      progress_.notify_all();
    }
    for (auto& device : devices_) {
      for (CopyEngine& engine : device->engines) {
        JoinOrAbandon(engine.thread);
        engine.queue.clear();
      }
      JoinOrAbandon(device->host_thread);
      device->host_calls.clear();
      device->null_stream.reset();
    }
  }

  // A forked child inherited the thread objects but not the threads.
  void JoinOrAbandon(std::unique_ptr<std::thread>& thread) {
    if (thread == nullptr) return;
    if (getpid() == threads_owner_) {
      thread->join();
      thread.reset();
    } else {
      (void)thread.release();
    }
  }

  // Queues `op`, after making a blocking stream and the NULL stream wait for
  // each other as the legacy default stream does. Returns the op's id.
  uint64_t Enqueue(const std::shared_ptr<CUstream_st>& stream, StreamOp op) {
    if (!stream->non_blocking) {
      const auto pending = [](const CUstream_st& s) { return s.completed < s.enqueued; };
      if (stream->legacy) {
        for (auto& [handle, other] : streams_) {
          if (other->device == stream->device && !other->non_blocking && pending(*other)) {
            ChainAfter(other, stream);
          }
        }
      } else {
        const auto& null_stream = devices_[static_cast<size_t>(stream->device)]->null_stream;
        if (null_stream != nullptr && pending(*null_stream)) ChainAfter(null_stream, stream);
      }
    }
    return Push(stream, std::move(op));
  }

  // `later` waits for what `earlier` has queued so far (a hidden event).
  void ChainAfter(const std::shared_ptr<CUstream_st>& earlier,
                  const std::shared_ptr<CUstream_st>& later) {
    auto event = std::make_shared<CUevent_st>();
    event->device = earlier->device;
    event->recorded = 1;
    event->pending.insert(1);
    StreamOp record;
    record.kind = StreamOp::kRecord;
    record.event = event;
    record.generation = 1;
    Push(earlier, std::move(record));
    StreamOp wait;
    wait.kind = StreamOp::kWait;
    wait.event = event;
    wait.generation = 1;
    Push(later, std::move(wait));
  }

  uint64_t Push(const std::shared_ptr<CUstream_st>& stream, StreamOp op) {
    busy_.emplace(stream.get(), stream);
    stream->ops.push_back(std::move(op));
    const uint64_t id = ++stream->enqueued;
    Advance(stream);
    return id;
  }

  void Pop(CUstream_st& stream) {
    stream.ops.pop_front();
    ++stream.completed;
    progress_.notify_all();
  }

  // Runs the stream's head as far as it can go now: records and satisfied
  // waits complete here; a copy goes to its engine, a host function to the
  // host-call thread, an unsatisfied wait onto its event. On a device whose
  // context broke, everything queued is dropped (records still release
  // their waiters, so nothing waits forever on a dropped record).
  void Advance(std::shared_ptr<CUstream_st> stream) {
    Device& device = *devices_[static_cast<size_t>(stream->device)];
    while (!stream->running && !stream->ops.empty()) {
      StreamOp& head = stream->ops.front();
      const bool broken = device.sticky != CUDA_SUCCESS;
      if (head.kind == StreamOp::kRecord) {
        StreamOp record = std::move(head);
        Pop(*stream);
        ReachRecord(*stream, record, !broken);
      } else if (broken) {
        Pop(*stream);
      } else if (head.kind == StreamOp::kWait) {
        if (head.event->pending.count(head.generation) == 0) {
          Pop(*stream);
          continue;
        }
        head.event->waiters.push_back(stream.get());
        stream->running = true;
      } else if (head.kind == StreamOp::kCopy) {
        if (poison_) std::memset(AsPointer(head.dst), kPoison, head.bytes);
        stream->running = true;
        CopyEngine& engine = device.engines[head.direction];
        engine.queue.push_back(stream);
        engine.cv.notify_all();
      } else {
        stream->running = true;
        device.host_calls.push_back(stream);
        device.host_cv.notify_all();
      }
    }
    if (stream->ops.empty()) busy_.erase(stream.get());
  }

  void ReachRecord(CUstream_st& stream, const StreamOp& record, bool carry_error) {
    CUevent_st& event = *record.event;
    event.pending.erase(record.generation);
    if (carry_error && stream.error != nullptr && !stream.error->surfaced) {
      event.error = stream.error;
      event.error_generation = record.generation;
    }
    std::vector<CUstream_st*> waiters;
    waiters.swap(event.waiters);
    for (CUstream_st* waiter : waiters) {
      auto it = busy_.find(waiter);
      if (it == busy_.end()) continue;
      waiter->running = false;
      Advance(it->second);
    }
  }

  // The head of `stream` is done (landed, failed or dropped).
  void Complete(const std::shared_ptr<CUstream_st>& stream) {
    stream->running = false;
    Pop(*stream);
    Advance(stream);
  }

  std::chrono::nanoseconds CopyTime(Direction direction, size_t bytes) const {
    std::chrono::nanoseconds time = std::chrono::microseconds(link_.latency_us);
    const double gbps = link_.gbps[direction];  // GB/s = bytes per nanosecond.
    if (gbps > 0) time += std::chrono::nanoseconds(static_cast<int64_t>(bytes / gbps));
    return time;
  }

  // One copy engine: takes copies in the order their streams reached them,
  // holds each for its modelled time (after the previous one on this
  // engine), then moves the bytes and completes it.
  void RunCopyEngine(int ordinal, Direction direction) {
    std::unique_lock<std::mutex> lock(mu_);
    Device& device = *devices_[static_cast<size_t>(ordinal)];
    CopyEngine& engine = device.engines[direction];
    for (;;) {
      engine.cv.wait(lock, [&] { return stopping_ || !engine.queue.empty(); });
      if (stopping_) return;
      std::shared_ptr<CUstream_st> stream = std::move(engine.queue.front());
      engine.queue.pop_front();
      const StreamOp copy = stream->ops.front();
      // A hung copy never completes: its stream stays stuck behind it (held
      // by busy_ until the library unloads); the engine goes on with others.
      if (copy.fault.kind == CopyFaultKind::kHang) continue;
      const bool moves = device.sticky == CUDA_SUCCESS && copy.fault.kind == CopyFaultKind::kNone;
      // Without poisoning the bytes move at the start of the modelled time,
      // which the copy then fills: it takes max(memmove, modelled time), as
      // a DMA engine moves bytes while the CPU does other work. With
      // poisoning they land at its end, so early readers see the poison.
      const bool early = moves && !poison_;
      const auto done =
          std::max(std::chrono::steady_clock::now(), engine.free_at) + CopyTime(direction, copy.bytes);
      if (early) MoveBytes(lock, copy);
      if (device.sticky == CUDA_SUCCESS) {
        engine.free_at = done;
        engine.cv.wait_until(lock, done, [&] { return stopping_; });
        if (stopping_) return;
      }
      if (moves && !early) {
        MoveBytes(lock, copy);
      } else if (copy.fault.kind == CopyFaultKind::kEvent) {
        stream->error = std::make_shared<AsyncError>(AsyncError{copy.fault.code, false});
      } else if (copy.fault.kind == CopyFaultKind::kSticky && device.sticky == CUDA_SUCCESS) {
        device.sticky = copy.fault.code;
        progress_.notify_all();
      }
      Complete(stream);
    }
  }

  void MoveBytes(std::unique_lock<std::mutex>& lock, const StreamOp& copy) {
    lock.unlock();
    std::memmove(AsPointer(copy.dst), AsPointer(copy.src), copy.bytes);
    lock.lock();
  }

  // Runs cuLaunchHostFunc functions of the device's streams, one at a time,
  // without the lock. As in CUDA, none runs once the context is broken.
  void RunHostCalls(int ordinal) {
    std::unique_lock<std::mutex> lock(mu_);
    Device& device = *devices_[static_cast<size_t>(ordinal)];
    for (;;) {
      device.host_cv.wait(lock, [&] { return stopping_ || !device.host_calls.empty(); });
      if (stopping_) return;
      std::shared_ptr<CUstream_st> stream = std::move(device.host_calls.front());
      device.host_calls.pop_front();
      const StreamOp call = stream->ops.front();
      if (device.sticky == CUDA_SUCCESS) {
        lock.unlock();
        call.fn(call.data);
        lock.lock();
      }
      Complete(stream);
    }
  }


  bool ValidDevice(int ordinal) const {
    return ordinal >= 0 && static_cast<size_t>(ordinal) < devices_.size();
  }

  // This process's ordinal for a physical device; -1 when it does not see it.
  int LocalOrdinal(int physical) const {
    for (size_t ordinal = 0; ordinal < devices_.size(); ++ordinal) {
      if (devices_[ordinal]->physical == physical) return static_cast<int>(ordinal);
    }
    return -1;
  }

  bool KnownContext(CUcontext context) const {
    for (const auto& device : devices_) {
      if (&device->context == context) return true;
    }
    return false;
  }

  // The calling thread's current context, which must be active.
  CUresult Current(CUctx_st** context) const {
    if (t_current == nullptr || !KnownContext(t_current)) return CUDA_ERROR_INVALID_CONTEXT;
    if (t_current->retains == 0) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (CUresult sticky = devices_[static_cast<size_t>(t_current->device)]->sticky;
        sticky != CUDA_SUCCESS) {
      return sticky;
    }
    *context = t_current;
    return CUDA_SUCCESS;
  }

  CUresult Configure() {
    if (const char* text = Env("MEMD_FAKE_CUDA_INIT_ERROR")) {
      uint64_t code = 0;
      if (!ParseUnsigned(text, &code) || code >= 1024 ||  // CUresult's range.
          ErrorName(static_cast<CUresult>(code)) == nullptr) {
        Complain("MEMD_FAKE_CUDA_INIT_ERROR", text, "a CUresult that cuda.h defines");
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (code != CUDA_SUCCESS) return static_cast<CUresult>(code);
    }
    uint64_t count = 1;
    if (const char* text = Env("MEMD_FAKE_CUDA_DEVICES")) {
      if (!ParseUnsigned(text, &count) || count > kMaxDevices) {
        Complain("MEMD_FAKE_CUDA_DEVICES", text, "a device count from 0 to 64");
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    uint64_t memory = kDefaultMemory;
    if (const char* text = Env("MEMD_FAKE_CUDA_MEMORY")) {
      if (!ParseUnsigned(text, &memory) || memory > SIZE_MAX / 2) {
        Complain("MEMD_FAKE_CUDA_MEMORY", text, "a number of bytes");
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    bool vmm = true;
    if (const char* text = Env("MEMD_FAKE_CUDA_VMM")) {
      if (std::strcmp(text, "0") != 0 && std::strcmp(text, "1") != 0) {
        Complain("MEMD_FAKE_CUDA_VMM", text, "0 or 1");
        return CUDA_ERROR_INVALID_VALUE;
      }
      vmm = text[0] == '1';
    }
    std::string error;
    LinkModel link;
    if (!ParseLinkModel(Env("MEMD_FAKE_CUDA_LINK_GBPS"), Env("MEMD_FAKE_CUDA_COPY_LATENCY_US"),
                        &link, &error)) {
      std::fprintf(stderr, "memd fake CUDA driver: cuInit: %s\n", error.c_str());
      return CUDA_ERROR_INVALID_VALUE;
    }
    bool poison = false;
    if (const char* text = Env("MEMD_FAKE_CUDA_POISON")) {
      if (std::strcmp(text, "0") != 0 && std::strcmp(text, "1") != 0) {
        Complain("MEMD_FAKE_CUDA_POISON", text, "0 or 1");
        return CUDA_ERROR_INVALID_VALUE;
      }
      poison = text[0] == '1';
    }
    Faults faults;
    if (!ParseFaults(Env("MEMD_FAKE_CUDA_FAULTS"), &faults, &error)) {
      std::fprintf(stderr, "memd fake CUDA driver: cuInit: %s\n", error.c_str());
      return CUDA_ERROR_INVALID_VALUE;
    }
    link_ = link;
    poison_ = poison;
    copy_faults_ = faults.copies;
    if (!faults.calls.empty()) {
      std::lock_guard<std::mutex> fault_lock(fault_mu_);
      for (const CallFault& fault : faults.calls) call_faults_[fault.symbol].faults.push_back(fault);
      call_faults_armed_.store(true, std::memory_order_release);
    }
    memory_ = static_cast<size_t>(memory);
    vmm_ = vmm;
    physical_count_ = static_cast<int>(count);
    // Unlike MEMD_FAKE_CUDA_*, set but empty means something: no device. A
    // bad entry is no error, as in CUDA: it ends the list.
    for (int physical : VisibleDevices(std::getenv("CUDA_VISIBLE_DEVICES"), physical_count_)) {
      auto device = std::make_unique<Device>();
      device->physical = physical;
      device->context.device = static_cast<int>(devices_.size());
      devices_.push_back(std::move(device));
    }
    return CUDA_SUCCESS;
  }

  std::map<uintptr_t, size_t>::iterator ReservationContaining(uintptr_t address) {
    auto it = reservations_.upper_bound(address);
    if (it == reservations_.begin()) return reservations_.end();
    --it;
    return address - it->first < it->second ? it : reservations_.end();
  }

  // The bases of the mappings that exactly tile [start, start + size); false
  // when the range is not made of whole, adjacent mappings.
  bool WholeMappings(uintptr_t start, size_t size, std::vector<uintptr_t>* bases) const {
    uintptr_t end = 0;
    if (size == 0 || !EndOf(start, size, &end)) return false;
    for (uintptr_t at = start; at < end;) {
      auto it = mappings_.find(at);
      if (it == mappings_.end()) return false;
      bases->push_back(at);
      at += it->second.size;
      if (at > end) return false;
    }
    return true;
  }

  // Frees a VMM allocation once it is released and no longer mapped.
  void MaybeDestroy(std::map<CUmemGenericAllocationHandle, VmmAllocation>::iterator it) {
    VmmAllocation& allocation = it->second;
    if (!allocation.released || allocation.mappings > 0) return;
    if (allocation.charged && HeldByImports(allocation.fd)) {
      // Released here, imported elsewhere: still used until the last import
      // goes (SweepReleased).
      released_.push_back(allocation);
    } else {
      if (allocation.charged) {
        devices_[static_cast<size_t>(allocation.device)]->used -= allocation.size;
      }
      close(allocation.fd);
    }
    allocations_.erase(it);
  }

  // Whether an import (of this process or another) still holds the memory
  // behind `fd`: its read lock, on an open file description other than
  // `fd`'s, conflicts with a write lock.
  static bool HeldByImports(int fd) {
    struct flock probe{};
    probe.l_type = F_WRLCK;
    probe.l_whence = SEEK_SET;
    return fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
  }

  // Frees the released allocations no import holds any more.
  void SweepReleased() {
    std::erase_if(released_, [this](const VmmAllocation& allocation) {
      if (HeldByImports(allocation.fd)) return false;
      devices_[static_cast<size_t>(allocation.device)]->used -= allocation.size;
      close(allocation.fd);
      return true;
    });
  }

  // A new open file description of what `fd` names (locks taken on it are
  // its own), or a duplicate where /proc cannot reopen it.
  static int OpenPrivately(int fd) {
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    const int reopened = open(path.c_str(), O_RDWR | O_CLOEXEC);
    return reopened >= 0 ? reopened : fcntl(fd, F_DUPFD_CLOEXEC, 0);
  }

  void FreeLegacy(std::map<uintptr_t, LegacyAllocation>::iterator it) {
    munmap(AsPointer(it->first), it->second.size);
    close(it->second.fd);
    devices_[static_cast<size_t>(it->second.device)]->used -= it->second.size;
    legacy_.erase(it);
  }

  // The last release of a primary context resets it: as in CUDA, the memory
  // it allocated, opened or registered goes with it.
  void ResetContext(CUctx_st* context) {
    for (auto it = legacy_.begin(); it != legacy_.end();) {
      auto next = std::next(it);
      if (it->second.context == context) FreeLegacy(it);
      it = next;
    }
    for (auto it = ipc_.begin(); it != ipc_.end();) {
      if (it->second.context == context) {
        munmap(AsPointer(it->first), it->second.size);
        it = ipc_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = host_.begin(); it != host_.end();) {
      if (it->second.context != context) {
        ++it;
        continue;
      }
      if (it->second.allocated) munmap(AsPointer(it->first), it->second.mapped);
      it = host_.erase(it);
    }
  }

  // True when [address, address + bytes) lies in device memory of this
  // process that is accessible (writable, for `write`): cuMemAlloc memory,
  // IPC-opened memory, registered host memory, or VMM mappings with access.
  bool DeviceAccessible(CUdeviceptr address, size_t bytes, bool write) {
    uintptr_t end = 0;
    if (!EndOf(static_cast<uintptr_t>(address), bytes, &end)) return false;
    for (uintptr_t at = static_cast<uintptr_t>(address); at < end;) {
      if (auto alloc = Containing(legacy_, at); alloc != legacy_.end()) {
        at = alloc->first + alloc->second.size;
      } else if (auto ipc = Containing(ipc_, at); ipc != ipc_.end()) {
        at = ipc->first + ipc->second.size;
      } else if (auto host = Containing(host_, at); host != host_.end()) {
        at = host->first + host->second.size;
      } else if (auto vmm = Containing(mappings_, at);
                 vmm != mappings_.end() && (write ? vmm->second.writable : vmm->second.readable)) {
        at = vmm->first + vmm->second.size;
      } else {
        return false;
      }
    }
    return true;
  }

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
};

FakeDriver g_driver;

}  // namespace
}  // namespace memd::fake_cuda

// ---- The exported driver API ----
//
// Each symbol is the one cuda.h maps the public name to (cuMemAlloc is
// cuMemAlloc_v2, ...); the library's version script exports these and nothing
// else.

#define MEMD_FAKE_CUDA_API extern "C" __attribute__((visibility("default")))
// MEMD_FAKE_CUDA_FAULTS "symbol@N=CODE": the Nth call returns CODE, doing nothing.
#define MEMD_FAKE_CUDA_INJECT(symbol)                                               \
  if (CUresult injected = memd::fake_cuda::g_driver.Injected(#symbol);             \
      injected != CUDA_SUCCESS) {                                                   \
    return injected;                                                               \
  }

using memd::fake_cuda::g_driver;

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  MEMD_FAKE_CUDA_INJECT(cuGetErrorString)
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = memd::fake_cuda::ErrorDescription(error);
  return *pStr == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  MEMD_FAKE_CUDA_INJECT(cuGetErrorName)
  if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pStr = memd::fake_cuda::ErrorName(error);
  return *pStr == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuInit(unsigned int Flags) { return g_driver.Init(Flags); }

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  MEMD_FAKE_CUDA_INJECT(cuDriverGetVersion)
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = memd::fake_cuda::kDriverVersion;
  return CUDA_SUCCESS;
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceGet)
  return g_driver.DeviceGet(device, ordinal);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceGetCount(int* count) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceGetCount)
  return g_driver.DeviceGetCount(count);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceGetName)
  return g_driver.DeviceGetName(name, len, dev);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceGetUuid_v2)
  return g_driver.DeviceGetUuid(uuid, dev);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceTotalMem_v2)
  return g_driver.DeviceTotalMem(bytes, dev);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib,
                                                         CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDeviceGetAttribute)
  return g_driver.DeviceGetAttribute(pi, attrib, dev);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDevicePrimaryCtxRetain)
  return g_driver.PrimaryCtxRetain(pctx, dev);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  MEMD_FAKE_CUDA_INJECT(cuDevicePrimaryCtxRelease_v2)
  return g_driver.PrimaryCtxRelease(dev);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags,
                                                               int* active) {
  MEMD_FAKE_CUDA_INJECT(cuDevicePrimaryCtxGetState)
  return g_driver.PrimaryCtxGetState(dev, flags, active);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  MEMD_FAKE_CUDA_INJECT(cuCtxSetCurrent)
  return g_driver.CtxSetCurrent(ctx);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  MEMD_FAKE_CUDA_INJECT(cuCtxGetCurrent)
  return g_driver.CtxGetCurrent(pctx);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  MEMD_FAKE_CUDA_INJECT(cuCtxGetDevice)
  return g_driver.CtxGetDevice(device);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  MEMD_FAKE_CUDA_INJECT(cuMemGetInfo_v2)
  return g_driver.MemGetInfo(free, total);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemGetAllocationGranularity(
    size_t* granularity, const CUmemAllocationProp* prop,
    CUmemAllocationGranularity_flags option) {
  MEMD_FAKE_CUDA_INJECT(cuMemGetAllocationGranularity)
  return g_driver.MemGetAllocationGranularity(granularity, prop, option);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle,
                                                size_t size, const CUmemAllocationProp* prop,
                                                unsigned long long flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemCreate)
  return g_driver.MemCreate(handle, size, prop, flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  MEMD_FAKE_CUDA_INJECT(cuMemRelease)
  return g_driver.MemRelease(handle);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size,
                                                        size_t alignment, CUdeviceptr addr,
                                                        unsigned long long flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemAddressReserve)
  return g_driver.MemAddressReserve(ptr, size, alignment, addr, flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  MEMD_FAKE_CUDA_INJECT(cuMemAddressFree)
  return g_driver.MemAddressFree(ptr, size);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                             CUmemGenericAllocationHandle handle,
                                             unsigned long long flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemMap)
  return g_driver.MemMap(ptr, size, offset, handle, flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  MEMD_FAKE_CUDA_INJECT(cuMemUnmap)
  return g_driver.MemUnmap(ptr, size);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                                   const CUmemAccessDesc* desc, size_t count) {
  MEMD_FAKE_CUDA_INJECT(cuMemSetAccess)
  return g_driver.MemSetAccess(ptr, size, desc, count);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemExportToShareableHandle(
    void* shareableHandle, CUmemGenericAllocationHandle handle,
    CUmemAllocationHandleType handleType, unsigned long long flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemExportToShareableHandle)
  return g_driver.MemExportToShareableHandle(shareableHandle, handle, handleType, flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemImportFromShareableHandle(
    CUmemGenericAllocationHandle* handle, void* osHandle,
    CUmemAllocationHandleType shHandleType) {
  MEMD_FAKE_CUDA_INJECT(cuMemImportFromShareableHandle)
  return g_driver.MemImportFromShareableHandle(handle, osHandle, shHandleType);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  MEMD_FAKE_CUDA_INJECT(cuMemAlloc_v2)
  return g_driver.MemAlloc(dptr, bytesize);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  MEMD_FAKE_CUDA_INJECT(cuMemFree_v2)
  return g_driver.MemFree(dptr);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle* pHandle,
                                                      CUdeviceptr dptr) {
  MEMD_FAKE_CUDA_INJECT(cuIpcGetMemHandle)
  return g_driver.IpcGetMemHandle(pHandle, dptr);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr,
                                                          CUipcMemHandle handle,
                                                          unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuIpcOpenMemHandle_v2)
  return g_driver.IpcOpenMemHandle(pdptr, handle, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr) {
  MEMD_FAKE_CUDA_INJECT(cuIpcCloseMemHandle)
  return g_driver.IpcCloseMemHandle(dptr);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemHostRegister_v2(void* p, size_t bytesize,
                                                         unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemHostRegister_v2)
  return g_driver.MemHostRegister(p, bytesize, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemHostUnregister(void* p) {
  MEMD_FAKE_CUDA_INJECT(cuMemHostUnregister)
  return g_driver.MemHostUnregister(p);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p,
                                                                 unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemHostGetDevicePointer_v2)
  return g_driver.MemHostGetDevicePointer(pdptr, p, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost,
                                                    size_t ByteCount) {
  MEMD_FAKE_CUDA_INJECT(cuMemcpyHtoD_v2)
  return g_driver.MemcpyHtoD(dstDevice, srcHost, ByteCount);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice,
                                                    size_t ByteCount) {
  MEMD_FAKE_CUDA_INJECT(cuMemcpyDtoH_v2)
  return g_driver.MemcpyDtoH(dstHost, srcDevice, ByteCount);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc,
                                                  size_t N) {
  MEMD_FAKE_CUDA_INJECT(cuMemsetD8_v2)
  return g_driver.MemsetD8(dstDevice, uc, N);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuMemHostAlloc)
  return g_driver.MemHostAlloc(pp, bytesize, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemFreeHost(void* p) {
  MEMD_FAKE_CUDA_INJECT(cuMemFreeHost)
  return g_driver.MemFreeHost(p);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* leastPriority,
                                                                int* greatestPriority) {
  MEMD_FAKE_CUDA_INJECT(cuCtxGetStreamPriorityRange)
  return g_driver.CtxGetStreamPriorityRange(leastPriority, greatestPriority);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* phStream,
                                                               unsigned int flags,
                                                               int priority) {
  MEMD_FAKE_CUDA_INJECT(cuStreamCreateWithPriority)
  return g_driver.StreamCreateWithPriority(phStream, flags, priority);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuStreamDestroy_v2)
  return g_driver.StreamDestroy(hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuStreamSynchronize)
  return g_driver.StreamSynchronize(hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent,
                                                      unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuStreamWaitEvent)
  return g_driver.StreamWaitEvent(hStream, hEvent, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  MEMD_FAKE_CUDA_INJECT(cuEventCreate)
  return g_driver.EventCreate(phEvent, Flags);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) {
  MEMD_FAKE_CUDA_INJECT(cuEventDestroy_v2)
  return g_driver.EventDestroy(hEvent);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuEventRecord)
  return g_driver.EventRecord(hEvent, hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  MEMD_FAKE_CUDA_INJECT(cuEventQuery)
  return g_driver.EventQuery(hEvent);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  MEMD_FAKE_CUDA_INJECT(cuEventSynchronize)
  return g_driver.EventSynchronize(hEvent);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice,
                                                         const void* srcHost, size_t ByteCount,
                                                         CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuMemcpyHtoDAsync_v2)
  return g_driver.MemcpyAsync(memd::fake_cuda::kHostToDevice, static_cast<uintptr_t>(dstDevice),
                              reinterpret_cast<uintptr_t>(srcHost), ByteCount, hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void* dstHost, CUdeviceptr srcDevice,
                                                         size_t ByteCount, CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuMemcpyDtoHAsync_v2)
  return g_driver.MemcpyAsync(memd::fake_cuda::kDeviceToHost, reinterpret_cast<uintptr_t>(dstHost),
                              static_cast<uintptr_t>(srcDevice), ByteCount, hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice,
                                                         CUdeviceptr srcDevice, size_t ByteCount,
                                                         CUstream hStream) {
  MEMD_FAKE_CUDA_INJECT(cuMemcpyDtoDAsync_v2)
  return g_driver.MemcpyAsync(memd::fake_cuda::kDeviceToDevice,
                              static_cast<uintptr_t>(dstDevice),
                              static_cast<uintptr_t>(srcDevice), ByteCount, hStream);
}

MEMD_FAKE_CUDA_API CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn,
                                                     void* userData) {
  MEMD_FAKE_CUDA_INJECT(cuLaunchHostFunc)
  return g_driver.LaunchHostFunc(hStream, fn, userData);
}
