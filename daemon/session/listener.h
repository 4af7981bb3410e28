#pragma once

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "common/unique_fd.h"
#include "daemon/session/rate_limited_log.h"

namespace memd::session {

/// A listening Unix socket whose accept failures cannot spin the thread
/// that accepts: when accept fails (for want of descriptors or memory:
/// EMFILE, ENFILE, ENOBUFS, ENOMEM; or anything else) the listener pauses
/// for a backoff that doubles while the failures go on, up to a second (the
/// pending connections wait in the backlog), and the failures are logged
/// at most once a second.
/// Owns the socket. Not thread-safe: one thread accepts.
class Listener {
 public:
  Listener(UniqueFd socket, std::string name);

  int fd() const { return socket_.get(); }

  // One waiting connection (CLOEXEC, non-blocking), or std::nullopt when
  // none waits or accepting failed (then paused() may have become true).
  std::optional<UniqueFd> Accept(absl::Time now);

  bool paused() const { return paused_until_ != absl::InfinitePast(); }
  // When a pause ends; InfinitePast when not paused.
  absl::Time paused_until() const { return paused_until_; }
  void Resume() { paused_until_ = absl::InfinitePast(); }

 private:
  UniqueFd socket_;
  const std::string name_;
  absl::Time paused_until_ = absl::InfinitePast();
  absl::Duration backoff_;
  RateLimitedLog log_;
};

}  // namespace memd::session
