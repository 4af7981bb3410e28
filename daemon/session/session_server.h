#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "common/unix_socket.h"
#include "daemon/session/session.h"

namespace memd::session {

// What the server asks of the rest of the daemon when a client comes and
// goes. `start` returns the session id or refuses the client (its status
// reaches the client); `end` is called once for every started session.
struct SessionHooks {
  std::function<absl::StatusOr<std::uint64_t>(const PeerCredentials& peer,
                                              const std::string& command)>
      start;
  std::function<void(std::uint64_t session)> end;
};

/// Accepts clients on the session socket (SOCK_SEQPACKET), reads their
/// credentials (SO_PEERCRED), greets each with its session id and token, and
/// notices at once when one hangs up or dies (the kernel closes its socket):
/// the session then ends and the daemon releases its leases.
/// Owns the listening socket, one epoll thread and the sessions.
/// Thread-safe.
class SessionServer {
 public:
  SessionServer(UniqueFd listener, SessionHooks hooks);
  ~SessionServer();  // Stops.

  // Starts the epoll thread. Errors: INTERNAL (epoll/eventfd failed).
  absl::Status Start();

  // Stops accepting, ends every session (calling hooks.end) and joins the
  // thread. Idempotent.
  void Stop();

  // The session a gRPC call's token belongs to, or nullptr.
  std::shared_ptr<Session> Find(absl::string_view token) const;

  std::size_t size() const;

 private:
  void Run();
  void Accept();
  void Hangup(int fd);
  void Drain(int fd);

  UniqueFd listener_;
  SessionHooks hooks_;
  UniqueFd epoll_;
  UniqueFd wakeup_;  // eventfd that tells Run to return.
  std::thread thread_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Session>> by_token_
      ABSL_GUARDED_BY(mu_);
  // Touched only by the epoll thread (and by Stop after joining it).
  absl::flat_hash_map<int, std::shared_ptr<Session>> by_fd_;
};

}  // namespace memd::session
