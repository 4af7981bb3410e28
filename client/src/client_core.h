#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "client/src/daemon_trust.h"
#include "client/src/device_imports.h"
#include "client/src/mapping_cache.h"
#include "client/src/session_channel.h"
#include "client/src/ze_imports.h"
#include "common/plain_mutex.h"
#include "common/unique_fd.h"
#include "grpcpp/grpcpp.h"
#include "memd/client.h"
#include "memd/v1/memd.grpc.pb.h"

namespace memd::internal {

// A session and the gRPC channel its calls travel on; replaced as a whole
// when the daemon restarts.
struct Connection {
  std::unique_ptr<SessionChannel> session;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Memd::Stub> stub;
  std::uint64_t generation = 0;
};

/// One lease a Buffer holds, and the generation of the connection whose
/// session holds it now: the one that granted it, or a later one that a
/// Reclaim moved it to after the daemon restarted. Owned by its Buffer;
/// ClientCore keeps a weak reference while the lease lives. A lease id is
/// unique only within one daemon's life (a daemon that kept nothing starts
/// again from 1), so the ticket, not the id, names a lease in this process.
/// Thread-safe: the generation is atomic.
struct LeaseTicket {
  LeaseTicket(std::uint64_t lease_id, std::uint64_t generation)
      : lease_id(lease_id), generation(generation) {}

  const std::uint64_t lease_id;
  std::atomic<std::uint64_t> generation;
};

/// What Client and Buffer share: the current connection, the leases this
/// process holds through it, and this process's mappings. Owned jointly by
/// the Client and its Buffers, Transfers too. Thread-safe.
///
/// After the daemon hung up, the next connection asks it for the old
/// session's live leases (Reclaim) before anyone uses it. While a lease
/// lives, a watcher thread (started with the first lease, joined by the
/// destructor) reconnects as soon as the daemon hangs up, so that a process
/// that only reads its mappings reclaims within the daemon's grace period
/// too. It waits on the session socket whether or not a lease lives (an
/// open then costs it nothing), reads memd's notices while device imports
/// are kept, and idles only once the session ended with no lease to
/// reclaim. The watcher never owns a reference to the core. Lock order: mu_,
/// then tickets_mu_.
class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  ClientCore(std::string socket_dir, absl::Duration call_timeout,
             std::uint64_t mapping_cache_bytes, std::uint64_t device_cache_bytes,
             DaemonTrust trust, void* level_zero_context = nullptr)
      : socket_dir_(std::move(socket_dir)),
        call_timeout_(call_timeout),
        trust_(trust),
        mappings_(mapping_cache_bytes),
        device_imports_(device_cache_bytes),
        ze_imports_(level_zero_context) {}
  // Stops and joins the watcher (in a forked child, where it does not run,
  // lets it be).
  ~ClientCore();
  ClientCore(const ClientCore&) = delete;
  ClientCore& operator=(const ClientCore&) = delete;

  // The live connection, reconnecting first when the daemon hung up.
  // Errors: as SessionChannel::Connect.
  absl::StatusOr<std::shared_ptr<Connection>> Current();

  // The connection last made (nullptr before any), without asking the
  // kernel whether memd hung up since, which Current() does with a poll: for
  // a call over the session socket, which finds a hang-up when the socket
  // takes no call, and then goes on the connection Current() makes.
  std::shared_ptr<Connection> Last();

  // Makes `session` (a session in this core's socket directory, which its
  // maker connected: SessionChannel::ConnectFirst) the first connection.
  void Adopt(std::unique_ptr<SessionChannel> session);

  // Prepares a call context: session token and deadline.
  void Prepare(const Connection& connection, grpc::ClientContext& context,
               absl::Duration extra = absl::ZeroDuration()) const;

  // Takes the lease's descriptor (`attached`, else from the session socket),
  // maps it (or reuses this process's mapping of the same memory) and makes
  // the Buffer (AdoptHints). `mapped` is the mapping the
  // request named in mapped_buffer_id, used when the daemon sent no
  // descriptor.
  // `cached_as`: the name the mapping is kept under for later opens (the
  // buffer's name, or name@location for an open at a location); empty: the
  // buffer's name.
  // `keep_descriptor`: a writable host buffer keeps its descriptor
  // (Buffer::WriteFromFile). `kept`: the device buffer the request named in
  // mapped_buffer_id, as `mapped` for host memory; a read-only device lease
  // is kept imported under `cached_as` (DeviceImports::Keep).
  struct AdoptHints {
    bool populate = false;
    bool keep_descriptor = false;
    std::shared_ptr<Mapping> mapped = nullptr;
    std::string cached_as = {};
    std::optional<DeviceImports::Kept> kept = std::nullopt;
    // The lease's descriptor, when it came in a session answer's packet.
    UniqueFd attached = {};
  };
  absl::StatusOr<Buffer> Adopt(const Connection& connection, const v1::Lease& lease,
                               AdoptHints hints);

  // One call of the fast control path on `connection`'s session socket:
  // `reply` parsed from the answer, and the descriptor that came with it
  // (else an empty one). Errors: the daemon's verdict, as gRPC would have
  // returned it; SessionChannel::Call's (`unsent` as there); DATA_LOSS (an
  // answer that is no `reply`).
  absl::StatusOr<UniqueFd> CallSession(const Connection& connection, SessionCallKind kind,
                                       const google::protobuf::MessageLite& request,
                                       google::protobuf::MessageLite* reply,
                                       bool* unsent = nullptr);

  // Lets go of the device imports kept of buffers memd said it freed (the
  // notices `connection`'s session read so far).
  void ForgetFreed(const Connection& connection);

  MappingCache& mappings() { return mappings_; }
  DeviceImports& device_imports() { return device_imports_; }
  ZeImports& ze_imports() { return ze_imports_; }

  // NOT_FOUND when the ticket's lease ended with its session (the daemon
  // restarted and did not hand it on), and the daemon's errors.
  absl::Status Seal(const LeaseTicket& ticket, BufferInfo* info);
  absl::StatusOr<BufferInfo> Sync(const LeaseTicket& ticket);
  // The current connection, when the ticket's lease lives on it: NOT_FOUND
  // when it ended with its session.
  absl::StatusOr<std::shared_ptr<Connection>> ConnectionOf(const LeaseTicket& ticket);
  // Ends the lease: tells the daemon when the current session holds it;
  // one that ended with its session needs nothing. Forgets the ticket.
  absl::Status Release(const std::shared_ptr<LeaseTicket>& ticket);

  // Client::Copy: checks what only this process knows of the regions (a
  // Buffer that holds a lease of this Client's current session), fills in
  // their lengths, and starts the copy. The daemon checks the rest.
  absl::StatusOr<Transfer> Copy(const Region& source, const Region& destination,
                                const CopyOptions& options);
  // One WaitTransfer call: answers when the transfer ends or after `wait`
  // (zero: at once). NOT_FOUND for a transfer of an older session (the
  // daemon restarted), and the daemon's errors.
  absl::StatusOr<TransferProgress> WaitTransfer(std::uint64_t generation,
                                                std::uint64_t transfer,
                                                absl::Duration wait);
  absl::StatusOr<TransferProgress> CancelTransfer(std::uint64_t generation,
                                                  std::uint64_t transfer);

  const std::string& socket_dir() const { return socket_dir_; }
  absl::Duration call_timeout() const { return call_timeout_; }

  // gRPC status -> absl::Status, saying which daemon when it is unreachable.
  absl::Status FromGrpc(const grpc::Status& status) const;

  // Most lease ids in one Reclaim call.
  static constexpr int kReclaimBatch = 256;

 private:
  // The session a hung-up connection had: what a reclaim names.
  struct EndedSession {
    std::uint64_t generation = 0;
    std::string token;
  };

  // Replaces the connection (connection_ is null or hung up) and, when the
  // one before hung up, reclaims its leases on the new one.
  absl::StatusOr<std::shared_ptr<Connection>> ConnectLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The connection over `session`, made the current one (reclaiming as
  // ConnectLocked says).
  std::shared_ptr<Connection> UseLocked(std::unique_ptr<SessionChannel> session)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks `connection`'s daemon for the live leases of `ended`, kReclaimBatch
  // ids a call, and moves the tickets of those it hands on to
  // `connection`'s generation. Any error means nothing more is reclaimed:
  // the rest stay on their ended session, as if the daemon had kept
  // nothing. Runs under mu_, so that no call uses the new connection before
  // the leases moved.
  void ReclaimLocked(const EndedSession& ended, const Connection& connection)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A new lease granted on `generation`'s session, registered (the watcher
  // starts with the first one).
  std::shared_ptr<LeaseTicket> Register(std::uint64_t lease,
                                        std::uint64_t generation);
  // Whether any registered lease lives; forgets tickets gone.
  bool HoldsLeases();

  // The watcher's loop (see the class comment); returns once stopping_.
  void Watch();
  // Waits until wake_ is written to or `timeout` passes, and empties it.
  void WaitWake(absl::Duration timeout);
  void Wake();
  // One side of a copy as the daemon takes it (Copy): the lease, the
  // offset, the length (unset: the rest of the buffer).
  absl::StatusOr<v1::Region> RegionOf(const Region& region, bool source,
                                      std::uint64_t generation) const;
  // The current connection when it is still that of `generation`'s
  // session; else NOT_FOUND naming the transfer.
  absl::StatusOr<std::shared_ptr<Connection>> TransferConnection(
      std::uint64_t generation, std::uint64_t transfer);

  const std::string socket_dir_;
  const absl::Duration call_timeout_;
  const DaemonTrust trust_;

  PlainMutex mu_;
  std::shared_ptr<Connection> connection_ ABSL_GUARDED_BY(mu_);
  std::uint64_t generations_ ABSL_GUARDED_BY(mu_) = 0;
  // The last session that hung up, until a new connection reclaimed its
  // leases.
  std::optional<EndedSession> ended_ ABSL_GUARDED_BY(mu_);

  PlainMutex tickets_mu_ ABSL_ACQUIRED_AFTER(mu_);
  // Every lease a Buffer of this core holds, by ticket.
  absl::flat_hash_map<const LeaseTicket*, std::weak_ptr<LeaseTicket>> tickets_
      ABSL_GUARDED_BY(tickets_mu_);
  std::thread watcher_ ABSL_GUARDED_BY(tickets_mu_);
  pid_t watcher_pid_ ABSL_GUARDED_BY(tickets_mu_) = -1;
  // An eventfd, made with the watcher: wakes it to stop, or to look again
  // at the leases.
  UniqueFd wake_;
  std::atomic<bool> stopping_{false};
  // The watcher waits for a lease to exist (no session, none held): only
  // then does Register wake it, not at every open.
  std::atomic<bool> idle_{false};

  MappingCache mappings_;
  DeviceImports device_imports_;
  ZeImports ze_imports_;
};

}  // namespace memd::internal
