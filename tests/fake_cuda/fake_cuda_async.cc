// memd FAKE CUDA driver (a test double): the asynchronous side. Each
// device's copy-engine threads and host-call thread, and how a stream's
// queue advances: in order, after the legacy NULL stream as CUDA orders it.

#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/fake_cuda/fake_cuda_config.h"
#include "tests/fake_cuda/fake_cuda_state.h"
#include "tests/fake_cuda/fake_cuda_util.h"

namespace memd::fake_cuda {
namespace {

// What MEMD_FAKE_CUDA_POISON=1 fills a copy's destination with until the
// copy lands.
constexpr unsigned char kPoison = 0xa5;

}  // namespace

// Starts the device's copy engines (one per direction) and host-call thread.
void FakeDriver::StartDevice(int ordinal) {
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

void FakeDriver::StopThreads() {
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
void FakeDriver::JoinOrAbandon(std::unique_ptr<std::thread>& thread) {
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
uint64_t FakeDriver::Enqueue(const std::shared_ptr<CUstream_st>& stream, StreamOp op) {
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
void FakeDriver::ChainAfter(const std::shared_ptr<CUstream_st>& earlier,
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

uint64_t FakeDriver::Push(const std::shared_ptr<CUstream_st>& stream, StreamOp op) {
  busy_.emplace(stream.get(), stream);
  stream->ops.push_back(std::move(op));
  const uint64_t id = ++stream->enqueued;
  Advance(stream);
  return id;
}

void FakeDriver::Pop(CUstream_st& stream) {
  stream.ops.pop_front();
  ++stream.completed;
  progress_.notify_all();
}

// Runs the stream's head as far as it can go now: records and satisfied
// waits complete here; a copy goes to its engine, a host function to the
// host-call thread, an unsatisfied wait onto its event. On a device whose
// context broke, everything queued is dropped (records still release
// their waiters, so nothing waits forever on a dropped record).
void FakeDriver::Advance(std::shared_ptr<CUstream_st> stream) {
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

void FakeDriver::ReachRecord(CUstream_st& stream, const StreamOp& record, bool carry_error) {
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
void FakeDriver::Complete(const std::shared_ptr<CUstream_st>& stream) {
  stream->running = false;
  Pop(*stream);
  Advance(stream);
}

std::chrono::nanoseconds FakeDriver::CopyTime(Direction direction, size_t bytes) const {
  std::chrono::nanoseconds time = std::chrono::microseconds(link_.latency_us);
  const double gbps = link_.gbps[direction];  // GB/s = bytes per nanosecond.
  if (gbps > 0) time += std::chrono::nanoseconds(static_cast<int64_t>(bytes / gbps));
  return time;
}

// One copy engine: takes copies in the order their streams reached them,
// holds each for its modelled time (after the previous one on this
// engine), then moves the bytes and completes it.
void FakeDriver::RunCopyEngine(int ordinal, Direction direction) {
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

void FakeDriver::MoveBytes(std::unique_lock<std::mutex>& lock, const StreamOp& copy) {
  lock.unlock();
  std::memmove(AsPointer(copy.dst), AsPointer(copy.src), copy.bytes);
  lock.lock();
}

// Runs cuLaunchHostFunc functions of the device's streams, one at a time,
// without the lock. As in CUDA, none runs once the context is broken.
void FakeDriver::RunHostCalls(int ordinal) {
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

}  // namespace memd::fake_cuda
