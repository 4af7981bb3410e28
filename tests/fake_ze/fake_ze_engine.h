#pragma once

// memd FAKE Level Zero driver (a test double): the commands an immediate
// command list or a command queue runs, and the Engine that runs them, in
// order, on a thread of its own, so that appended work completes after the
// call returns, as on a GPU.

#include <level_zero/ze_api.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace memd::fake_ze {

// The host-side memory behind one allocation or IPC-opened range: a PROT_NONE
// reservation whose address is the device pointer the caller sees (so the host
// cannot dereference it), and the mapping the fake itself reads and writes. Owns
// both and the backing memfd; unmaps and closes them when the last owner (the
// allocation's table entry, a command in flight) lets go. Immutable after
// construction, so commands use it without the driver's mutex.
struct Mapping {
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();

  void* reservation = nullptr;  // nullptr for host allocations.
  size_t reservation_size = 0;
  unsigned char* memory = nullptr;  // Shadow mapping, or the host allocation itself.
  size_t memory_size = 0;
  int fd = -1;  // The backing memfd of a device allocation, else -1.
};

// Where a command reads or writes: an address the fake can touch, and what
// keeps it mapped (empty for plain host memory, which is the caller's).
struct Span {
  unsigned char* address = nullptr;
  std::shared_ptr<Mapping> keep;
};

struct Command {
  enum class Kind {
    kCopy,         // size bytes from src to dst.
    kFill,         // dst, size bytes, repeating pattern[0..pattern_size).
    kWait,         // Until every event in `events` is signalled.
    kSignal,       // Signals events[0].
    kReset,        // Resets events[0].
    kSignalFence,  // Signals `fence` (the end of a zeCommandQueueExecuteCommandLists).
  };
  Kind kind = Kind::kWait;
  Span dst;
  Span src;
  size_t size = 0;
  std::array<unsigned char, 16> pattern{};
  size_t pattern_size = 0;
  std::vector<ze_event_handle_t> events;
  ze_fence_handle_t fence = nullptr;
};

// Runs submitted commands in order on its own thread. A copy or fill moves its
// bytes when it starts and completes `latency` later; with `poison` its
// destination reads 0xa5 from its start until it completes (the bytes land at
// the end). A wait blocks the engine until its events are signalled.
//
// Thread-safety: shares the driver's mutex `mu` and condition variable `cv`
// (notified on every completion); every method but the destructor needs `mu`
// held. The thread holds `mu` except while it moves bytes or sleeps. Events and
// fences a pending command names must stay alive: Submit counts them in their
// `pending`, which their destroy calls check.
class Engine {
 public:
  Engine(std::mutex& mu, std::condition_variable& cv, std::chrono::microseconds latency,
         bool poison);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  // Stops and joins the thread; call without `mu` held. Work still queued is
  // dropped without touching its events (they may be gone by then).
  ~Engine();

  // Queues `commands`; returns the sequence number of the last (or of the last
  // submitted so far, if there are none).
  uint64_t Submit(std::vector<Command> commands);
  bool Completed(uint64_t sequence) const { return completed_ >= sequence; }
  bool Idle() const { return completed_ == submitted_; }
  uint64_t Pending() const { return submitted_ - completed_; }
  // Makes the thread exit at its next step (the destructor then joins it).
  void RequestStop();

 private:
  void Run();
  bool Ready(const Command& command) const;
  void Execute(const Command& command, std::unique_lock<std::mutex>& lock);
  void MoveBytes(const Command& command, std::unique_lock<std::mutex>& lock);
  void Finish(const Command& command);

  std::mutex& mu_;
  std::condition_variable& cv_;
  const std::chrono::microseconds latency_;
  const bool poison_;
  std::deque<Command> queue_;  // Guarded by mu_, as are the counters.
  uint64_t submitted_ = 0;
  uint64_t completed_ = 0;
  bool stop_ = false;
  std::thread thread_;  // Last: starts once the rest is initialised.
};

}  // namespace memd::fake_ze
