#include "daemon/session/closer.h"

#include <thread>

namespace memd::session {

void Closer::Close(UniqueFd fd) {
  if (inline_ || !fd) return;  // `fd` closes here.
  std::lock_guard<std::mutex> lock(queue_->mu);
  queue_->fds.push_back(std::move(fd));
  if (!queue_->running) {
    // A thread per busy spell: it ends when the queue is empty, so an idle
    // Closer holds no thread, and a stuck one never holds up its owner.
    queue_->running = true;
    std::thread(Run, queue_).detach();
  }
}

void Closer::Run(std::shared_ptr<Queue> queue) {
  std::unique_lock<std::mutex> lock(queue->mu);
  while (!queue->fds.empty()) {
    UniqueFd fd = std::move(queue->fds.front());
    queue->fds.pop_front();
    lock.unlock();
    fd.reset();
    lock.lock();
  }
  queue->running = false;
}

Closer::~Closer() = default;

}  // namespace memd::session
