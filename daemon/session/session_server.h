#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "common/unix_socket.h"
#include "daemon/session/control_connections.h"
#include "daemon/session/listener.h"
#include "daemon/session/rate_limited_log.h"
#include "daemon/session/session.h"

namespace memd::session {

// What the server asks of the rest of the daemon when a client comes and
// goes. `start` returns the session id or refuses the client (its status
// reaches the client); `end` is called once for every started session;
// `control` takes a control connection memd accepted and recorded (it hands
// the descriptor to gRPC).
struct SessionHooks {
  // `token` is the one the client's calls will carry (and, after a restart,
  // what it re-claims its leases with).
  std::function<absl::StatusOr<std::uint64_t>(const PeerCredentials& peer,
                                              const std::string& command,
                                              const std::string& token)>
      start;
  std::function<void(std::uint64_t session)> end;
  std::function<void(UniqueFd connection)> control;
  // A call of the fast control path from `session`, on the server's
  // thread: it must not block, and answers (or not) through the session.
  // Unset: calls are dropped.
  std::function<void(Session& session, const SessionCall& call)> call;
};

struct SessionServerOptions {
  // Descriptors a session may leave unread in its socket.
  std::uint32_t max_fds_in_flight_per_session = 32;
  ConnectionLimits connections;
  // Whether to make the listeners refuse descriptors (SO_PASSRIGHTS).
  // false only in tests of kernels that cannot.
  bool refuse_descriptors = true;
};

/// The daemon's front door. On the session socket (SOCK_SEQPACKET) it reads
/// each client's credentials (SO_PEERCRED), greets it with its session id
/// and token, and notices at once when it hangs up or dies (the kernel
/// closes its socket): the session then ends and the daemon releases its
/// leases. On the control socket it accepts gRPC connections itself,
/// records their credentials (ControlConnections) and hands them to gRPC.
///
/// It also reads the fast control path's calls from session sockets and
/// hands them to hooks.call on its thread, one packet a turn per socket.
///
/// No client input can block its thread: the listeners refuse descriptors
/// (where the kernel can; one that comes anyway goes to the closer), calls
/// are handled without waiting (answers are sent without blocking), failing
/// accepts back off, and what clients can trigger is logged at a bounded
/// rate. Owns the listening sockets, one epoll thread and the sessions.
/// Thread-safe.
class SessionServer {
 public:
  // `control` may be empty: no control socket (tests of sessions alone).
  SessionServer(UniqueFd session_listener, UniqueFd control_listener,
                SessionHooks hooks, SessionServerOptions options = {});
  ~SessionServer();  // Stops.

  // Starts the epoll thread. Errors: INTERNAL (epoll/eventfd failed).
  absl::Status Start();

  // Stops accepting, ends every session (calling hooks.end) and joins the
  // thread. Idempotent.
  void Stop();

  // The session a gRPC call's token belongs to, or nullptr.
  std::shared_ptr<Session> Find(absl::string_view token) const;
  // The live session with that id, or nullptr.
  std::shared_ptr<Session> FindById(std::uint64_t id) const;

  // Who is on the control connection with descriptor `fd`, when memd
  // accepted it and it is open.
  std::optional<PeerCredentials> ControlPeer(int fd) const;

  // A reload: new bounds for the next send and the next connection.
  void SetLimits(std::uint32_t max_fds_in_flight_per_session,
                 const ConnectionLimits& connections);

  // Whether the kernel refuses descriptors sent to memd (SO_PASSRIGHTS);
  // known after Start.
  bool refuses_descriptors() const { return refuses_descriptors_; }

  std::size_t size() const;

 private:
  void Run();
  void AcceptSessions(absl::Time now);
  void AcceptControl(absl::Time now);
  void Hangup(int fd);
  // Reads the packets waiting on session socket `fd`, up to kCallsPerTurn,
  // in one system call, and hands the calls to hooks.call in order; drops
  // anything else (a descriptor goes to the closer).
  void ReadCalls(int fd, absl::Time now);
  // A socket with more waiting is reported again by the next epoll_wait
  // (level-triggered), so every busy client takes turns. Several: a client
  // that released without waiting and then opens has two calls waiting, read
  // at once rather than on two wake-ups (issue 28, target 4).
  static constexpr int kCallsPerTurn = 8;
  // The largest call read; a longer packet is cut short and fails to decode.
  static constexpr std::size_t kMaxCallBytes = 16 * 1024;
  // Sets what epoll waits for on a listener: connections, or nothing while
  // it is paused.
  void Watch(const Listener& listener);
  // Milliseconds until the first paused listener may try again; -1: never.
  int NextResumeMs(absl::Time now) const;

  Listener sessions_listener_;
  std::optional<Listener> control_listener_;
  SessionHooks hooks_;
  const bool want_refuse_descriptors_;
  bool refuses_descriptors_ = false;
  std::shared_ptr<SessionShared> shared_;
  UniqueFd epoll_;
  UniqueFd wakeup_;  // eventfd that tells Run to return.
  std::thread thread_;
  RateLimitedLog refusals_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Session>> by_token_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::uint64_t, std::shared_ptr<Session>> by_id_ ABSL_GUARDED_BY(mu_);
  ConnectionLimits connection_limits_ ABSL_GUARDED_BY(mu_);
  ControlConnections connections_;
  // Touched only by the epoll thread (and by Stop after joining it).
  absl::flat_hash_map<int, std::shared_ptr<Session>> by_fd_;
  // Where ReadCalls receives: kCallsPerTurn calls of kMaxCallBytes.
  std::vector<char> calls_read_ = std::vector<char>(kCallsPerTurn * kMaxCallBytes);
};

}  // namespace memd::session
