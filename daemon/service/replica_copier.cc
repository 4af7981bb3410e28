#include "daemon/service/replica_copier.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace memd::service {

transfer::Endpoint EndpointOf(broker::CopyEnd end) {
  transfer::Endpoint endpoint;
  endpoint.memory = end.memory;
  endpoint.length = end.length;
  endpoint.hold = std::move(end.hold);
  // A no-op for a source: its claim never counted among the writers.
  if (end.pin != nullptr) endpoint.written = [claim = end.pin] { claim->Written(); };
  endpoint.pin = std::move(end.pin);
  endpoint.buffer_id = end.buffer.id;
  endpoint.offset = end.offset;
  endpoint.name = std::move(end.buffer.name);
  endpoint.location = end.buffer.location.ToString();
  return endpoint;
}

EngineReplicaCopier::EngineReplicaCopier(transfer::Engine& engine)
    : engine_(engine), thread_([this] { Run(); }) {}

EngineReplicaCopier::~EngineReplicaCopier() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

absl::Status EngineReplicaCopier::Start(broker::SessionId session, uid_t uid,
                                        broker::CopyEnds ends,
                                        std::function<void(const absl::Status&)> done) {
  transfer::TransferSpec spec;
  spec.session = session;
  spec.uid = uid;
  spec.source = EndpointOf(std::move(ends.source));
  spec.destination = EndpointOf(std::move(ends.destination));
  spec.priority = transfer::Priority::kNormal;
  MEMD_ASSIGN_OR_RETURN(transfer::TransferId id, engine_.Submit(std::move(spec)));
  auto watched = engine_.Watch(
      session, id, [this, done = std::move(done)](const transfer::TransferProgress& progress) {
        absl::Status status = progress.status;
        if (progress.state != transfer::TransferState::kDone && status.ok()) {
          status = absl::InternalError(absl::StrCat("transfer ", progress.id, " ended unfinished"));
        }
        Post([done, status] { done(status); });
      });
  if (!watched.ok()) {
    // Nobody would learn how it ended: it must not run.
    engine_.Cancel(session, id).IgnoreError();
    return watched.status();
  }
  return absl::OkStatus();
}

void EngineReplicaCopier::Post(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(work));
}

void EngineReplicaCopier::Run() {
  for (;;) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](EngineReplicaCopier* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return self->stopping_ || !self->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // Stopping, and every end has run.
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

}  // namespace memd::service
