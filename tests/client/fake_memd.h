#pragma once

// A stand-in for memd in this process, for the client's half of what memd
// does not serve yet: Reclaim (leases handed on from a session that ended
// with a restart). It speaks memd's protocol on a socket directory, as
// little of it as libmemd's calls on leases need.

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/unique_fd.h"
#include "grpcpp/grpcpp.h"
#include "memd/v1/memd.grpc.pb.h"

namespace memd::test {

/// Greets sessions on the session socket and serves Create (a writable
/// memfd, sent on the caller's session socket), Seal, Release, Reclaim and
/// Ping on the control socket; every other call is UNIMPLEMENTED. HangUp
/// closes every session as a restart of memd does, and keeps their leases
/// for a Reclaim with their token (unless told to refuse or fail). Owns the
/// sockets, a thread that accepts sessions, and the gRPC server.
/// Thread-safe.
class FakeMemd final : public v1::Memd::Service {
 public:
  // Listens on `socket_dir` (which exists). Errors: the sockets'.
  static absl::StatusOr<std::unique_ptr<FakeMemd>> Start(const std::string& socket_dir);
  ~FakeMemd() override;

  // The token the stand-in greets session `session_id` with.
  static std::string Token(std::uint64_t session_id);

  // Ends every session: its socket closes, its leases wait for a Reclaim.
  void HangUp();
  // From now on, Reclaim refuses `lease_id` (NOT_FOUND), as memd does a
  // lease whose grace period is over.
  void Refuse(std::uint64_t lease_id);
  // From now on, every Reclaim call fails whole with `status`.
  void FailReclaim(grpc::Status status);

  // Every Reclaim call so far, in order.
  std::vector<v1::ReclaimRequest> reclaims() const;
  // Sessions greeted and not hung up.
  std::size_t live_sessions() const;
  // The id of the session that holds `lease_id` now; 0 when none does.
  std::uint64_t holder(std::uint64_t lease_id) const;
  // Leases sealed and released, in order, with the id of the session that
  // asked.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> sealed() const;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> released() const;

  grpc::Status Create(grpc::ServerContext* context, const v1::CreateRequest* request,
                      v1::Lease* lease) override;
  grpc::Status Seal(grpc::ServerContext* context, const v1::SealRequest* request,
                    v1::SealReply* reply) override;
  grpc::Status Release(grpc::ServerContext* context, const v1::ReleaseRequest* request,
                       v1::ReleaseReply* reply) override;
  grpc::Status Reclaim(grpc::ServerContext* context, const v1::ReclaimRequest* request,
                       v1::ReclaimReply* reply) override;
  grpc::Status Ping(grpc::ServerContext* context, const v1::PingRequest* request,
                    v1::PingReply* reply) override;

 private:
  struct Session {
    std::uint64_t id = 0;
    std::string token;
    UniqueFd socket;  // Closed (invalid) once hung up.
  };

  FakeMemd() = default;
  void Accept();
  // The live session whose token the call carries, or nullptr.
  Session* CallerLocked(const grpc::ServerContext& context)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The caller's session into `holder` when it holds `lease_id`; else the
  // status to answer (no session, or a lease it does not hold).
  grpc::Status HolderLocked(const grpc::ServerContext& context, std::uint64_t lease_id,
                            Session** holder) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  UniqueFd listener_;
  UniqueFd stop_[2];  // A pipe: written to at destruction.
  std::thread acceptor_;
  std::unique_ptr<grpc::Server> server_;

  mutable absl::Mutex mu_;
  std::map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);  // By token.
  std::map<std::uint64_t, std::string> leases_ ABSL_GUARDED_BY(mu_);  // Id -> token.
  std::set<std::uint64_t> refused_ ABSL_GUARDED_BY(mu_);
  grpc::Status reclaim_status_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ReclaimRequest> reclaims_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> sealed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> released_ ABSL_GUARDED_BY(mu_);
  std::uint64_t next_session_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t next_lease_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace memd::test
