#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace memd::session {

/// Runs the end of sessions off the session server's epoll thread: ending a
/// session first drains its transfers (bounded, but seconds where a GPU is
/// slow), and the epoll thread serves every other client. A few workers, so
/// that one slow drain holds up no other session's end. Owns the workers and
/// the queue of sessions still to end. Thread-safe.
class SessionEnder {
 public:
  // `end` runs once per End() call, on one of `workers` threads.
  SessionEnder(std::function<void(std::uint64_t session)> end, int workers);
  ~SessionEnder();  // Stop().

  // Queues the session's end and returns at once.
  void End(std::uint64_t session);

  // Ends every queued session, then joins the workers; later End() calls
  // run on the caller's thread. Idempotent.
  void Stop();

 private:
  void Run();

  const std::function<void(std::uint64_t)> end_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::uint64_t> queue_;  // Guarded by mu_.
  bool stopping_ = false;            // Guarded by mu_.
  std::vector<std::thread> workers_;
};

}  // namespace memd::session
