// memd FAKE Level Zero driver (a test double): the engine threads that run
// immediate command lists and command queues. The point of running them on a
// thread is to make a caller that forgets to wait fail: the bytes land, and
// events and fences signal, only after the call returned (and with
// MEMD_FAKE_ZE_POISON the destination reads 0xa5 until then).

#include "tests/fake_ze/fake_ze_engine.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "tests/fake_ze/fake_ze_state.h"

namespace memd::fake_ze {

Mapping::~Mapping() {
  if (memory != nullptr) munmap(memory, memory_size);
  if (reservation != nullptr) munmap(reservation, reservation_size);
  if (fd >= 0) close(fd);
}

Engine::Engine(std::mutex& mu, std::condition_variable& cv, std::chrono::microseconds latency,
               bool poison)
    : mu_(mu), cv_(cv), latency_(latency), poison_(poison), thread_([this] { Run(); }) {}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    RequestStop();
  }
  thread_.join();
}

void Engine::RequestStop() {
  stop_ = true;
  cv_.notify_all();
}

uint64_t Engine::Submit(std::vector<Command> commands) {
  for (Command& command : commands) {
    for (ze_event_handle_t event : command.events) ++event->pending;
    if (command.fence != nullptr) ++command.fence->pending;
    queue_.push_back(std::move(command));
    ++submitted_;
  }
  cv_.notify_all();
  return submitted_;
}

void Engine::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || (!queue_.empty() && Ready(queue_.front())); });
    if (stop_) return;
    Command command = std::move(queue_.front());
    queue_.pop_front();
    Execute(command, lock);
    if (stop_) return;  // Stopped mid-copy: the events may already be gone.
    Finish(command);
    ++completed_;
    cv_.notify_all();
  }
}

bool Engine::Ready(const Command& command) const {
  if (command.kind != Command::Kind::kWait) return true;
  for (ze_event_handle_t event : command.events) {
    if (!event->signalled) return false;
  }
  return true;
}

void Engine::Execute(const Command& command, std::unique_lock<std::mutex>& lock) {
  switch (command.kind) {
    case Command::Kind::kCopy:
    case Command::Kind::kFill:
      MoveBytes(command, lock);
      break;
    case Command::Kind::kSignal:
      command.events[0]->signalled = true;
      break;
    case Command::Kind::kReset:
      command.events[0]->signalled = false;
      break;
    case Command::Kind::kSignalFence:
      command.fence->signalled = true;
      break;
    case Command::Kind::kWait:
      break;  // Ready() already waited for its events.
  }
}

namespace {

// The bytes of a copy or fill, read from `source` (a copy's source or a
// snapshot of it). Runs without the driver's mutex.
void Write(const Command& command, const unsigned char* source) {
  if (command.size == 0) return;
  if (command.kind == Command::Kind::kCopy) {
    std::memmove(command.dst.address, source, command.size);
    return;
  }
  for (size_t done = 0; done < command.size; done += command.pattern_size) {
    size_t chunk = std::min(command.pattern_size, command.size - done);
    std::memcpy(command.dst.address + done, command.pattern.data(), chunk);
  }
}

}  // namespace

void Engine::MoveBytes(const Command& command, std::unique_lock<std::mutex>& lock) {
  const auto end = std::chrono::steady_clock::now() + latency_;
  std::vector<unsigned char> snapshot;
  lock.unlock();
  if (poison_) {
    // The source is read now, the destination written at the end; in between
    // it reads poison. The snapshot keeps an overlapping source intact.
    if (command.kind == Command::Kind::kCopy) {
      snapshot.assign(command.src.address, command.src.address + command.size);
    }
    std::memset(command.dst.address, 0xa5, command.size);
  } else {
    Write(command, command.src.address);
  }
  lock.lock();
  cv_.wait_until(lock, end, [this] { return stop_; });
  if (stop_ || !poison_) return;
  lock.unlock();
  Write(command, snapshot.data());
  lock.lock();
}

void Engine::Finish(const Command& command) {
  for (ze_event_handle_t event : command.events) --event->pending;
  if (command.fence != nullptr) --command.fence->pending;
}

}  // namespace memd::fake_ze
