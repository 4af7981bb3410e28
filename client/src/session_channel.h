#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/src/daemon_trust.h"
#include "common/plain_mutex.h"
#include "common/session_codec.h"
#include "common/unique_fd.h"
#include "common/unix_socket.h"

namespace memd::internal {

class SessionChannel;

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

  // Connects (as Connect) to the first of `socket_dirs` where a daemon
  // listens, and says which. A directory that is not there, or where nothing
  // listens (IsNoListener), is passed over for the next; any other failure
  // ends the search, so that a directory an untrusted user made, or an
  // untrusted daemon, is reported, never skipped. Every directory tried is
  // checked as Connect checks one. Errors: as Connect (alone, a single
  // directory's as they are); UNAVAILABLE naming each directory tried and
  // why, when none had a daemon.
  struct First;
  static absl::StatusOr<First> ConnectFirst(const std::vector<std::string>& socket_dirs,
                                            absl::Duration timeout, const DaemonTrust& trust);

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

  // Reads every packet waiting, without blocking for more, unless a call
  // is reading the socket now (it files them itself): descriptors are kept
  // for their calls, freed-buffer notices for TakeFreed, anything else is
  // dropped. Errors: UNAVAILABLE (the daemon hung up), the errno mapping.
  absl::Status DrainIfIdle();

  // The buffer ids of the BuffersFreed notices read so far (by TakeFd or
  // Drain), each once.
  std::vector<std::uint64_t> TakeFreed();

  // Whether the daemon takes calls on this socket (the fast control path:
  // protocol version 2 and later).
  bool takes_calls() const { return takes_calls_; }

  // A call's answer, with the descriptor that came in its packet.
  struct Answer {
    SessionAnswer answer;
    UniqueFd fd;
  };
  // Sends a call of `kind` (the request message's bytes) and waits for its
  // answer; packets for others that arrive first are kept for them.
  // Errors: UNAVAILABLE (the daemon hung up, or the socket is full: send
  // the call over gRPC instead), DEADLINE_EXCEEDED, DATA_LOSS. The answer's
  // own code is the daemon's verdict. `unsent` (when given) is set when the
  // call never left: the socket took no call.
  absl::StatusOr<Answer> Call(SessionCallKind kind, std::string request, absl::Duration timeout,
                              bool* unsent = nullptr);

  // Sends a Release that wants no answer (call_id 0): its outcome is not
  // reported. Errors: UNAVAILABLE (hung up or full: send it over gRPC
  // instead).
  absl::Status SendRelease(std::string request);
  // Returns once memd took every Release sent so far (any call answered
  // since covers them; else one Barrier call), so that a call on another path
  // (gRPC) sees them done. Errors: as Call.
  absl::Status SettleReleases(absl::Duration timeout);

  enum class Event { kHungUp, kWoken, kTimedOut };
  // Blocks until the daemon closes its end, `wake_fd` becomes readable or
  // `timeout` passes, and says which (in that order when several are);
  // reads nothing, so a caller on another thread may take descriptors
  // meanwhile. Errors: the errno mapping of poll.
  absl::StatusOr<Event> Wait(int wake_fd, absl::Duration timeout) const;

 private:
  SessionChannel(UniqueFd socket, std::uint64_t id, std::string token,
                 std::string directory, bool takes_calls)
      : socket_(std::move(socket)),
        id_(id),
        token_(std::move(token)),
        directory_(std::move(directory)),
        takes_calls_(takes_calls) {}

  // Reads packets until `slots` holds `key`, filing the others, and takes
  // it out. Errors: as TakeFd.
  template <typename Value>
  absl::StatusOr<Value> AwaitLocked(std::map<std::uint64_t, Value>& slots, std::uint64_t key,
                                    absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Sends one call packet without blocking. Errors: UNAVAILABLE.
  absl::Status SendCall(const SessionCall& call);

  // Keeps a descriptor for its call or a notice for TakeFreed. The answer
  // to call `awaited` (non-zero) goes to `*taken` instead of the map: the
  // caller waiting for it takes it at once. Errors: DATA_LOSS (a packet
  // memd does not send).
  absl::Status FileLocked(ReceivedPacket packet, std::uint64_t awaited = 0,
                          std::optional<Answer>* taken = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const UniqueFd socket_;
  const std::uint64_t id_;
  const std::string token_;
  const std::string directory_;
  const bool takes_calls_;
  std::atomic<std::uint64_t> next_call_id_{1};
  // Releases sent (SendRelease), and how many of them a call answered
  // since is known to come after.
  std::atomic<std::uint64_t> releases_sent_{0};
  std::atomic<std::uint64_t> releases_settled_{0};
  PlainMutex mu_;
  // Descriptors that arrived for calls still on their way back. Capped: an
  // entry is orphaned only when its call's reply was lost.
  std::map<std::uint64_t, UniqueFd> waiting_ ABSL_GUARDED_BY(mu_);
  // Ids of the BuffersFreed notices not yet taken (TakeFreed). Capped.
  PlainMutex freed_mu_ ABSL_ACQUIRED_AFTER(mu_);
  std::vector<std::uint64_t> freed_ ABSL_GUARDED_BY(freed_mu_);
  // Answers that arrived for calls still waiting, by call id. Capped: an
  // entry is orphaned only when its call gave up waiting.
  std::map<std::uint64_t, Answer> answers_ ABSL_GUARDED_BY(mu_);
};

struct SessionChannel::First {
  std::unique_ptr<SessionChannel> channel;
  std::string socket_dir;  // As given, of `socket_dirs`.
};

}  // namespace memd::internal
