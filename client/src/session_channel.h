#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/src/daemon_trust.h"
#include "common/unique_fd.h"
#include "common/unix_socket.h"

namespace memd::internal {

/// The client's end of the session socket: the daemon's greeting (session
/// id and token), the descriptors the daemon sends, matched to calls by
/// sequence number, and its notices of device buffers it freed. Owns the socket; the daemon ends the session when it
/// closes. Thread-safe.
class SessionChannel {
 public:
  // Checks the socket directory, connects, checks who listens and reads the
  // greeting (daemon_trust.h: nothing is read from or sent to a daemon the
  // checks refuse). Errors: UNAVAILABLE (no daemon), PERMISSION_DENIED
  // (socket mode; a directory or daemon `trust` refuses), the daemon's
  // refusal (e.g. RESOURCE_EXHAUSTED), DATA_LOSS (a greeting memd would not
  // send).
  static absl::StatusOr<std::unique_ptr<SessionChannel>> Connect(
      const std::string& socket_dir, absl::Duration timeout,
      const DaemonTrust& trust);

  std::uint64_t id() const { return id_; }
  const std::string& token() const { return token_; }
  // The socket directory as checked, symbolic links resolved: where the
  // control socket is too.
  const std::string& directory() const { return directory_; }

  // The descriptor sent with `seq`; descriptors for other calls that arrive
  // first are kept for them. Errors: UNAVAILABLE (the daemon hung up),
  // DEADLINE_EXCEEDED (nothing within `timeout`), DATA_LOSS.
  absl::StatusOr<UniqueFd> TakeFd(std::uint64_t seq, absl::Duration timeout);

  // Whether the daemon closed its end (it exited or restarted).
  bool HungUp() const;

  // Reads every packet waiting, without blocking for more: descriptors are
  // kept for their calls, freed-buffer notices for TakeFreed, anything else
  // is dropped. Errors: UNAVAILABLE (the daemon hung up), the errno mapping.
  absl::Status Drain();

  // The buffer ids of the BuffersFreed notices read so far (by TakeFd or
  // Drain), each once.
  std::vector<std::uint64_t> TakeFreed();

  enum class Event { kHungUp, kWoken, kReadable };
  // Blocks until the daemon closes its end, `wake_fd` becomes readable or a
  // packet waits on the socket, and says which (in that order when several
  // are); reads nothing, so a caller on another thread may take
  // descriptors meanwhile. Errors: the errno mapping of poll.
  absl::StatusOr<Event> Wait(int wake_fd) const;

 private:
  SessionChannel(UniqueFd socket, std::uint64_t id, std::string token,
                 std::string directory)
      : socket_(std::move(socket)),
        id_(id),
        token_(std::move(token)),
        directory_(std::move(directory)) {}

  // Keeps a descriptor for its call or a notice for TakeFreed. Errors:
  // DATA_LOSS (a packet memd does not send).
  absl::Status FileLocked(ReceivedPacket packet) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const UniqueFd socket_;
  const std::uint64_t id_;
  const std::string token_;
  const std::string directory_;
  absl::Mutex mu_;
  // Descriptors that arrived for calls still on their way back. Capped: an
  // entry is orphaned only when its call's reply was lost.
  std::map<std::uint64_t, UniqueFd> waiting_ ABSL_GUARDED_BY(mu_);
  // Ids of the BuffersFreed notices not yet taken (TakeFreed). Capped.
  std::vector<std::uint64_t> freed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace memd::internal
