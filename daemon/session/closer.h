#pragma once

#include <deque>
#include <memory>
#include <mutex>

#include "common/unique_fd.h"

namespace memd::session {

/// Closes sockets that clients could have loaded with descriptors. The last
/// close of a passed descriptor runs its release, and some releases block
/// for as long as the sender likes (a TCP socket lingering on unsent data);
/// where the kernel can refuse descriptors (SO_PASSRIGHTS) no such socket
/// exists and Close closes at once, else the close happens on this class's
/// own thread, so that it can stall nothing but later closes.
/// Owns the queued descriptors; the thread outlives the Closer if a close
/// is stuck, finishing the queue on its own. Thread-safe.
class Closer {
 public:
  // `inline_close`: the sockets cannot hold client descriptors.
  explicit Closer(bool inline_close) : inline_(inline_close) {}
  ~Closer();  // Never waits for a blocked close.

  void Close(UniqueFd fd);

  bool closes_inline() const { return inline_; }

 private:
  struct Queue {
    std::mutex mu;
    std::deque<UniqueFd> fds;
    bool running = false;  // A thread is closing them.
  };
  static void Run(std::shared_ptr<Queue> queue);

  const bool inline_;
  const std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();
};

}  // namespace memd::session
