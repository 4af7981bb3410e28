#pragma once

#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "common/location.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/backend/backend.h"
#include "daemon/broker/broker.h"
#include "daemon/durable/report.h"
#include "absl/functional/function_ref.h"
#include "daemon/service/call_observer.h"
#include "daemon/service/copy_desk.h"
#include "daemon/service/waiting_open.h"
#include "daemon/pool/pool_set.h"
#include "daemon/session/session_server.h"
#include "daemon/transfer/engine.h"
#include "memd/v1/memd.grpc.pb.h"

namespace memd::service {

// What Stats reports about the daemon itself.
struct DaemonInfo {
  std::string version;
  std::string backend;
  std::string metrics_address;
  absl::Time started;
  // Fixed before the service is made: recovery runs before anyone is served.
  durable::DurabilityStatus durability;
};

inline constexpr char kSessionMetadataKey[] = "memd-session";
// The most transfers one ListTransfers reply carries (it says how many more).
inline constexpr std::size_t kMaxListedTransfers = 1000;
// The longest an Open may wait for a seal.
inline constexpr absl::Duration kMaxOpenWait = absl::Hours(24);

/// The memd.v1.Memd gRPC service: authenticates each call by its session
/// token, validates what the broker does not, calls the broker, sends
/// descriptors over the caller's session socket and converts statuses. The
/// only code that sees gRPC. Borrows the broker, pools and session server
/// (they outlive the gRPC server). Thread-safe.
/// Errors: UNAUTHENTICATED (missing or unknown token, or a token presented
/// on a connection of another uid than its session's), the broker's errors,
/// INVALID_ARGUMENT (bad enum values, wait beyond kMaxOpenWait),
/// UNAVAILABLE (a descriptor could not reach the client),
/// DEADLINE_EXCEEDED (a waiting Open ran out of time), PERMISSION_DENIED
/// (Trim by anyone but root or the daemon's user: broker::MayTrim);
/// transfers: the engine's errors, NOT_FOUND (another session's transfer
/// id), INVALID_ARGUMENT (a wait beyond kMaxTransferWait), UNAVAILABLE (no
/// engine).
///
/// Transfers are per session: their ids mean something only to the session
/// that started them, and a session's transfers end before its leases
/// (EndSession).
class MemdService final : public v1::Memd::CallbackService {
 public:
  // `backend` (may be null in tests) reports the devices in Stats;
  // `observer` (may be null) hears of every finished call; `engine` (may be
  // null: copies are then UNAVAILABLE) runs copies.
  MemdService(broker::Broker& broker, const pool::PoolSet& pools,
              const session::SessionServer& sessions, DaemonInfo info,
              const backend::Backend* backend = nullptr,
              CallObserver* observer = nullptr, transfer::Engine* engine = nullptr);

  // Every method of memd.v1.Memd by its proto name, as calls report
  // themselves to the CallObserver: from the service's descriptor, so a new
  // rpc is never missing from a list kept by hand.
  static std::vector<std::string> MethodNames();

  // A session ended (its client hung up or died): CopyDesk::EndSession.
  // Blocks up to `drain`: call it off threads that serve other clients.
  void EndSession(broker::SessionId session, absl::Duration drain) {
    copies_.EndSession(session, drain);
  }

  // A call of the fast control path (SessionHooks::call, on the session
  // server's thread): the same checks and broker calls as its gRPC method,
  // observed under the method's name, answered on the session socket
  // without blocking. Only what waits for nothing is taken there: an Open
  // with a wait, a location or a memory wait is INVALID_ARGUMENT (libmemd
  // sends those over gRPC), as is a call that is none of Open, Release and
  // Seal, or an Open or Seal that wants no answer (call_id 0).
  void HandleSessionCall(session::Session& session, const SessionCall& call);

  grpc::ServerUnaryReactor* Create(grpc::CallbackServerContext* context,
                                   const v1::CreateRequest* request,
                                   v1::Lease* reply) override;
  grpc::ServerUnaryReactor* Open(grpc::CallbackServerContext* context,
                                 const v1::OpenRequest* request,
                                 v1::Lease* reply) override;
  grpc::ServerUnaryReactor* OpenOrCreate(grpc::CallbackServerContext* context,
                                         const v1::OpenOrCreateRequest* request,
                                         v1::Lease* reply) override;
  grpc::ServerUnaryReactor* Seal(grpc::CallbackServerContext* context,
                                 const v1::SealRequest* request,
                                 v1::SealReply* reply) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* context,
                                    const v1::ReleaseRequest* request,
                                    v1::ReleaseReply* reply) override;
  grpc::ServerUnaryReactor* Unlink(grpc::CallbackServerContext* context,
                                   const v1::UnlinkRequest* request,
                                   v1::UnlinkReply* reply) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const v1::ListRequest* request,
                                 v1::ListReply* reply) override;
  grpc::ServerUnaryReactor* Stat(grpc::CallbackServerContext* context,
                                 const v1::StatRequest* request,
                                 v1::BufferInfo* reply) override;
  grpc::ServerUnaryReactor* Stats(grpc::CallbackServerContext* context,
                                  const v1::StatsRequest* request,
                                  v1::StatsReply* reply) override;
  grpc::ServerUnaryReactor* ListSessions(
      grpc::CallbackServerContext* context,
      const v1::ListSessionsRequest* request,
      v1::ListSessionsReply* reply) override;
  grpc::ServerUnaryReactor* Usage(grpc::CallbackServerContext* context,
                                  const v1::UsageRequest* request,
                                  v1::UsageReply* reply) override;
  grpc::ServerUnaryReactor* Trim(grpc::CallbackServerContext* context,
                                 const v1::TrimRequest* request,
                                 v1::TrimReply* reply) override;
  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context,
                                 const v1::PingRequest* request,
                                 v1::PingReply* reply) override;
  grpc::ServerUnaryReactor* Reclaim(grpc::CallbackServerContext* context,
                                    const v1::ReclaimRequest* request,
                                    v1::ReclaimReply* reply) override;
  // Transfers (transfer_calls.cc).
  grpc::ServerUnaryReactor* Copy(grpc::CallbackServerContext* context,
                                 const v1::CopyRequest* request,
                                 v1::CopyReply* reply) override;
  grpc::ServerUnaryReactor* WaitTransfer(grpc::CallbackServerContext* context,
                                         const v1::WaitTransferRequest* request,
                                         v1::TransferProgress* reply) override;
  // Replicas (replica_calls.cc).
  grpc::ServerUnaryReactor* Prefetch(grpc::CallbackServerContext* context,
                                     const v1::PrefetchRequest* request,
                                     v1::BufferInfo* reply) override;
  grpc::ServerUnaryReactor* DropReplica(grpc::CallbackServerContext* context,
                                        const v1::DropReplicaRequest* request,
                                        v1::BufferInfo* reply) override;
  grpc::ServerUnaryReactor* Sync(grpc::CallbackServerContext* context,
                                 const v1::SyncRequest* request,
                                 v1::BufferInfo* reply) override;
  grpc::ServerUnaryReactor* Advise(grpc::CallbackServerContext* context,
                                   const v1::AdviseRequest* request,
                                   v1::AdviseReply* reply) override;
  // The leak report (report_calls.cc).
  grpc::ServerUnaryReactor* Leaks(grpc::CallbackServerContext* context,
                                  const v1::LeaksRequest* request,
                                  v1::LeaksReply* reply) override;
  grpc::ServerUnaryReactor* CancelTransfer(grpc::CallbackServerContext* context,
                                           const v1::CancelTransferRequest* request,
                                           v1::TransferProgress* reply) override;
  // Transfers queued or running: the caller's uid's, every uid's for root
  // (transfer_calls.cc).
  grpc::ServerUnaryReactor* ListTransfers(grpc::CallbackServerContext* context,
                                          const v1::ListTransfersRequest* request,
                                          v1::ListTransfersReply* reply) override;

 private:
  class WaitingCall;
  class TransferWaitCall;

  // Fills the Stats reply's transfer figures (only `only`'s unfinished
  // ones when set) and device health.
  void TransferStatsInto(std::optional<uid_t> only, v1::StatsReply* reply) const;
  // What the driver reports free on the GPU at `location`; nullopt for a
  // host location or a driver that reports none.
  std::optional<std::uint64_t> DriverFree(const Location& location) const;

  // The session of the call's token, when the call comes on a connection
  // of the session's user.
  absl::StatusOr<std::shared_ptr<session::Session>> Authenticate(
      grpc::CallbackServerContext* context) const;
  // Who is on the call's connection (memd accepted it and read SO_PEERCRED).
  std::optional<PeerCredentials> ConnectionPeer(
      const grpc::CallbackServerContext& context) const;

  // Sends the grant's descriptor to the session's client and fills `reply`;
  // sends none when the client maps that buffer already
  // (`mapped_buffer_id`). When the descriptor cannot be sent the lease is
  // released again.
  absl::Status Deliver(session::Session& session, broker::Grant grant,
                       std::uint64_t mapped_buffer_id, v1::Lease* reply);
  // Whether the grant's descriptor must travel: the handle has one and the
  // client does not map that buffer already.
  static bool NeedsDescriptor(const broker::Grant& grant, std::uint64_t mapped_buffer_id);
  // A descriptor that could not be sent: the lease is released again, and
  // the status says why (RESOURCE_EXHAUSTED: too many unread; UNAVAILABLE).
  absl::Status UndoGrant(session::Session& session, const broker::Grant& grant,
                         const absl::Status& send_failed);
  // The grant as a Lease reply, its descriptor named by `fd_seq` (0: none
  // sent, or it rides in the packet of a session answer).
  void FillLease(const broker::Grant& grant, std::uint64_t fd_seq, v1::Lease* reply) const;

  // Seals the session's lease (both paths): the broker's errors, with the
  // session's copies still writing the buffer named.
  absl::Status SealLease(broker::SessionId session, const v1::SealRequest& request,
                         v1::SealReply* reply);
  // The fast control path's calls (session_calls.cc): what each does, into
  // the answer's reply bytes. An Open sends its own answer (its descriptor
  // rides in it) and returns whether it did.
  absl::Status SessionOpen(session::Session& session, const SessionCall& call,
                           SessionAnswer& answer, bool* answered);
  absl::Status SessionSeal(session::Session& session, const SessionCall& call,
                           SessionAnswer& answer);
  absl::Status SessionRelease(session::Session& session, const SessionCall& call);

  // Runs a handler body that finishes at once, answers with its status and
  // tells the observer.
  grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* context,
                                    const char* method,
                                    absl::FunctionRef<absl::Status()> body);
  void Observe(const char* method, absl::StatusCode code, absl::Time start) const;

  // What an Open-like call does with its grant: fills its reply.
  using GrantDelivery = std::function<absl::Status(session::Session&, broker::Grant)>;
  // Deliver into a Lease reply.
  GrantDelivery LeaseDelivery(std::uint64_t mapped_buffer_id, v1::Lease* reply);

  // Finishes an Open-like call now (wait == 0) or after waiting; one that
  // may need a copy made (`for_copy`: it names a location) always waits,
  // without a wait timeout for the copy only. With `memory_wait`, no more
  // than that of the wait goes to waiting for memory.
  grpc::ServerUnaryReactor* OpenMaybeWaiting(grpc::CallbackServerContext* context,
                                             const char* method, OpenRequest request,
                                             std::uint64_t wait_ms, bool for_copy,
                                             GrantDelivery deliver,
                                             std::optional<absl::Duration> memory_wait =
                                                 std::nullopt);
  // Open's and Prefetch's call whose copy at params.location may wait for
  // memory (memory_ms > 0): both waits checked, then OpenMaybeWaiting.
  grpc::ServerUnaryReactor* CopyWaitingForMemoryCall(grpc::CallbackServerContext* context,
                                                     const char* method,
                                                     broker::OpenParams params,
                                                     std::uint64_t wait_ms,
                                                     std::uint64_t memory_ms,
                                                     GrantDelivery deliver);

  broker::Broker& broker_;
  const pool::PoolSet& pools_;
  const session::SessionServer& sessions_;
  const DaemonInfo info_;
  const backend::Backend* const backend_;
  // By memd's ordinal; fixed once the backend is up.
  const std::vector<std::string> device_uuids_;
  CallObserver* const observer_;
  // Copies, their waits and the fence at a session's end.
  CopyDesk copies_;
};

}  // namespace memd::service
