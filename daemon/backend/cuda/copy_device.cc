#include "daemon/backend/cuda/copy_device.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cuda/scoped_context.h"
#include "common/status_macros.h"

namespace memd::backend {

// ---- CudaCopyDevice ----

CudaCopyDevice::CudaCopyDevice(std::shared_ptr<const cuda::Driver> driver, int ordinal,
                               CUcontext context, Options options)
    : driver_(std::move(driver)), ordinal_(ordinal), context_(context), options_(options) {}

CudaCopyDevice::~CudaCopyDevice() {
  absl::MutexLock lock(&mu_);
  if (staging_.empty() && registered_.empty()) return;
  cuda::ScopedContext current(*driver_, context_);
  for (void* memory : staging_) driver_->api().MemFreeHost(memory);
  // Unregistered before registered_ unmaps them.
  for (const numa::NodeMemory& memory : registered_) {
    driver_->api().MemHostUnregister(memory.bytes().data());
  }
}

absl::Status CudaCopyDevice::health() const { return health_.status(); }

absl::Status CudaCopyDevice::Status(CUresult result, std::string_view call, CopyCall kind) {
  absl::Status status = CopyStatus(*driver_, result, call, ordinal_, kind);
  if (!status.ok() && IsStickyCudaError(result)) health_.Break(status);
  return status;
}

absl::StatusOr<std::span<std::byte>> CudaCopyDevice::AllocateStaging(std::uint64_t bytes) {
  MEMD_RETURN_IF_ERROR(health());
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("staging memory of 0 bytes asked of device ", ordinal_));
  }
  cuda::ScopedContext current(*driver_, context_);
  MEMD_RETURN_IF_ERROR(current.status());
  if (std::optional<int> node = StagingNode()) {
    MEMD_ASSIGN_OR_RETURN(numa::NodeMemory placed, numa::NodeMemory::Map(bytes, *node));
    MEMD_RETURN_IF_ERROR(Status(
        driver_->api().MemHostRegister(placed.bytes().data(), bytes, CU_MEMHOSTREGISTER_PORTABLE),
        absl::StrCat("cuMemHostRegister(", bytes, " bytes on NUMA node ", *node, ", PORTABLE)"),
        CopyCall::kStaging));
    const std::span<std::byte> span = placed.bytes();
    absl::MutexLock lock(&mu_);
    registered_.push_back(std::move(placed));
    return span;
  }
  void* memory = nullptr;
  // PORTABLE: every context may DMA from it (a copy between devices stages
  // through one device's ring with the other's stream).
  MEMD_RETURN_IF_ERROR(Status(
      driver_->api().MemHostAlloc(&memory, bytes, CU_MEMHOSTALLOC_PORTABLE),
      absl::StrCat("cuMemHostAlloc(", bytes, " bytes, PORTABLE)"), CopyCall::kStaging));
  // Fault every page in now, not during the first transfer.
  auto* first = static_cast<std::byte*>(memory);
  const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  for (std::uint64_t at = 0; at < bytes; at += page) first[at] = std::byte{0};
  absl::MutexLock lock(&mu_);
  staging_.push_back(memory);
  return std::span<std::byte>(first, bytes);
}

// Only where the machine has several nodes: on one, placing is moot.
std::optional<int> CudaCopyDevice::StagingNode() const {
  if (numa::NodeCount(options_.sysfs_root) < 2) return std::nullopt;
  CUdevice device = 0;
  int domain = 0;
  int bus = 0;
  int slot = 0;
  const cuda::DriverApi& api = driver_->api();
  if (api.DeviceGet(&device, ordinal_) != CUDA_SUCCESS ||
      api.DeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, device) != CUDA_SUCCESS ||
      api.DeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, device) != CUDA_SUCCESS ||
      api.DeviceGetAttribute(&slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, device) != CUDA_SUCCESS) {
    return std::nullopt;
  }
  return numa::NodeOfPciDevice(numa::PciBusId(domain, bus, slot), options_.sysfs_root);
}

absl::StatusOr<std::unique_ptr<CopyStream>> CudaCopyDevice::NewStream() {
  MEMD_RETURN_IF_ERROR(health());
  MEMD_ASSIGN_OR_RETURN(std::unique_ptr<CudaCopyStream> stream, CudaCopyStream::Create(*this));
  return std::unique_ptr<CopyStream>(std::move(stream));
}

// ---- CudaCopyStream ----

namespace {
struct Wake;
}  // namespace

struct CudaCopyStream::PendingWakes {
  absl::Mutex mu;
  absl::flat_hash_set<Wake*> wakes ABSL_GUARDED_BY(mu);
};

namespace {

// What cuLaunchHostFunc carries: the caller's function and the set that
// lists it until it ran.
struct Wake {
  std::function<void()> wake;
  std::shared_ptr<CudaCopyStream::PendingWakes> pending;
};

// On the driver's thread: no driver call, nothing that blocks long.
void CUDA_CB RunWake(void* data) {
  std::unique_ptr<Wake> wake(static_cast<Wake*>(data));
  {
    absl::MutexLock lock(&wake->pending->mu);
    wake->pending->wakes.erase(wake.get());
  }
  wake->wake();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaCopyStream>> CudaCopyStream::Create(CudaCopyDevice& device) {
  const cuda::Driver& driver = device.driver();
  cuda::ScopedContext current(driver, device.context());
  MEMD_RETURN_IF_ERROR(current.status());
  int least = 0;
  MEMD_RETURN_IF_ERROR(device.Status(driver.api().CtxGetStreamPriorityRange(&least, nullptr),
                                     "cuCtxGetStreamPriorityRange", CopyCall::kEnqueue));
  CUstream stream = nullptr;
  // Non-blocking: the NULL stream of a client library in the daemon's
  // process never serialises with the engine's copies.
  MEMD_RETURN_IF_ERROR(device.Status(
      driver.api().StreamCreateWithPriority(&stream, CU_STREAM_NON_BLOCKING, least),
      "cuStreamCreateWithPriority", CopyCall::kEnqueue));
  CUstream notify = nullptr;
  absl::Status made = device.Status(
      driver.api().StreamCreateWithPriority(&notify, CU_STREAM_NON_BLOCKING, least),
      "cuStreamCreateWithPriority", CopyCall::kEnqueue);
  CUevent notify_event = nullptr;
  if (made.ok()) {
    made = device.Status(driver.api().EventCreate(&notify_event, CU_EVENT_DISABLE_TIMING),
                         "cuEventCreate", CopyCall::kEnqueue);
  }
  if (!made.ok()) {
    if (notify != nullptr) driver.api().StreamDestroy(notify);
    driver.api().StreamDestroy(stream);
    return made;
  }
  return std::unique_ptr<CudaCopyStream>(
      new CudaCopyStream(device, stream, notify, notify_event));
}

CudaCopyStream::CudaCopyStream(CudaCopyDevice& device, CUstream stream, CUstream notify,
                               CUevent notify_event)
    : device_(device),
      api_(device.driver().api()),
      stream_(stream),
      notify_(notify),
      notify_event_(notify_event),
      wakes_(std::make_shared<PendingWakes>()) {}

CudaCopyStream::~CudaCopyStream() {
  Drain();
  cuda::ScopedContext current(device_.driver(), device_.context());
  for (CUevent event : events_) api_.EventDestroy(event);
  api_.StreamDestroy(stream_);
  // A wake still waiting on notify_ runs when the driver gets there, as
  // one still queued on stream_ would.
  api_.EventDestroy(notify_event_);
  api_.StreamDestroy(notify_);
  if (!device_.health().ok()) {
    // A broken context runs no host function again: nothing else frees them.
    absl::MutexLock lock(&wakes_->mu);
    for (Wake* wake : wakes_->wakes) delete wake;
    wakes_->wakes.clear();
  }
  // Otherwise a wake still queued (the drain timed out) stays the driver's
  // to run whenever the stream gets there.
}

absl::Status CudaCopyStream::Broken() const { return device_.health(); }

void CudaCopyStream::Drain() {
  // A marker polled, not a host function waited for: after a timeout nothing
  // of ours stays queued in the driver (cuEventSynchronize has no timeout).
  absl::StatusOr<Marker> last = Mark();
  if (!last.ok()) return;
  const absl::Time deadline = absl::Now() + device_.options().drain_timeout;
  for (;;) {
    absl::StatusOr<bool> reached = Reached(*last);
    if (!reached.ok() || *reached || absl::Now() >= deadline) return;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

absl::Status CudaCopyStream::HostToDevice(DeviceAddress destination, const void* source,
                                          std::uint64_t bytes) {
  MEMD_RETURN_IF_ERROR(Broken());
  cuda::ScopedContext current(device_.driver(), device_.context());
  MEMD_RETURN_IF_ERROR(current.status());
  return device_.Status(api_.MemcpyHtoDAsync(destination, source, bytes, stream_),
                        absl::StrCat("cuMemcpyHtoDAsync(", bytes, " bytes)"),
                        CopyCall::kEnqueue);
}

absl::Status CudaCopyStream::DeviceToHost(void* destination, DeviceAddress source,
                                          std::uint64_t bytes) {
  MEMD_RETURN_IF_ERROR(Broken());
  cuda::ScopedContext current(device_.driver(), device_.context());
  MEMD_RETURN_IF_ERROR(current.status());
  return device_.Status(api_.MemcpyDtoHAsync(destination, source, bytes, stream_),
                        absl::StrCat("cuMemcpyDtoHAsync(", bytes, " bytes)"),
                        CopyCall::kEnqueue);
}

absl::Status CudaCopyStream::DeviceToDevice(DeviceAddress destination, DeviceAddress source,
                                            std::uint64_t bytes) {
  MEMD_RETURN_IF_ERROR(Broken());
  cuda::ScopedContext current(device_.driver(), device_.context());
  MEMD_RETURN_IF_ERROR(current.status());
  return device_.Status(api_.MemcpyDtoDAsync(destination, source, bytes, stream_),
                        absl::StrCat("cuMemcpyDtoDAsync(", bytes, " bytes)"),
                        CopyCall::kEnqueue);
}

absl::StatusOr<Marker> CudaCopyStream::Mark() {
  MEMD_RETURN_IF_ERROR(Broken());
  cuda::ScopedContext current(device_.driver(), device_.context());
  MEMD_RETURN_IF_ERROR(current.status());
  Marker marker = 0;
  if (!free_.empty()) {
    marker = free_.back();
    free_.pop_back();
  } else {
    CUevent event = nullptr;
    MEMD_RETURN_IF_ERROR(device_.Status(api_.EventCreate(&event, CU_EVENT_DISABLE_TIMING),
                                        "cuEventCreate", CopyCall::kEnqueue));
    marker = static_cast<Marker>(events_.size());
    events_.push_back(event);
    live_.push_back(false);
  }
  absl::Status recorded =
      device_.Status(api_.EventRecord(events_[marker], stream_), "cuEventRecord",
                     CopyCall::kEnqueue);
  if (!recorded.ok()) {
    free_.push_back(marker);
    return recorded;
  }
  live_[marker] = true;
  return marker;
}

absl::StatusOr<bool> CudaCopyStream::Reached(Marker marker) {
  if (marker >= live_.size() || !live_[marker]) {
    return absl::InvalidArgumentError(
        absl::StrCat("marker ", marker, " is not live on this stream of device ",
                     device_.ordinal()));
  }
  MEMD_RETURN_IF_ERROR(Broken());
  // cuEventQuery needs no current context: the poll stays cheap.
  const CUresult result = api_.EventQuery(events_[marker]);
  if (result == CUDA_ERROR_NOT_READY) return false;
  MEMD_RETURN_IF_ERROR(device_.Status(result, "cuEventQuery", CopyCall::kSurface));
  return true;
}

void CudaCopyStream::Forget(Marker marker) {
  if (marker >= live_.size() || !live_[marker]) return;
  live_[marker] = false;
  free_.push_back(marker);
}

absl::Status CudaCopyStream::WakeWhenDone(std::function<void()> wake) {
  MEMD_RETURN_IF_ERROR(Broken());
  cuda::ScopedContext current(device_.driver(), device_.context());
  MEMD_RETURN_IF_ERROR(current.status());
  auto* call = new Wake{std::move(wake), wakes_};
  {
    absl::MutexLock lock(&wakes_->mu);
    wakes_->wakes.insert(call);
  }
  // Re-recording notify_event_ later is fine: cuStreamWaitEvent waits for
  // the record made before it.
  absl::Status launched =
      device_.Status(api_.EventRecord(notify_event_, stream_), "cuEventRecord",
                     CopyCall::kEnqueue);
  if (launched.ok()) {
    launched = device_.Status(api_.StreamWaitEvent(notify_, notify_event_, 0),
                              "cuStreamWaitEvent", CopyCall::kEnqueue);
  }
  if (launched.ok()) {
    launched = device_.Status(api_.LaunchHostFunc(notify_, &RunWake, call),
                              "cuLaunchHostFunc", CopyCall::kEnqueue);
  }
  if (!launched.ok()) {
    absl::MutexLock lock(&wakes_->mu);
    wakes_->wakes.erase(call);
    delete call;
  }
  return launched;
}

absl::Status CudaCopyStream::Synchronize() {
  MEMD_RETURN_IF_ERROR(Broken());
  return device_.Status(api_.StreamSynchronize(stream_), "cuStreamSynchronize",
                        CopyCall::kSurface);
}

}  // namespace memd::backend
