// MemdService's transfer calls: Copy, WaitTransfer, CancelTransfer and
// ListTransfers, in gRPC's terms; CopyDesk does the work.

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/service/convert.h"
#include "daemon/service/memd_service.h"
#include "daemon/service/transfer_wait.h"
#include "daemon/service/waiting_reactor.h"

namespace memd::service {
namespace {

absl::Status ValidateTransferWait(std::uint64_t wait_ms) {
  // Compared as integers: a duration made of 2^63 ms or more wraps negative.
  const auto most = static_cast<std::uint64_t>(absl::ToInt64Milliseconds(kMaxTransferWait));
  if (wait_ms > most) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wait_ms ", wait_ms, " exceeds the maximum of ", most,
        " ms; wait again for longer waits"));
  }
  return absl::OkStatus();
}

}  // namespace

void MemdService::TransferStatsInto(std::optional<uid_t> only, v1::StatsReply* reply) const {
  absl::StatusOr<transfer::Engine*> engine = copies_.engine();
  if (!engine.ok()) return;
  const transfer::EngineStats stats = (*engine)->Stats();
  if (only.has_value()) {
    const transfer::TransferActivity mine = (*engine)->UidActivity(*only);
    reply->mutable_transfers()->set_active(mine.transfers);
    reply->mutable_transfers()->set_active_bytes(mine.bytes);
  } else {
    ToProto(stats, reply->mutable_transfers());
  }
  for (v1::DeviceInfo& device : *reply->mutable_devices()) {
    for (const transfer::DeviceStats& engine_device : stats.devices) {
      if (engine_device.device == device.ordinal()) ToProto(engine_device, &device);
    }
  }
}

grpc::ServerUnaryReactor* MemdService::ListTransfers(
    grpc::CallbackServerContext* context, const v1::ListTransfersRequest* request,
    v1::ListTransfersReply* reply) {
  return Respond(context, "ListTransfers", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    absl::StatusOr<transfer::Engine*> engine = copies_.engine();
    if (!engine.ok()) return absl::OkStatus();  // No engine runs no copies.
    // Root sees every uid's copies, anyone else its own: the names, sizes
    // and progress of another user's copies are that user's business
    // (docs/security.md).
    const uid_t uid = session->peer().uid;
    const transfer::TransferListing listing =
        (*engine)->List(uid == 0 ? std::nullopt : std::optional<uid_t>(uid), kMaxListedTransfers);
    // Who runs them: the same uid's sessions (every session for root).
    MEMD_ASSIGN_OR_RETURN(std::vector<broker::SessionInfo> sessions,
                          broker_.Sessions(session->id()));
    absl::flat_hash_map<broker::SessionId, const broker::SessionInfo*> owners;
    for (const broker::SessionInfo& owner : sessions) owners.emplace(owner.id, &owner);
    for (const transfer::ListedTransfer& listed : listing.transfers) {
      v1::TransferInfo* out = reply->add_transfers();
      ToProto(listed, listing.now, out);
      // A session that ended meanwhile shows no process.
      if (auto owner = owners.find(listed.session); owner != owners.end()) {
        out->set_pid(static_cast<std::uint32_t>(owner->second->pid));
        out->set_command(owner->second->command);
      }
    }
    reply->set_omitted(listing.omitted);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MemdService::Copy(grpc::CallbackServerContext* context,
                                            const v1::CopyRequest* request,
                                            v1::CopyReply* reply) {
  return Respond(context, "Copy", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    MEMD_ASSIGN_OR_RETURN(transfer::Priority priority, FromProto(request->priority()));
    const CopyOrder order{.source = FromProto(request->source()),
                          .destination = FromProto(request->destination()),
                          .priority = priority,
                          .deadline_ms = request->deadline_ms(),
                          .chunk_bytes = request->chunk_bytes()};
    MEMD_ASSIGN_OR_RETURN(transfer::TransferId id,
                          copies_.Submit(session->id(), session->peer().uid, order));
    reply->set_transfer_id(id);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MemdService::CancelTransfer(
    grpc::CallbackServerContext* context, const v1::CancelTransferRequest* request,
    v1::TransferProgress* reply) {
  return Respond(context, "CancelTransfer", [&]() -> absl::Status {
    MEMD_ASSIGN_OR_RETURN(auto session, Authenticate(context));
    MEMD_ASSIGN_OR_RETURN(transfer::TransferProgress progress,
                          copies_.Cancel(session->id(), request->transfer_id()));
    ToProto(progress, absl::Now(), reply);
    return absl::OkStatus();
  });
}

// A WaitTransfer call in gRPC: how it ends (WaitingReactor does the rest).
// Counted among the session's waiting calls (`ticket`, Broker::
// AddTransferWait) until gRPC is done with it: what the call holds in the
// daemon is bounded per uid and in all, like a waiting open's.
class MemdService::TransferWaitCall final : public WaitingReactor<TransferWait> {
 public:
  TransferWaitCall(MemdService& service, v1::TransferProgress* reply, broker::WatchId ticket)
      : service_(service), start_(absl::Now()), reply_(reply), ticket_(ticket) {}
  ~TransferWaitCall() override { service_.broker_.CancelWatch(ticket_); }

  void Wait(std::unique_ptr<TransferWatcher> watcher, absl::Duration wait) {
    Begin(std::make_shared<TransferWait>(std::move(watcher), wait, *this));
  }

  void End(const absl::Status& status,
           const transfer::TransferProgress* progress) override {
    if (status.ok() && progress != nullptr) ToProto(*progress, absl::Now(), reply_);
    service_.Observe("WaitTransfer", status.code(), start_);
    Answer(status);
  }

 private:
  MemdService& service_;
  const absl::Time start_;
  v1::TransferProgress* const reply_;
  const broker::WatchId ticket_;
};

grpc::ServerUnaryReactor* MemdService::WaitTransfer(
    grpc::CallbackServerContext* context, const v1::WaitTransferRequest* request,
    v1::TransferProgress* reply) {
  auto session = Authenticate(context);
  absl::Status valid = session.ok() ? ValidateTransferWait(request->wait_ms())
                                    : session.status();
  absl::StatusOr<transfer::Engine*> engine = copies_.engine();
  if (valid.ok()) valid = engine.status();
  if (!valid.ok() || request->wait_ms() == 0) {
    return Respond(context, "WaitTransfer", [&]() -> absl::Status {
      MEMD_RETURN_IF_ERROR(valid);
      MEMD_ASSIGN_OR_RETURN(transfer::TransferProgress progress,
                            copies_.Progress((*session)->id(), request->transfer_id()));
      ToProto(progress, absl::Now(), reply);
      return absl::OkStatus();
    });
  }
  const broker::WatchId ticket = broker_.NewWatchId();
  if (absl::Status counted = broker_.AddTransferWait((*session)->id(), ticket); !counted.ok()) {
    return Respond(context, "WaitTransfer", [&] { return counted; });
  }
  auto* call = new TransferWaitCall(*this, reply, ticket);
  call->Wait(std::make_unique<EngineWatcher>(**engine, (*session)->id(),
                                             request->transfer_id()),
             absl::Milliseconds(static_cast<std::int64_t>(request->wait_ms())));
  return call;
}

}  // namespace memd::service
