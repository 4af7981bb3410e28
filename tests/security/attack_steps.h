#pragma once

// What the attack steps of memd-hostile share (tests/security/attacks_*.cc):
// how a refusal prints, the raw calls they make on a raw session, and calls
// left waiting in the daemon. Header-only; memd-hostile only.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/unique_fd.h"
#include "memd/v1/memd.grpc.pb.h"
#include "tests/security/attacks.h"
#include "tests/support/raw_session.h"

namespace memd::hostile {

// "CODE: message", the way every step prints what refused it.
inline std::string Refusal(const grpc::Status& status) {
  return absl::StrCat(
      absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())), ": ",
      status.error_message());
}

inline std::string Refusal(const absl::Status& status) {
  return absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
}

// The session a step acts in; nullopt, with the daemon's refusal on
// stderr, when there is none.
inline std::optional<test::RawSession> StepSession() {
  auto session = test::RawSession::Connect(SocketDir());
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return std::nullopt;
  }
  return std::move(*session);
}

// A lease and the descriptor the daemon sent with it.
struct LeaseWithDescriptor {
  v1::Lease lease;
  UniqueFd fd;
};

// Opens NAME with `access` in `session` and takes its descriptor; nullopt,
// with the reason on stderr, when either fails.
inline std::optional<LeaseWithDescriptor> OpenWithDescriptor(const test::RawSession& session,
                                                             const std::string& name,
                                                             v1::Access access) {
  v1::OpenRequest request;
  request.set_name(name);
  request.set_access(access);
  LeaseWithDescriptor opened;
  grpc::Status status = session.Call(&v1::Memd::Stub::Open, request, &opened.lease);
  if (!status.ok()) {
    std::fprintf(stderr, "Open: %s\n", status.error_message().c_str());
    return std::nullopt;
  }
  auto fd = session.TakeFd(opened.lease.handle().fd_seq());
  if (!fd.ok()) {
    std::fprintf(stderr, "%s\n", fd.status().ToString().c_str());
    return std::nullopt;
  }
  opened.fd = std::move(*fd);
  return opened;
}

// A raw session's calls, each returning the daemon's status and keeping no
// descriptor the daemon sends.
class RawCalls {
 public:
  explicit RawCalls(const test::RawSession& session) : session_(session) {}

  grpc::Status Create(const std::string& name, std::uint64_t size, const std::string& location,
                      v1::Lease* lease) const {
    v1::CreateRequest create;
    create.set_name(name);
    create.set_size_bytes(size);
    create.set_location(location);
    create.set_mode(0600);
    grpc::Status status = session_.Call(&v1::Memd::Stub::Create, create, lease);
    session_.Drain();
    return status;
  }

  grpc::Status Open(const std::string& name, v1::Access access, v1::Lease* lease) const {
    v1::OpenRequest open;
    open.set_name(name);
    open.set_access(access);
    grpc::Status status = session_.Call(&v1::Memd::Stub::Open, open, lease);
    session_.Drain();
    return status;
  }

  // `length` bytes from the start of `from` to the start of `to`.
  grpc::Status Copy(std::uint64_t from, std::uint64_t to, std::uint64_t length,
                    std::uint64_t* transfer,
                    v1::TransferPriority priority = v1::PRIORITY_NORMAL) const {
    v1::CopyRequest copy;
    copy.mutable_source()->set_lease_id(from);
    copy.mutable_source()->set_length(length);
    copy.mutable_destination()->set_lease_id(to);
    copy.mutable_destination()->set_length(length);
    copy.set_priority(priority);
    v1::CopyReply reply;
    grpc::Status status = session_.Call(&v1::Memd::Stub::Copy, copy, &reply);
    *transfer = reply.transfer_id();
    return status;
  }

  grpc::Status Release(std::uint64_t lease) const {
    v1::ReleaseRequest release;
    release.set_lease_id(lease);
    v1::ReleaseReply released;
    return session_.Call(&v1::Memd::Stub::Release, release, &released);
  }

 private:
  const test::RawSession& session_;
};

// Creates NAME (SIZE bytes, MODE) and seals it, keeping no lease.
inline grpc::Status CreateSealed(const test::RawSession& raw, const std::string& name,
                                 std::uint64_t size, std::uint32_t mode) {
  v1::CreateRequest create;
  create.set_name(name);
  create.set_size_bytes(size);
  create.set_mode(mode);
  v1::Lease lease;
  grpc::Status status = raw.Call(&v1::Memd::Stub::Create, create, &lease);
  raw.Drain();
  if (!status.ok()) return status;
  v1::SealRequest seal;
  seal.set_lease_id(lease.lease_id());
  v1::SealReply sealed;
  status = raw.Call(&v1::Memd::Stub::Seal, seal, &sealed);
  if (!status.ok()) return status;
  v1::ReleaseRequest release;
  release.set_lease_id(lease.lease_id());
  v1::ReleaseReply released;
  return raw.Call(&v1::Memd::Stub::Release, release, &released);
}

/// Calls a step leaves waiting in the daemon (opens waiting for a seal,
/// WaitTransfer calls), counting those the daemon refuses at once
/// (RESOURCE_EXHAUSTED). The destructor cancels what still waits and waits
/// for every call to end. Thread-safe.
class WaitingCalls {
 public:
  // Ends the call with its status; the step's `issue` hands it to gRPC.
  using Done = std::function<void(grpc::Status)>;

  ~WaitingCalls() {
    for (auto& context : contexts_) context->TryCancel();
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return done_ == contexts_.size(); });
  }

  // Starts one call of `session`: `issue(context, done)` makes it
  // asynchronously (its request and reply kept alive by the callback) and
  // has `done` run when it ends.
  void Start(const test::RawSession& session,
             const std::function<void(grpc::ClientContext*, Done)>& issue) {
    contexts_.push_back(std::make_unique<grpc::ClientContext>());
    contexts_.back()->AddMetadata("memd-session", session.token);
    issue(contexts_.back().get(), [this](grpc::Status status) {
      std::lock_guard<std::mutex> lock(mu_);
      ++done_;
      if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        ++refused_;
        if (first_refusal_.empty()) first_refusal_ = Refusal(status);
      }
      changed_.notify_all();
    });
  }

  // Once `refusals` were refused (or 30 s passed): "waiting W\nrefused
  // R\nFIRST REFUSAL\n".
  std::string Report(std::size_t refusals) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, std::chrono::seconds(30), [&] { return refused_ >= refusals; });
    return absl::StrCat("waiting ", contexts_.size() - done_, "\nrefused ", refused_, "\n",
                        first_refusal_, "\n");
  }

 private:
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts_;  // Started on one thread.
  std::mutex mu_;
  std::condition_variable changed_;
  std::size_t done_ = 0;
  std::size_t refused_ = 0;
  std::string first_refusal_;
};

}  // namespace memd::hostile
