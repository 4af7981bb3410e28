#include "daemon/session/session_ender.h"

#include <utility>

namespace memd::session {

SessionEnder::SessionEnder(std::function<void(std::uint64_t)> end, int workers)
    : end_(std::move(end)) {
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { Run(); });
}

SessionEnder::~SessionEnder() { Stop(); }

void SessionEnder::End(std::uint64_t session) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      queue_.push_back(session);
      wake_.notify_one();
      return;
    }
  }
  end_(session);  // Stopped: nobody else would.
}

void SessionEnder::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
}

void SessionEnder::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // Stopping, and nothing left to end.
    const std::uint64_t session = queue_.front();
    queue_.pop_front();
    lock.unlock();
    end_(session);
    lock.lock();
  }
}

}  // namespace memd::session
