// memd FAKE CUDA driver (a test double): the API of the asynchronous side.
// Streams, events, asynchronous copies and host functions; they queue work
// that fake_cuda_async.cc runs.

#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>

#include "tests/fake_cuda/fake_cuda_config.h"
#include "tests/fake_cuda/fake_cuda_state.h"
#include "tests/fake_cuda/fake_cuda_util.h"

namespace memd::fake_cuda {
namespace {

// CUDA's stream priorities: lower numbers are higher priorities.
constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;

}  // namespace

// ---- Streams ----

CUresult FakeDriver::CtxGetStreamPriorityRange(int* least, int* greatest) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* context = nullptr;
  if (CUresult result = Current(&context); result != CUDA_SUCCESS) return result;
  if (least != nullptr) *least = kLeastPriority;  // cuda.h: either may be NULL.
  if (greatest != nullptr) *greatest = kGreatestPriority;
  return CUDA_SUCCESS;
}

CUresult FakeDriver::StreamCreateWithPriority(CUstream* stream, unsigned int flags, int priority) {
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
CUresult FakeDriver::StreamDestroy(CUstream handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  auto it = streams_.find(handle);
  if (it == streams_.end()) return CUDA_ERROR_INVALID_HANDLE;
  const CUresult sticky = Sticky(it->second->device);
  streams_.erase(it);
  return sticky;
}

CUresult FakeDriver::StreamSynchronize(CUstream handle) {
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

CUresult FakeDriver::StreamWaitEvent(CUstream handle, CUevent event_handle, unsigned int flags) {
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

CUresult FakeDriver::EventCreate(CUevent* event, unsigned int flags) {
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
CUresult FakeDriver::EventDestroy(CUevent handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  auto it = events_.find(handle);
  if (it == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
  const CUresult sticky = Sticky(it->second->device);
  events_.erase(it);
  return sticky;
}

CUresult FakeDriver::EventRecord(CUevent handle, CUstream stream_handle) {
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

CUresult FakeDriver::EventQuery(CUevent handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  auto event = events_.find(handle);
  if (event == events_.end()) return CUDA_ERROR_INVALID_HANDLE;
  return RecordState(*event->second, event->second->recorded);
}

CUresult FakeDriver::EventSynchronize(CUevent handle) {
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

CUresult FakeDriver::MemcpyAsync(Direction direction, uintptr_t dst, uintptr_t src, size_t bytes,
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

CUresult FakeDriver::LaunchHostFunc(CUstream handle, CUhostFn fn, void* data) {
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

// ---- What the calls above share ----

// An error not surfaced yet is returned (once); else CUDA_SUCCESS.
CUresult FakeDriver::Surface(const std::shared_ptr<AsyncError>& error) {
  if (error == nullptr || error->surfaced) return CUDA_SUCCESS;
  error->surfaced = true;
  return error->code;
}

// What a query of `event`'s record `generation` reports.
CUresult FakeDriver::RecordState(CUevent_st& event, uint64_t generation) {
  if (CUresult sticky = Sticky(event.device); sticky != CUDA_SUCCESS) return sticky;
  if (event.pending.count(generation) != 0) return CUDA_ERROR_NOT_READY;
  if (event.error != nullptr && event.error_generation == generation) {
    return Surface(event.error);
  }
  return CUDA_SUCCESS;  // Reached, or never recorded.
}

// True when [start, start + bytes) lies in one registered or
// cuMemHostAlloc'ed range: copies to and from it are asynchronous.
bool FakeDriver::Pinned(uintptr_t start, size_t bytes) {
  auto it = Containing(host_, start);
  uintptr_t end = 0;
  return it != host_.end() && EndOf(start, bytes, &end) && end <= it->first + it->second.size;
}

// The stream a handle names: NULL and CU_STREAM_LEGACY are the current
// context's NULL stream. Errors: INVALID_HANDLE, the context's, sticky.
CUresult FakeDriver::ResolveStream(CUstream handle, std::shared_ptr<CUstream_st>* stream) {
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

}  // namespace memd::fake_cuda
