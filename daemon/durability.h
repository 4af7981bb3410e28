#pragma once

#include <memory>
#include <string>
#include <vector>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "daemon/backend/backend.h"
#include "daemon/broker/broker.h"
#include "daemon/config.h"
#include "daemon/durable/fd_store.h"
#include "daemon/durable/mirror_store.h"
#include "daemon/durable/recorder.h"
#include "daemon/durable/recovery.h"
#include "daemon/durable/report.h"
#include "daemon/pool/pool_set.h"

namespace memd {

/// Durability in a running memd (docs/design.md, "Durability"): the
/// service manager's descriptor store, the recorder that keeps the state
/// in it, what this start recovered, and the grace period that follows.
///
/// Two steps around the pools and the broker: Prepare before the pools
/// (they report segments to segment_journal()), Recover after the broker
/// and before anyone is served, StartGrace once serving. Detach first at
/// shutdown, so that what a shutdown frees stays in the state for the next
/// memd. Owns its parts. Not thread-safe (the daemon's start and shutdown
/// call it).
class Durability {
 public:
  // Takes the descriptors this process was started with. With durability
  // off memd records nothing. Without a service manager's store
  // ($NOTIFY_SOCKET unset) it records into its own (MirrorStore), which an
  // upgrade by exec hands on, and says that a crash loses the buffers.
  static std::unique_ptr<Durability> Prepare(const Config& config,
                                             const backend::Backend& backend);
  ~Durability();

  // Where pools report their segments; nullptr when nothing is recorded.
  pool::SegmentJournal* segment_journal() { return recorder_.get(); }

  // Adopts what the previous memd left and begins recording. Never fails
  // (recovery starts empty, loudly, rather than refusing to start). The
  // broker and the pools must outlive this object.
  void Recover(backend::Backend& backend, pool::PoolSet& pools, broker::Broker& broker,
               const Clock& clock);

  // Once memd serves: after `grace`, adopted buffers that wait for their
  // holders and were not re-claimed go (Broker::EndGrace). Nothing when
  // nothing was recovered. Detach stops it.
  void StartGrace(broker::Broker& broker, absl::Duration grace);

  // What Stats and the metrics show: whether the state is recorded, why
  // not, and what this start recovered.
  durable::DurabilityStatus status() const;

  // For an in-place upgrade: stops recording (the state is final) and
  // returns every descriptor the next memd needs (segments and the state
  // file), borrowed: valid while this object lives. Empty when nothing is
  // recorded.
  std::vector<durable::PassedFd> HandOff();

  // Stops recording and the grace timer; before the broker goes.
  void Detach();

 private:
  Durability() = default;

  std::unique_ptr<durable::MirrorStore> store_;
  std::vector<durable::ListenedFd> listened_;
  std::unique_ptr<durable::Recorder> recorder_;
  bool recording_ = false;
  std::string not_recording_;  // Why, for status(); empty while recording.
  durable::RecoveryReport report_;
  absl::Notification stop_grace_;
  std::thread grace_;
};

}  // namespace memd
